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
def row_key(seed, row):
    """The per-row key of the rounding stream (hashing (seed, row) once per row, not per entry)."""
    return _splitmix(np.uint64(seed) ^ _splitmix(np.uint64(row) * np.uint64(1000003)))


@njit(cache=True)
def uniform_pair(key, pair):
    """Two independent uniform [0, 1) numbers (32 bits each) for columns 2*pair and 2*pair + 1."""
    h = _splitmix(key + np.uint64(pair) * np.uint64(0x9E3779B97F4A7C15))
    scale = 1.0 / 4294967296.0
    return (h & np.uint64(0xFFFFFFFF)) * scale, (h >> np.uint64(32)) * scale


@njit(cache=True)
def _kth_largest(values, k):
    """The k-th largest entry of `values` (1-based k) by in-place quickselect (values is scratch).

    Hand-written because numba's np.partition copies and checks for NaN on every call, which
    dominated the top-k kernel; the inputs here are finite magnitudes.
    """
    lo, hi = 0, values.size - 1
    target = k - 1  # position in descending order
    while lo < hi:
        mid = (lo + hi) // 2
        # median of three as the pivot, so sorted rows do not degrade to quadratic time
        x, y, z = values[lo], values[mid], values[hi]
        pivot = max(min(x, y), min(max(x, y), z))
        i, j = lo, hi
        while i <= j:
            while values[i] > pivot:
                i += 1
            while values[j] < pivot:
                j -= 1
            if i <= j:
                values[i], values[j] = values[j], values[i]
                i += 1
                j -= 1
        if target <= j:
            hi = j
        elif target >= i:
            lo = i
        else:
            return values[target]
    return values[target]


@njit(cache=True)
def _gather_at_least(a, m, floor, magnitudes, columns):
    """Write |a - m| and the column of every entry with |a - m| >= floor, in column order; return the count."""
    count = 0
    for c in range(a.size):  # branch-free: about 5% of the entries pass, unpredictably
        v = abs(a[c] - m[c])
        magnitudes[count] = v
        columns[count] = c
        count += v >= floor
    return count


@njit(cache=True)
def _topk_row(a, m, k, idx, val, sample_stride):
    """Top-k of |a - m| for one row into idx (ascending columns) and val; m[idx] += val.

    A strided sample gives a floor a little below the k-th largest magnitude (a margin of a few
    binomial standard deviations); one pass gathers the entries at or above it, and only those are
    selected from. When the sample guesses badly (fewer than k entries pass, or more than 4k) every
    entry is gathered instead, so the result is always exact. Ties at the k-th magnitude go to the
    lower columns.
    """
    d = a.size
    magnitudes = np.empty(d, dtype=np.float32)
    columns = np.empty(d, dtype=np.int64)
    n_sample = (d + sample_stride - 1) // sample_stride
    count = 0
    if k * 4 <= d and n_sample >= 64:
        sample = np.abs(a[::sample_stride] - m[::sample_stride])
        expected = k * n_sample / d
        floor = _kth_largest(sample, min(n_sample, int(expected + 3.0 * np.sqrt(expected) + 2.0)))
        count = _gather_at_least(a, m, floor, magnitudes, columns)
    if count < k or count > 4 * k:
        count = _gather_at_least(a, m, np.float32(0.0), magnitudes, columns)
    if count < k:  # only NaN fails |x| >= 0: fewer than k finite entries, so NaN fills the row up to k
        for c in range(d):
            v = abs(a[c] - m[c])
            magnitudes[c] = v if v == v else np.inf
            columns[c] = c
        count = d
    candidates = magnitudes[:count]
    threshold = _kth_largest(candidates.copy(), k)
    ties_left = k - np.sum(candidates > threshold)  # entries equal to the threshold that still fit
    j = 0
    for i in range(count):
        v = candidates[i]
        keep = v > threshold
        if not keep and v == threshold and ties_left > 0:
            keep = True
            ties_left -= 1
        if keep:
            c = columns[i]
            delta = a[c] - m[c]
            idx[j] = c
            val[j] = delta
            m[c] += delta
            j += 1


