"""CONCORD: dependency-keyed re-planning of hybrid-parallel training strategies.

Per-layer closed-form primitives (time, memory, communication) are written in a
small symbolic DSL, so each primitive instance knows exactly which model,
hardware and strategy symbols it reads. Values are cached under a signature of
those symbols; after a model edit, a warm re-plan reuses only what the edit did
not touch and returns the same plan as a cache-disabled full search.
"""
