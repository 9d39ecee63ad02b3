"""Step contexts of trajectories: same history, the logged next call and the generators' negatives."""

from __future__ import annotations

import numpy as np

from methodkit.tools.cita.generators import KINDS, Pools, negatives, turns_of


def task_contexts(task: dict, pools: Pools, rng: np.random.Generator, kinds=KINDS, max_negatives: int | None = None):
    """Every context (turn k, position i) of a successful trajectory: a candidates record whose first
    candidate is the logged call (or end_turn at a turn's end), then the negatives; `kinds` per negative."""
    turns = turns_of(task)
    steps = task["steps"]
    out = []
    flat_pos = 0
    for k, calls in enumerate(turns):
        for i in range(len(calls) + 1):
            positive, negs = negatives(task, turns, k, i, pools, rng, kinds)
            if max_negatives is not None and len(negs) > max_negatives:
                pick = sorted(rng.choice(len(negs), max_negatives, replace=False))
                negs = [negs[p] for p in pick]
            history = [
                {"call": s["call"], "observation": s["observation"], "error": s["error"], "turn": s["turn"]}
                for s in steps[: flat_pos + i]
            ]
            out.append(
                {
                    "context_id": f"{task['task_id']}:{k}:{i}",
                    "task_id": task["task_id"],
                    "instruction": task["instruction"][: k + 1],
                    "tools": task["tools"],
                    "history": history,
                    "candidates": [positive, *[c for _, c in negs]],
                    "kinds": ["gold", *[kind for kind, _ in negs]],
                    "goal": [c["name"] for c in calls],
                    "turn": k,
                }
            )
        flat_pos += len(calls)
    return out