@njit(cache=True, parallel=True)
def delta_topk_update(a, m, k):
    """Per row, the k largest |a - m| entries (indices ascending, values); m[row, idx] += values in place."""
    rows = a.shape[0]
    idx = np.empty((rows, k), dtype=np.int64)
    val = np.empty((rows, k), dtype=np.float32)
    for r in prange(rows):
        _topk_row(a[r], m[r], k, idx[r], val[r], 16)
    return idx, val


@njit(cache=True, parallel=True)
def scatter_accumulate(m, idx, val):
    """m[row, idx[row]] += val[row] (the receiver side of top-k)."""
    for r in prange(m.shape[0]):
        for j in range(idx.shape[1]):
            m[r, idx[r, j]] += val[r, j]


@njit(cache=True)
def _decode_table(levels, s):
    """The value each code decodes to for scale s (one expression, shared by both ends of a link)."""
    table = np.empty(levels + 1)
    for q in range(levels + 1):
        table[q] = (q / levels * 2.0 - 1.0) * s
    return table


@njit(cache=True)
def _quant_row(x, bits, seed, row, stochastic, packed, m):
    """Quantise one row x into `packed` (bit codes) and return its scale; when m is given (the fused
    delta update), also m += decoded value, computed exactly as unpack_accumulate computes it so the
    sender's reference stays bit-identical to the receiver's."""
    d = x.size
    levels = (1 << bits) - 1
    per_byte = 8 // bits
    s = np.float32(0.0)
    for c in range(d):
        v = abs(x[c])
        if v > s:
            s = v
    to_levels = 0.0 if s == 0.0 else 0.5 * levels / s
    key = row_key(seed, row)
    decoded = _decode_table(levels, s)
    u0 = u1 = 0.5  # nearest rounding
    for b in range(packed.size):
        byte = 0
        for j in range(per_byte):
            c = b * per_byte + j
            if c >= d:
                break
            if stochastic and c % 2 == 0:
                u0, u1 = uniform_pair(key, c // 2)
            q = min(int((x[c] + s) * to_levels + (u0 if c % 2 == 0 else u1)), levels)
            byte |= q << (j * bits)
            if m is not None:
                m[c] += decoded[q]
        packed[b] = np.uint8(byte)
    return s


@njit(cache=True, parallel=True)
def quant_pack(x, bits, seed, stochastic):
    """Per-row max-abs scale, 2**bits uniform levels on [-s, s], stochastic or nearest rounding, bit-packed.

    Returns (packed uint8 (rows, ceil(d * bits / 8)), scale float32 (rows,)).
    """
    rows, d = x.shape
    per_byte = 8 // bits
    packed = np.zeros((rows, (d + per_byte - 1) // per_byte), dtype=np.uint8)
    scale = np.empty(rows, dtype=np.float32)
    for r in prange(rows):
        scale[r] = _quant_row(x[r], bits, seed, r, stochastic, packed[r], None)
    return packed, scale


@njit(cache=True, parallel=True)
def unpack_accumulate(packed, scale, bits, d, out, accumulate):
    """Decode quant_pack's codes into out (rows, d); adds to out when `accumulate`, else overwrites."""
    rows = packed.shape[0]
    levels = (1 << bits) - 1
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    for r in prange(rows):
        decoded = _decode_table(levels, scale[r])
        for c in range(d):
            v = decoded[(packed[r, c // per_byte] >> ((c % per_byte) * bits)) & mask]
            if accumulate:
                out[r, c] += v
            else:
                out[r, c] = v


@njit(cache=True, parallel=True)
def delta_quant_pack(a, m, bits, seed, stochastic):
    """quant_pack(a - m) fused with m += decode(codes): one pass over each row, no full-size temporaries."""
    rows, d = a.shape
    per_byte = 8 // bits
    packed = np.zeros((rows, (d + per_byte - 1) // per_byte), dtype=np.uint8)
    scale = np.empty(rows, dtype=np.float32)
    for r in prange(rows):
        delta = a[r] - m[r]
        scale[r] = _quant_row(delta, bits, seed, r, stochastic, packed[r], m[r])
    return packed, scale
