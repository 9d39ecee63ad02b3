"""Seeding: one --seed feeds NumPy, torch and the per-chunk seeds of kernels.

Kernels never touch a global RNG: they receive seeds drawn here from a
SeedSequence, so results do not depend on the number of threads.
"""

from __future__ import annotations

import random

import numpy as np


def generator(seed: int | None) -> np.random.Generator:
    """A NumPy Generator for `seed` (None -> fresh entropy)."""
    return np.random.default_rng(seed)


def chunk_seeds(seed: int, n_chunks: int) -> np.ndarray:
    """`n_chunks` independent uint64 seeds derived from `seed`, stable across thread counts."""
    children = np.random.SeedSequence(seed).spawn(n_chunks)
    return np.array([c.generate_state(1, dtype=np.uint64)[0] for c in children], dtype=np.uint64)


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python's random, NumPy's legacy global RNG and torch (if imported); return a Generator."""
    import sys

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
    return generator(seed)
