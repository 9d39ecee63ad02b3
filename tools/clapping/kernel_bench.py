"""Compression kernel timing: our fused Numba delta-update vs the torch sequence (sub, topk, scatter, add)
and vs a NumPy bit-packing reference for quantisation. Both measured in the same call, in process CPU
time, with one thread on each side."""

from __future__ import annotations

import time

import numpy as np
import torch

from methodkit.core import compress


def _best(fn, repeat):
    """Best process CPU time of `repeat` calls: on a shared machine wall time measures the neighbours."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def _torch_topk_update(a, m, k):
    delta = a - m
    idx = delta.abs().topk(k, dim=1).indices
    val = delta.gather(1, idx)
    m.scatter_add_(1, idx, val)
    return idx, val


def _numpy_quant_update(a, m, bits, rng):
    delta = a - m
    scale = np.abs(delta).max(axis=1, keepdims=True)
    levels = (1 << bits) - 1
    u = np.where(scale > 0, (delta / np.where(scale > 0, scale, 1) + 1) * 0.5 * levels, 0)
    q = np.clip(np.floor(u + rng.random(u.shape)), 0, levels).astype(np.uint8)
    per = 8 // bits
    padded = np.zeros((q.shape[0], -(-q.shape[1] // per) * per), np.uint8)
    padded[:, : q.shape[1]] = q
    shifts = (np.arange(per) * bits).astype(np.uint8)
    packed = (padded.reshape(q.shape[0], -1, per) << shifts).sum(axis=2).astype(np.uint8)
    m += ((q / levels) * 2 - 1) * scale
    return packed


def bench(spec: str, rows: int, cols: int, repeat: int) -> dict:
    """One kernel-vs-reference row; torch and Numba both run one thread, so CPU seconds compare like for like."""
    import numba

    threads = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(1)
    numba.set_num_threads(1)
    try:
        return _bench(spec, rows, cols, repeat)
    finally:
        torch.set_num_threads(threads[0])
        numba.set_num_threads(threads[1])


def _bench(spec: str, rows: int, cols: int, repeat: int) -> dict:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    c = compress.parse(spec, cols)
    m = np.zeros_like(a)
    c.delta_update(a, m)  # compile outside the timing
    ours = _best(lambda: c.delta_update(a, np.zeros_like(a)), repeat)
    if isinstance(c, compress.TopK):
        ta = torch.from_numpy(a)
        ref = _best(lambda: _torch_topk_update(ta, torch.zeros_like(ta), c.k), repeat)
        reference = "torch sub+topk+gather+scatter_add"
    elif isinstance(c, compress.Quant):
        ref = _best(lambda: _numpy_quant_update(a, np.zeros_like(a), c.bits, rng), repeat)
        reference = "numpy quantise+pack+update"
    else:
        ref = _best(lambda: c.decode(c.encode(a)), repeat)
        reference = "encode+decode (unfused)"
    return {
        "compressor": spec,
        "size": f"{rows}x{cols}",
        "ours_s": ours,
        "ref_s": ref,
        "ratio": ref / ours,
        "reference": reference,
    }
