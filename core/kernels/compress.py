"""Numba kernels for communication compression: fused delta + top-k / quantise + buffer update.

Used by core.compress; the stochastic rounding draws from a counter-based hash of
(seed, row, column), so results do not depend on threads and need no RNG state.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True)
def _splitmix(x):
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    return x ^ (x >> np.uint64(31))


@njit(cache=True)
def uniform(seed, row, col):
    """A uniform [0, 1) number determined by (seed, row, col)."""
    h = _splitmix(np.uint64(seed) ^ _splitmix(np.uint64(row) * np.uint64(1000003) + np.uint64(col)))
    return (h >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True, parallel=True)
def delta_topk_update(a, m, k):
    """Per row, the k largest |a - m| entries (indices, values); m[row, idx] += values in place."""
    rows, d = a.shape
    idx = np.empty((rows, k), dtype=np.int64)
    val = np.empty((rows, k), dtype=np.float32)
    for r in prange(rows):
        delta = a[r] - m[r]
        order = np.argpartition(-np.abs(delta), k - 1)[:k]
        order.sort()
        for j in range(k):
            c = order[j]
            idx[r, j] = c
            val[r, j] = delta[c]
            m[r, c] += delta[c]
    return idx, val


@njit(cache=True, parallel=True)
def scatter_accumulate(m, idx, val):
    """m[row, idx[row]] += val[row] (the receiver side of top-k)."""
    for r in prange(m.shape[0]):
        for j in range(idx.shape[1]):
            m[r, idx[r, j]] += val[r, j]


@njit(cache=True, parallel=True)
def quant_pack(x, bits, seed, stochastic):
    """Per-row max-abs scale, 2**bits uniform levels on [-s, s], stochastic or nearest rounding, bit-packed.

    Returns (packed uint8 (rows, ceil(d * bits / 8)), scale float32 (rows,)).
    """
    rows, d = x.shape
    levels = (1 << bits) - 1
    per_byte = 8 // bits
    width = (d + per_byte - 1) // per_byte
    packed = np.zeros((rows, width), dtype=np.uint8)
    scale = np.empty(rows, dtype=np.float32)
    for r in prange(rows):
        s = 0.0
        for c in range(d):
            v = abs(x[r, c])
            if v > s:
                s = v
        scale[r] = s
        for c in range(d):
            u = 0.0 if s == 0.0 else (x[r, c] / s + 1.0) * 0.5 * levels
            if stochastic:
                q = int(np.floor(u + uniform(seed, r, c)))
            else:
                q = int(np.floor(u + 0.5))
            q = min(max(q, 0), levels)
            packed[r, c // per_byte] |= np.uint8(q << ((c % per_byte) * bits))
    return packed, scale


@njit(cache=True, parallel=True)
def unpack_accumulate(packed, scale, bits, d, out, accumulate):
    """Decode quant_pack's codes into out (rows, d); adds to out when `accumulate`, else overwrites."""
    rows = packed.shape[0]
    levels = (1 << bits) - 1
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    for r in prange(rows):
        s = scale[r]
        for c in range(d):
            q = (packed[r, c // per_byte] >> ((c % per_byte) * bits)) & mask
            v = (q / levels * 2.0 - 1.0) * s
            if accumulate:
                out[r, c] += v
            else:
                out[r, c] = v


@njit(cache=True, parallel=True)
def delta_quant_pack(a, m, bits, seed, stochastic):
    """quant_pack(a - m) fused with m += decode(codes): one pass over the rows."""
    rows, d = a.shape
    delta = np.empty((rows, d), dtype=np.float32)
    for r in prange(rows):
        for c in range(d):
            delta[r, c] = a[r, c] - m[r, c]
    packed, scale = quant_pack(delta, bits, seed, stochastic)
    unpack_accumulate(packed, scale, bits, d, m, True)
    return packed, scale
