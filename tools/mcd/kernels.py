"""Numba kernels of MCD: k-best source-to-sink paths in a layer-ordered DAG (CSR of in-edges)."""

from __future__ import annotations

import heapq

import numpy as np
from numba import njit


@njit(cache=True)
def k_best_paths(indptr, indices, weights, is_source, sink, k, max_len):
    """The k heaviest paths (product of edge weights) from any source node to `sink`.

    Nodes are numbered in topological order (every edge goes from a lower to a higher index); the
    in-edges of node v are indices[indptr[v]:indptr[v+1]] with weights[...] in [0, 1]. Returns
    (path weights (k,), paths (k, max_len) source first, padded with -1); missing paths weigh 0.
    """
    n = len(indptr) - 1
    best = np.zeros((n, k))
    pred = -np.ones((n, k), dtype=np.int64)
    rank = -np.ones((n, k), dtype=np.int64)
    for v in range(n):
        if is_source[v]:
            best[v, 0] = 1.0
            continue
        for e in range(indptr[v], indptr[v + 1]):
            u = indices[e]
            w = weights[e]
            if w <= 0.0:
                continue
            for r in range(k):
                cand = best[u, r] * w
                if cand <= 0.0:
                    break
                if cand <= best[v, k - 1]:
                    break  # best[u] is sorted: the rest are lighter still
                pos = k - 1
                while pos > 0 and best[v, pos - 1] < cand:
                    best[v, pos] = best[v, pos - 1]
                    pred[v, pos] = pred[v, pos - 1]
                    rank[v, pos] = rank[v, pos - 1]
                    pos -= 1
                best[v, pos] = cand
                pred[v, pos] = u
                rank[v, pos] = r
    out_w = np.zeros(k)
    paths = -np.ones((k, max_len), dtype=np.int64)
    for r in range(k):
        if best[sink, r] <= 0.0:
            break
        out_w[r] = best[sink, r]
        stack = np.empty(max_len, dtype=np.int64)
        depth = 0
        v, rr = sink, r
        while v >= 0 and depth < max_len:
            stack[depth] = v
            depth += 1
            pv, pr = pred[v, rr], rank[v, rr]
            v, rr = pv, pr
        for i in range(depth):
            paths[r, i] = stack[depth - 1 - i]
    return out_w, paths


def k_best_paths_reference(indptr, indices, weights, is_source, sink, k):
    """Pure-Python reference: best-first search over partial paths grown backwards from the sink."""
    heap = [(-1.0, (int(sink),))]
    found = []
    while heap and len(found) < k:
        neg, path = heapq.heappop(heap)
        head = path[0]
        if is_source[head]:
            found.append((-neg, path))
            continue
        for e in range(indptr[head], indptr[head + 1]):
            if weights[e] > 0:
                heapq.heappush(heap, (neg * weights[e], (int(indices[e]), *path)))
    return found
