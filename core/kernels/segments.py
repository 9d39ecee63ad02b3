"""Segment statistics over contiguous ids, exact ROC-AUC with ties, Grubbs statistics, blocked 1-NN.

Segments: rows of one segment (a trajectory) are contiguous; `segment_starts(ids)` gives the offsets
[n_seg + 1]. `segment_sum`/`segment_mean` reduce a 1-D or 2-D (row-major) value array per segment,
`returns_to_go` discounts rewards backwards inside each segment.
`roc_auc(scores, labels)` is the Mann-Whitney AUC with mid-ranks for ties (labels 1 = positive).
`grubbs_rows(x)` gives per row the Grubbs statistic max|x - mean| / std (ddof 1) and its argmax.
`nn1(query, ref, qgroup, rgroup)` is a brute-force nearest neighbour (squared Euclidean, float32)
over query blocks in parallel: float32 register-blocked tiles pick candidates, float64 decides (exact, ties to
the lowest index); pairs with equal non-negative group are skipped
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


# Blocked 1-NN. Pass 1 (_nn1_tiles, float32, fastmath without "ninf": padded references carry +inf)
# computes v = |r|^2 - 2 q.r on register-blocked tiles of 4 queries x 4 coordinates against one panel of
# P references stored coordinate-major (refp[panel, k, j], so the j loop is one SIMD stream); a panel with
# no v within tol of the query's best so far is abandoned after one vectorised count. It keeps, per query,
# the references whose v lies within tol of the best: tol bounds twice the float32 rounding of v, so the
# exact winner is always among them. Pass 2 (_nn1_resolve, strict float64) measures those candidates
# exactly and keeps the smallest distance, ties to the lowest index; a query with more than `cap`
# candidates (many exact ties) is resolved by a full exact scan.
_FASTMATH = {"nnan", "nsz", "arcp", "contract", "reassoc"}


@njit(cache=True, parallel=True, fastmath=_FASTMATH)
def _nn1_tiles(query, refp, r2p, qgroup, rgroup, tol, qb, cap):
    nq, d = query.shape
    n_pan, _, P = refp.shape
    cand = np.empty((nq, cap), dtype=np.int64)
    ncand = np.zeros(nq, dtype=np.int64)  # -1: overflow, resolved by a full exact scan
    for b in prange((nq + qb - 1) // qb):
        lo = b * qb
        m = min(nq, lo + qb) - lo
        m4 = (m + 3) // 4 * 4
        mq = np.zeros((m4, d), dtype=np.float32)  # -2 q (exact in float32); padded rows stay 0
        for ii in range(m):
            for k in range(d):
                mq[ii, k] = np.float32(-2.0) * query[lo + ii, k]
        best = np.full(m, np.inf, dtype=np.float32)
        cv = np.empty((m, cap), dtype=np.float32)
        ci = np.empty((m, cap), dtype=np.int64)
        nc = np.zeros(m, dtype=np.int64)
        acc = np.empty((m4, P), dtype=np.float32)
        thr = np.full(m4, -np.inf, dtype=np.float32)  # padded rows never hit
        hits = np.zeros(m4, dtype=np.int64)
        for p in range(n_pan):
            for ii in range(m):
                thr[ii] = best[ii] + tol[lo + ii]
            for ii in range(m4):
                for j in range(P):
                    acc[ii, j] = r2p[p, j]
            for k in range(0, d, 4):  # d is padded to a multiple of 4
                for ii in range(0, m4, 4):
                    a00, a01, a02, a03 = mq[ii, k], mq[ii, k + 1], mq[ii, k + 2], mq[ii, k + 3]
                    a10, a11, a12, a13 = mq[ii + 1, k], mq[ii + 1, k + 1], mq[ii + 1, k + 2], mq[ii + 1, k + 3]
                    a20, a21, a22, a23 = mq[ii + 2, k], mq[ii + 2, k + 1], mq[ii + 2, k + 2], mq[ii + 2, k + 3]
                    a30, a31, a32, a33 = mq[ii + 3, k], mq[ii + 3, k + 1], mq[ii + 3, k + 2], mq[ii + 3, k + 3]
                    if k + 4 < d:
                        for j in range(P):
                            r0, r1, r2, r3 = refp[p, k, j], refp[p, k + 1, j], refp[p, k + 2, j], refp[p, k + 3, j]
                            acc[ii, j] += a00 * r0 + a01 * r1 + a02 * r2 + a03 * r3
                            acc[ii + 1, j] += a10 * r0 + a11 * r1 + a12 * r2 + a13 * r3
                            acc[ii + 2, j] += a20 * r0 + a21 * r1 + a22 * r2 + a23 * r3
                            acc[ii + 3, j] += a30 * r0 + a31 * r1 + a32 * r2 + a33 * r3
                        continue
                    t0, t1, t2, t3 = thr[ii], thr[ii + 1], thr[ii + 2], thr[ii + 3]
                    h0 = h1 = h2 = h3 = 0
                    for j in range(P):  # the last coordinates, and a count of v within tol of the best
                        r0, r1, r2, r3 = refp[p, k, j], refp[p, k + 1, j], refp[p, k + 2, j], refp[p, k + 3, j]
                        v0 = acc[ii, j] + (a00 * r0 + a01 * r1 + a02 * r2 + a03 * r3)
                        v1 = acc[ii + 1, j] + (a10 * r0 + a11 * r1 + a12 * r2 + a13 * r3)
                        v2 = acc[ii + 2, j] + (a20 * r0 + a21 * r1 + a22 * r2 + a23 * r3)
                        v3 = acc[ii + 3, j] + (a30 * r0 + a31 * r1 + a32 * r2 + a33 * r3)
                        acc[ii, j], acc[ii + 1, j], acc[ii + 2, j], acc[ii + 3, j] = v0, v1, v2, v3
                        h0 += v0 <= t0
                        h1 += v1 <= t1
                        h2 += v2 <= t2
                        h3 += v3 <= t3
                    hits[ii], hits[ii + 1], hits[ii + 2], hits[ii + 3] = h0, h1, h2, h3
            for ii in range(m):
                if hits[ii] == 0:
                    continue  # early abandon of the whole panel
                t = tol[lo + ii]
                g = qgroup[lo + ii]
                for j in range(P):
                    v = acc[ii, j]
                    jj = p * P + j
                    if v > best[ii] + t or (g >= 0 and rgroup[jj] == g):
                        continue
                    if v < best[ii]:
                        best[ii] = v
                    if nc[ii] == cap:  # full: drop candidates the new best has excluded
                        w = 0
                        for c in range(cap):
                            if cv[ii, c] <= best[ii] + t:
                                cv[ii, w] = cv[ii, c]
                                ci[ii, w] = ci[ii, c]
                                w += 1
                        nc[ii] = w if w < cap else -1
                    if nc[ii] >= 0:
                        cv[ii, nc[ii]] = v
                        ci[ii, nc[ii]] = jj
                        nc[ii] += 1
        for ii in range(m):
            w = -1
            if nc[ii] >= 0:
                w = 0
                for c in range(nc[ii]):
                    if cv[ii, c] <= best[ii] + tol[lo + ii]:
                        cand[lo + ii, w] = ci[ii, c]
                        w += 1
            ncand[lo + ii] = w
    return cand, ncand


@njit(cache=True)
def _sqdist64(query, ref, i, j):
    acc = 0.0
    for k in range(query.shape[1]):
        diff = np.float64(query[i, k]) - np.float64(ref[j, k])
        acc += diff * diff
    return acc


@njit(cache=True)  # serial: a few candidates per query, and it compiles in a fraction of the parallel time
def _nn1_resolve(query, ref, qgroup, rgroup, cand, ncand):
    nq, nr = query.shape[0], ref.shape[0]
    dist = np.empty(nq, dtype=np.float32)
    idx = np.empty(nq, dtype=np.int64)
    for i in range(nq):
        bd = np.inf
        bj = -1
        if ncand[i] >= 0:
            for c in range(ncand[i]):
                j = cand[i, c]
                dd = _sqdist64(query, ref, i, j)
                if dd < bd or (dd == bd and j < bj):
                    bd, bj = dd, j
        else:
            g = qgroup[i]
            for j in range(nr):
                if not (g >= 0 and rgroup[j] == g):
                    dd = _sqdist64(query, ref, i, j)
                    if dd < bd:
                        bd, bj = dd, j
        dist[i] = bd
        idx[i] = bj
    return dist, idx


def nn1(query, ref, qgroup=None, rgroup=None, block: int = 128, panel: int = 256, cap: int = 16):
    """Nearest neighbour of every query row in ref: (squared distance float32, index; -1 if none).

    Exact: the index is that of the smallest float64 distance, ties to the lowest index, and the distance
    is that float64 distance rounded to float32. The float32 tiles only choose the candidates (see above).
    A pair whose groups are equal and non-negative is skipped (leave-one-trajectory-out radii)."""
    q = np.ascontiguousarray(query, dtype=np.float32)
    r = np.ascontiguousarray(ref, dtype=np.float32)
    if q.ndim != 2 or r.ndim != 2 or q.shape[1] != r.shape[1]:
        raise ValueError("query and ref must be 2-D with the same number of columns")
    if not (np.isfinite(q).all() and np.isfinite(r).all()):
        raise ValueError("nn1: query and ref must be finite")
    (nq, d0), nr = q.shape, r.shape[0]
    qg = np.full(nq, -1, np.int64) if qgroup is None else np.ascontiguousarray(qgroup, dtype=np.int64)
    rg = np.full(nr, -2, np.int64) if rgroup is None else np.ascontiguousarray(rgroup, dtype=np.int64)
    d = (d0 + 3) // 4 * 4
    n_pan = max(1, (nr + panel - 1) // panel)
    refp = np.zeros((n_pan * panel, d), np.float32)
    refp[:nr, :d0] = r
    refp = np.ascontiguousarray(refp.reshape(n_pan, panel, d).transpose(0, 2, 1))
    r_sq = (r.astype(np.float64) ** 2).sum(1)
    r2p = np.full(n_pan * panel, np.inf, np.float32)
    r2p[:nr] = r_sq
    rgp = np.full(n_pan * panel, -3, np.int64)
    rgp[:nr] = rg
    q_pad = np.zeros((nq, d), np.float32)
    q_pad[:, :d0] = q
    # |error of v| <= gamma_(2d+2) (|q| + |r|)^2 in float32; tol covers two such errors with a margin of 2
    q_norm = np.sqrt((q.astype(np.float64) ** 2).sum(1))
    r_max = float(np.sqrt(r_sq.max())) if nr else 0.0
    tol = (4.0 * (2 * d + 4) * 2.0**-24 * (q_norm + r_max) ** 2).astype(np.float32)
    cand, ncand = _nn1_tiles(q_pad, refp, r2p.reshape(n_pan, panel), qg, rgp, tol, int(block), int(cap))
    return _nn1_resolve(q, r, qg, rg, cand, ncand)
