"""The per-stage aggregation as array-module code: CuPy on a GPU, NumPy to test it on the CPU.

It computes what `kernels.stage_aggregate` computes, vectorised over candidates instead of
looping over them, and it adds in the Numba kernel's order (units in sequence inside a chunk,
chunks in sequence inside a stage), so with NumPy it gives the kernel's bits. On a GPU the
compiler may fuse a*b + c into one FMA, so CuPy agrees to rounding, not bitwise; the warm
and the cold search both use the same device, so their bitwise comparison still holds.
"""

from __future__ import annotations


def inflight(xp, pp, vpp, micro, width):
    """(candidates, width) in-flight microbatch counts of chunk c (1F1B; interleaved stage 0 pays extra)."""
    c = xp.arange(width)[None, :]
    j = c % pp[:, None]
    n = xp.minimum(pp[:, None] - j, micro[:, None]).astype(xp.float64)
    extra = 1.0 + (pp[:, None] - 1.0) / (pp[:, None] * vpp[:, None])
    return xp.where((vpp[:, None] > 1) & (j == 0), n * extra, n)


def stage_aggregate(xp, time, state, act, dp, opt, p2p, pp, vpp, micro, bounds, n_stages):
    """Per-stage (time per microbatch, memory, DP sync, optimizer) arrays of shape (candidates, n_stages).

    Inputs are arrays of the module `xp` (time/state/act/dp/opt: candidates x units; p2p, pp,
    vpp, micro: per candidate; bounds: candidates x (>= pp*vpp + 1) chunk starts).
    """
    size, n_units = time.shape
    nchunks = pp * vpp
    width = int(nchunks.max())
    rows = xp.arange(size)
    # chunk of each unit: a +1 marker at every chunk start after the first, then a running count
    marks = xp.zeros((size, n_units + 1), dtype=xp.int64)
    for c in range(1, width):
        valid = c < nchunks
        start = xp.where(valid, bounds[:, c], n_units)
        marks[rows, start] += 1
    chunk_of = xp.cumsum(marks[:, :n_units], axis=1)
    infl = inflight(xp, pp, vpp, micro, width)
    acc_t = xp.repeat(p2p[:, None].astype(xp.float64), width, axis=1)
    acc_m = xp.zeros((size, width))
    acc_d = xp.zeros((size, width))
    acc_o = xp.zeros((size, width))
    for u in range(n_units):  # units in order, as the kernel adds them
        c = chunk_of[:, u]
        acc_t[rows, c] += time[:, u]
        acc_m[rows, c] += state[:, u] + infl[rows, c] * act[:, u]
        acc_d[rows, c] += dp[:, u]
        acc_o[rows, c] += opt[:, u]
    outs = [xp.zeros((size, n_stages)) for _ in range(4)]
    vmax = int(vpp.max())
    stage = xp.arange(n_stages)[None, :]
    for v in range(vmax):  # chunks of a stage in order: j, j + pp, j + 2 pp, ...
        c = v * pp[:, None] + stage
        valid = (stage < pp[:, None]) & (v < vpp[:, None])
        c = xp.where(valid, c, 0)
        for out, acc in zip(outs, (acc_t, acc_m, acc_d, acc_o)):
            out += xp.where(valid, xp.take_along_axis(acc, c, axis=1), 0.0)
    return tuple(outs)
