"""Segment statistics over contiguous ids, exact ROC-AUC with ties, Grubbs statistics, blocked 1-NN.

Segments: rows of one segment (a trajectory) are contiguous; `segment_starts(ids)` gives the offsets
[n_seg + 1]. `segment_sum`/`segment_mean` reduce a 1-D or 2-D (row-major) value array per segment,
`returns_to_go` discounts rewards backwards inside each segment.
`roc_auc(scores, labels)` is the Mann-Whitney AUC with mid-ranks for ties (labels 1 = positive).
`grubbs_rows(x)` gives per row the Grubbs statistic max|x - mean| / std (ddof 1) and its argmax.
`nn1(query, ref, qgroup, rgroup)` is a brute-force nearest neighbour (squared Euclidean, float32)
over query blocks in parallel (GEMM tiles, or exact scalar loops with early abandoning); pairs with equal non-negative group are skipped
(leave-one-trajectory-out radii). Every kernel has a plain reference in tests/cure.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True)
def _starts(ids):
    n = ids.shape[0]
    count = 1 if n > 0 else 0
    for i in range(1, n):
        if ids[i] != ids[i - 1]:
            count += 1
    out = np.empty(count + 1, dtype=np.int64)
    out[0] = 0
    k = 1
    for i in range(1, n):
        if ids[i] != ids[i - 1]:
            out[k] = i
            k += 1
    out[count] = n
    return out


def segment_starts(ids) -> np.ndarray:
    """Offsets [n_segments + 1] of runs of equal ids (a trajectory's rows must be contiguous)."""
    ids = np.ascontiguousarray(ids)
    if ids.ndim != 1:
        raise ValueError("ids must be 1-D")
    return _starts(ids)


@njit(cache=True, parallel=True)
def _segment_sum2(values, starts):
    n_seg = starts.shape[0] - 1
    out = np.zeros((n_seg, values.shape[1]), dtype=np.float64)
    for s in prange(n_seg):
        for i in range(starts[s], starts[s + 1]):
            for j in range(values.shape[1]):
                out[s, j] += values[i, j]
    return out


def segment_sum(values, starts) -> np.ndarray:
    """Per-segment sums (float64) of a [n] or [n, k] array."""
    v = np.ascontiguousarray(values, dtype=np.float64)
    flat = v.ndim == 1
    out = _segment_sum2(v.reshape(v.shape[0], -1), np.asarray(starts, dtype=np.int64))
    return out[:, 0] if flat else out


def segment_mean(values, starts) -> np.ndarray:
    """Per-segment means (float64); an empty segment gives NaN."""
    starts = np.asarray(starts, dtype=np.int64)
    total = segment_sum(values, starts)
    n = np.diff(starts).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / (n if total.ndim == 1 else n[:, None])


@njit(cache=True, parallel=True)
def _rtg(rewards, starts, gamma):
    out = np.empty(rewards.shape[0], dtype=np.float64)
    for s in prange(starts.shape[0] - 1):
        acc = 0.0
        for i in range(starts[s + 1] - 1, starts[s] - 1, -1):
            acc = rewards[i] + gamma * acc
            out[i] = acc
    return out


def returns_to_go(rewards, starts, gamma: float = 1.0) -> np.ndarray:
    """Discounted returns-to-go inside each segment."""
    return _rtg(np.ascontiguousarray(rewards, dtype=np.float64), np.asarray(starts, dtype=np.int64), float(gamma))


@njit(cache=True)
def _auc(scores, labels):
    n = scores.shape[0]
    order = np.argsort(scores, kind="mergesort")
    rank_pos = 0.0
    n_pos = 0
    i = 0
    while i < n:
        j = i
        while j + 1 < n and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        mid = 0.5 * (i + j) + 1.0  # ranks i+1..j+1 share their mean
        for k in range(i, j + 1):
            if labels[order[k]] == 1:
                rank_pos += mid
                n_pos += 1
        i = j + 1
    n_neg = n - n_pos
    if n_pos == 0 or n_neg == 0:
        return np.nan
    return (rank_pos - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def roc_auc(scores, labels) -> float:
    """Exact ROC-AUC (ties count one half); NaN when a class is empty."""
    s = np.ascontiguousarray(scores, dtype=np.float64)
    y = np.ascontiguousarray(labels, dtype=np.int64)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError("scores and labels must be 1-D of equal length")
    if not np.isfinite(s).all():
        raise ValueError("scores must be finite")
    return float(_auc(s, y))


@njit(cache=True, parallel=True)
def _grubbs(x):
    n_rows, n = x.shape
    g = np.empty(n_rows, dtype=np.float64)
    arg = np.empty(n_rows, dtype=np.int64)
    for r in prange(n_rows):
        mean = 0.0
        for j in range(n):
            mean += x[r, j]
        mean /= n
        var = 0.0
        for j in range(n):
            var += (x[r, j] - mean) ** 2
        sd = np.sqrt(var / (n - 1))
        best = -1.0
        k = 0
        for j in range(n):
            d = abs(x[r, j] - mean)
            if d > best:
                best = d
                k = j
        g[r] = best / sd if sd > 0 else 0.0
        arg[r] = k
    return g, arg


def grubbs_rows(x) -> tuple[np.ndarray, np.ndarray]:
    """Per row of [rows, n >= 3]: the Grubbs statistic and the index of the most extreme value."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] < 3:
        raise ValueError("grubbs_rows needs a [rows, n>=3] array")
    return _grubbs(x)


def grubbs_critical(n: int, alpha: float = 0.05) -> float:
    """Two-sided Grubbs critical value for n values at level alpha."""
    from scipy import stats

    t = stats.t.ppf(1 - alpha / (2 * n), n - 2)
    return float((n - 1) / np.sqrt(n) * np.sqrt(t * t / (n - 2 + t * t)))


@njit(cache=True, parallel=True)
def _nn1(query, ref, qgroup, rgroup, block):
    nq, d = query.shape
    nr = ref.shape[0]
    dist = np.empty(nq, dtype=np.float32)
    idx = np.empty(nq, dtype=np.int64)
    n_blocks = (nq + block - 1) // block
    for b in prange(n_blocks):
        for i in range(b * block, min(nq, (b + 1) * block)):
            best = np.float32(np.inf)
            best_j = -1
            g = qgroup[i]
            for j in range(nr):
                if g >= 0 and rgroup[j] == g:
                    continue
                acc = np.float32(0.0)
                for k in range(d):
                    diff = query[i, k] - ref[j, k]
                    acc += diff * diff
                    if acc >= best:
                        break  # early abandon
                if acc < best:
                    best = acc
                    best_j = j
            dist[i] = best
            idx[i] = best_j
    return dist, idx


@njit(cache=True, parallel=True, fastmath=True)
def _nn1_gemm(query, ref, qgroup, rgroup, block, rblock):
    nq, d = query.shape
    nr = ref.shape[0]
    r2 = np.empty(nr, dtype=np.float32)
    for j in range(nr):
        acc = np.float32(0.0)
        for k in range(d):
            acc += ref[j, k] * ref[j, k]
        r2[j] = acc
    dist = np.full(nq, np.inf, dtype=np.float32)
    idx = np.full(nq, -1, dtype=np.int64)
    n_blocks = (nq + block - 1) // block
    for b in prange(n_blocks):
        lo = b * block
        hi = min(nq, lo + block)
        qb = np.ascontiguousarray(query[lo:hi])
        for r0 in range(0, nr, rblock):
            r1 = min(nr, r0 + rblock)
            g = qb @ np.ascontiguousarray(ref[r0:r1]).T  # one GEMM tile, never the full matrix
            for i in range(hi - lo):
                best = dist[lo + i]
                bj = idx[lo + i]
                grp = qgroup[lo + i]
                for j in range(r1 - r0):
                    v = r2[r0 + j] - 2 * g[i, j]
                    if v < best and not (grp >= 0 and rgroup[r0 + j] == grp):
                        best = v
                        bj = r0 + j
                dist[lo + i] = best
                idx[lo + i] = bj
    for i in range(nq):  # add |q|^2 back: squared distances (clipped at 0 against rounding)
        q2 = np.float32(0.0)
        for k in range(d):
            q2 += query[i, k] * query[i, k]
        dist[i] = max(dist[i] + q2, np.float32(0.0))
    return dist, idx


NN_METHODS = {"gemm": "GEMM tiles + streaming argmin", "abandon": "scalar loops with early abandoning"}


def nn1(query, ref, qgroup=None, rgroup=None, block: int = 256, method: str = "gemm") -> tuple[np.ndarray, np.ndarray]:
    """Nearest neighbour of every query row in ref: (squared distance float32, index; -1 if none).

    method "gemm" (default) computes q.r in tiles (|q|^2 - 2 q.r + |r|^2, float32 rounding) with a
    streaming argmin; "abandon" is the exact scalar loop that stops a distance once it exceeds the best."""
    q = np.ascontiguousarray(query, dtype=np.float32)
    r = np.ascontiguousarray(ref, dtype=np.float32)
    if q.ndim != 2 or r.ndim != 2 or q.shape[1] != r.shape[1]:
        raise ValueError("query and ref must be 2-D with the same number of columns")
    if method not in NN_METHODS:
        raise ValueError(f"method must be one of {', '.join(NN_METHODS)}")
    qg = np.full(q.shape[0], -1, np.int64) if qgroup is None else np.ascontiguousarray(qgroup, dtype=np.int64)
    rg = np.full(r.shape[0], -2, np.int64) if rgroup is None else np.ascontiguousarray(rgroup, dtype=np.int64)
    if method == "abandon":
        return _nn1(q, r, qg, rg, int(block))
    if not (np.isfinite(q).all() and np.isfinite(r).all()):
        raise ValueError("nn1: query and ref must be finite")
    return _nn1_gemm(q, r, qg, rg, int(block), 2048)
