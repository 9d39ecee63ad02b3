"""Numba kernels: the min-bottleneck layer partition and the per-stage aggregation.

Both loop over candidates (one row each) with `prange`; each candidate's work is
sequential, so results do not depend on the thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True)
def inflight(c, pp, vpp, micro):
    """Microbatches whose activations stage c % pp holds under 1F1B (interleaved: stage 0 pays extra)."""
    j = c % pp
    n = float(min(pp - j, micro))
    if vpp > 1 and j == 0:
        n *= 1.0 + (pp - 1.0) / (pp * vpp)
    return n


@njit(cache=True)
def _greedy(t, st, ac, p2p, nchunks, pp, vpp, micro, limit, cap_t, bounds):
    """Maximal-suffix greedy from the last chunk: True iff every chunk time <= cap_t and memory <= limit.

    Going backwards is what makes it exact for vpp = 1: in-flight counts only fall
    with the stage index, so a later chunk accepts any unit an earlier one could.
    """
    n_units = t.shape[0]
    end = n_units
    for c in range(nchunks - 1, -1, -1):
        infl = inflight(c, pp, vpp, micro)
        start = end
        tsum = p2p
        msum = 0.0
        while start > c:
            nt = tsum + t[start - 1]
            nm = msum + st[start - 1] + infl * ac[start - 1]
            if nt > cap_t or nm > limit:
                break
            tsum = nt
            msum = nm
            start -= 1
        if start == end:
            return False
        bounds[c] = start
        end = start
    bounds[nchunks] = n_units
    return end == 0


@njit(cache=True)
def partition_one(t, st, ac, p2p, nchunks, pp, vpp, micro, limit, bounds, iterations, rtol):
    """Binary search on the bottleneck time; bounds gets the chunk starts. Returns False if memory never fits.

    The search stops at relative width `rtol`; the partition returned is the greedy one at the
    feasible end, so its true bottleneck is within rtol of the optimum.
    """
    if not _greedy(t, st, ac, p2p, nchunks, pp, vpp, micro, limit, np.inf, bounds):
        return False
    lo = p2p
    total = p2p
    for u in range(t.shape[0]):
        lo = max(lo, p2p + t[u])
        total += t[u]
    hi = total
    if _greedy(t, st, ac, p2p, nchunks, pp, vpp, micro, limit, lo, bounds):
        return True
    # invariant: infeasible at lo, feasible at hi
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi or hi - lo <= rtol * hi:
            break
        if _greedy(t, st, ac, p2p, nchunks, pp, vpp, micro, limit, mid, bounds):
            hi = mid
        else:
            lo = mid
    # hi = total was never tested: the greedy adds from the last unit, the total from the first, so
    # rounding can put the greedy's sum an ulp above it (seen with one chunk); widen until it passes
    step = max(hi * 2.0**-52, 1e-300)
    while not _greedy(t, st, ac, p2p, nchunks, pp, vpp, micro, limit, hi, bounds):
        hi += step
        step *= 2.0
    return True


@njit(cache=True, parallel=True)
def partition_min_bottleneck(time, state, act, p2p, pp, vpp, micro, limit, bounds, iterations, rtol):
    """For each candidate row: contiguous chunks (pp*vpp of them) minimising the slowest chunk's time."""
    n = time.shape[0]
    ok = np.zeros(n, dtype=np.bool_)
    for i in prange(n):
        ok[i] = partition_one(
            time[i],
            state[i],
            act[i],
            p2p[i],
            pp[i] * vpp[i],
            pp[i],
            vpp[i],
            micro[i],
            limit[i],
            bounds[i],
            iterations,
            rtol,
        )
    return ok


@njit(cache=True)
def uniform_bounds(n_units, nchunks, bounds):
    """Megatron's default: transformer blocks split evenly (earlier chunks take the remainder),
    the embedding in the first chunk and the LM head in the last."""
    blocks = n_units - 2
    base = blocks // nchunks
    extra = blocks % nchunks
    pos = 0
    for c in range(nchunks):
        bounds[c] = pos if c > 0 else 0
        pos += base + (1 if c < extra else 0)
        if c == 0:
            pos += 1
    bounds[nchunks] = n_units


@njit(cache=True, parallel=True)
def uniform_partition(n_units, pp, vpp, bounds):
    for i in prange(pp.shape[0]):
        uniform_bounds(n_units, pp[i] * vpp[i], bounds[i])


@njit(cache=True, parallel=True)
def stage_aggregate(time, state, act, dp, opt, p2p, pp, vpp, micro, bounds, out_time, out_mem, out_dp, out_opt):
    """Per-stage sums over each stage's chunks: time/microbatch, memory, DP sync and optimizer time per step."""
    n = time.shape[0]
    for i in prange(n):
        nchunks = pp[i] * vpp[i]
        for j in range(pp[i]):
            out_time[i, j] = 0.0
            out_mem[i, j] = 0.0
            out_dp[i, j] = 0.0
            out_opt[i, j] = 0.0
        for c in range(nchunks):
            j = c % pp[i]
            infl = inflight(c, pp[i], vpp[i], micro[i])
            tsum = p2p[i]
            msum = 0.0
            dsum = 0.0
            osum = 0.0
            for u in range(bounds[i, c], bounds[i, c + 1]):
                tsum += time[i, u]
                msum += state[i, u] + infl * act[i, u]
                dsum += dp[i, u]
                osum += opt[i, u]
            out_time[i, j] += tsum
            out_mem[i, j] += msum
            out_dp[i, j] += dsum
            out_opt[i, j] += osum
