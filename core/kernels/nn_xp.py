"""Array-module twin of core.kernels.segments.nn1: NumPy on the CPU, CuPy on CUDA.

Same inputs and outputs as nn1: the nearest reference row of every query row (squared distance as
float32, index; -1 where every reference row is in the query's group), computed as
|q|^2 - 2 q.r + |r|^2 in (block x rblock) GEMM tiles with a streaming argmin, ties to the lowest
index. Unlike nn1 it does not re-check float32 near-ties in float64, so on a near-tie its index may
differ from nn1's exact one. With NumPy it is the reference the CuPy run is compared with; the Numba nn1
stays the CPU default (tests/cure/test_kernels.py compares all three).
"""

from __future__ import annotations

import numpy as np


def _module(xp):
    if xp is None or xp == "numpy":
        return np
    if xp == "cupy":
        import cupy

        return cupy
    return xp


def nn1_xp(query, ref, qgroup=None, rgroup=None, xp=None, block: int = 1024, rblock: int = 8192):
    """nn1 on the array module `xp` (numpy, cupy, or their names); returns NumPy arrays."""
    xp = _module(xp)
    q = xp.ascontiguousarray(xp.asarray(query, dtype=xp.float32))
    r = xp.ascontiguousarray(xp.asarray(ref, dtype=xp.float32))
    if q.ndim != 2 or r.ndim != 2 or q.shape[1] != r.shape[1]:
        raise ValueError("query and ref must be 2-D with the same number of columns")
    if not (bool(xp.isfinite(q).all()) and bool(xp.isfinite(r).all())):
        raise ValueError("nn1: query and ref must be finite")
    nq, nr = q.shape[0], r.shape[0]
    qg = xp.full(nq, -1, xp.int64) if qgroup is None else xp.asarray(qgroup, dtype=xp.int64)
    rg = xp.full(nr, -2, xp.int64) if rgroup is None else xp.asarray(rgroup, dtype=xp.int64)
    r2 = (r * r).sum(1)
    inf = xp.float32(np.inf)
    dist = xp.empty(nq, xp.float32)
    idx = xp.empty(nq, xp.int64)
    for lo in range(0, nq, block):
        hi = min(nq, lo + block)
        qb, gb = q[lo:hi], qg[lo:hi, None]
        best = xp.full(hi - lo, inf, xp.float32)
        arg = xp.full(hi - lo, -1, xp.int64)
        rows = xp.arange(hi - lo)
        for r0 in range(0, nr, rblock):
            r1 = min(nr, r0 + rblock)
            v = r2[None, r0:r1] - 2 * (qb @ r[r0:r1].T)
            v = xp.where((gb >= 0) & (rg[None, r0:r1] == gb), inf, v)
            j = xp.argmin(v, axis=1)
            vj = v[rows, j]
            better = vj < best  # strictly: an earlier tile keeps a tie, as in nn1
            best = xp.where(better, vj, best)
            arg = xp.where(better, j + r0, arg)
        dist[lo:hi] = xp.maximum(best + (qb * qb).sum(1), xp.float32(0))
        idx[lo:hi] = arg
    from methodkit.core.backend import to_numpy

    return np.asarray(to_numpy(dist)), np.asarray(to_numpy(idx))
