"""mcd-distill hot loops against their references, measured in the same run.

    nice python -P bench/mcd/bench.py > bench/mcd/bench.txt

- sinkhorn: B problems of P x P pathway costs, log-domain Sinkhorn 50 iterations at eps 0.05: ours is one
  batched POT call (ot.batch.solve_batch, what transport.entropic_cost runs) against a Python loop over
  ot.sinkhorn2(method="sinkhorn_log"); the cost agreement is printed as a note.
- k_best_paths: top-32 source-to-logit paths in a layered random DAG (the pruned-graph shape): the Numba
  DP against the pure-Python best-first heap reference.
"""

from __future__ import annotations

import time

import numpy as np
import ot
import torch

from methodkit.tools.mcd import kernels, transport

torch.set_num_threads(1)


def best_of(fn, repeat=3):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def sinkhorn_case(B=256, P=32):
    g = torch.Generator().manual_seed(0)
    cost = torch.rand(B, P, P, generator=g) * 4
    a = transport.normalise(torch.rand(B, P, generator=g) ** 3)
    b = transport.normalise(torch.rand(B, P, generator=g) ** 3)
    ours_s, (ours, _) = best_of(lambda: transport.entropic_cost(cost, a, b, 0.05, 50))

    def loop():
        return torch.stack([ot.sinkhorn2(a[i], b[i], cost[i], 0.05, method="sinkhorn_log", numItermax=50, stopThr=0)
                            for i in range(B)])  # fmt: skip

    ref_s, ref = best_of(loop)
    # agreement at convergence (after 50 iterations the two schedules are at different points)
    conv, _ = transport.entropic_cost(cost[:16].double(), a[:16].double(), b[:16].double(), 0.05, 3000)
    ref_conv = [ot.sinkhorn2(a[i].double(), b[i].double(), cost[i].double(), 0.05, method="sinkhorn_log",
                             numItermax=3000, stopThr=1e-14) for i in range(16)]  # fmt: skip
    diff = float((conv - torch.stack(ref_conv)).abs().max())
    at50 = float((ours - ref).abs().max())
    print(f"sinkhorn B={B},P={P} {ours_s:.4f} {ref_s:.4f} {ref_s / ours_s:.1f} "
          f"cost_diff_converged={diff:.1e} cost_diff_at_50_iters={at50:.1e}")  # fmt: skip


def layered_dag(seed, layers=6, width=60, density=0.15, k_sources=40):
    rng = np.random.default_rng(seed)
    n = k_sources + layers * width + 1
    layer = np.concatenate([np.full(k_sources, -1), np.repeat(np.arange(layers), width), [layers]])
    dense = (rng.random((n, n)) < density) * rng.random((n, n))
    dense *= layer[:, None] > layer[None, :]  # edges go up the layers
    dense /= np.maximum(dense.sum(1, keepdims=True), 1e-12)  # row-normalised like the pruned graph
    rows, cols = np.nonzero(dense)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int64)
    is_source = layer == -1
    return indptr, cols.astype(np.int64), dense[rows, cols], is_source, n - 1, layers + 2


def kbest_case(k=32):
    indptr, idx, w, src, sink, max_len = layered_dag(0)
    kernels.k_best_paths(indptr, idx, w, src, sink, k, max_len)  # compile outside the timing
    ours_s, (weights, _) = best_of(lambda: kernels.k_best_paths(indptr, idx, w, src, sink, k, max_len), 5)
    ref_s, ref = best_of(lambda: kernels.k_best_paths_reference(indptr, idx, w, src, sink, k), 1)
    agree = np.allclose(weights, [r[0] for r in ref])
    print(f"k_best_paths nodes={len(indptr) - 1},edges={len(idx)},k={k} {ours_s:.5f} {ref_s:.4f} {ref_s / ours_s:.0f} agree={agree}")


if __name__ == "__main__":
    print("# case size ours_s ref_s ratio notes")
    sinkhorn_case()
    kbest_case()
