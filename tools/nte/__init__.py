"""nte: Non-Transferable Examples (Catch-Only-One, arXiv 2510.10982).

Model-specific recoding: noise drawn inside the null space of the authorized
model's first layer (its stem) leaves that model's features unchanged while
unauthorized models, whose stems are not aligned with it, see the noise.
"""
