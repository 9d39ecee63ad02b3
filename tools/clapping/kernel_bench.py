"""Compression kernel timing: our fused Numba delta-update vs the torch sequence (sub, topk, scatter, add)
and vs a NumPy bit-packing reference for quantisation. Both measured in the same call."""

from __future__ import annotations

import time

import numpy as np
import torch

from methodkit.core import compress


def _best(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
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
