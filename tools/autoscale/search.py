"""Vector search and k-means: faiss (faiss-cpu) when installed, exact NumPy otherwise (same results for
exact search; the k-means paths differ in their arithmetic, so each is seeded and deterministic on its own)."""

from __future__ import annotations

import numpy as np


def have_faiss() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


def topk_ip(base: np.ndarray, queries: np.ndarray, k: int, use_faiss: bool | None = None):
    """(scores, indices) [Q, k] of the k largest inner products of each query with the base rows."""
    base = np.ascontiguousarray(base, dtype=np.float32)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    k = min(k, base.shape[0])
    if have_faiss() if use_faiss is None else use_faiss:
        import faiss

        index = faiss.IndexFlatIP(base.shape[1])
        index.add(base)
        return index.search(queries, k)
    return topk_ip_numpy(base, queries, k)


def topk_ip_numpy(base, queries, k):
    sims = queries @ base.T
    part = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    vals = np.take_along_axis(sims, part, 1)
    order = np.lexsort((part, -vals), axis=1)  # descending score, then ascending index (faiss's order)
    idx = np.take_along_axis(part, order, 1)
    return np.take_along_axis(sims, idx, 1), idx


def normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def kmeans(x: np.ndarray, k: int, seed: int, iters: int = 20, restarts: int = 3, log=None) -> np.ndarray:
    """Centroids [k, d] of L2-normalised rows (spherical k-means: faiss.Kmeans with nredo restarts, or
    Lloyd's in NumPy). A cluster left empty is re-seeded from the point farthest from its centroid (logged)."""
    x = np.ascontiguousarray(normalise(x))
    if have_faiss():
        import faiss

        km = faiss.Kmeans(x.shape[1], k, niter=iters, nredo=restarts, seed=seed, spherical=True, verbose=False)
        km.cp.min_points_per_centroid = 1  # small pools are fine here; faiss would warn on stderr
        km.train(x)
        cent = km.centroids.copy()
    else:
        cent = _kmeans_numpy(x, k, seed, iters, restarts)
    return _reseed_empty(x, cent, log)


def _kmeans_numpy(x, k, seed, iters, restarts):
    rng = np.random.default_rng(seed)
    best, best_obj = None, -np.inf
    for _ in range(restarts):
        cent = x[rng.choice(x.shape[0], k, replace=False)].copy()
        for _ in range(iters):
            assign = np.argmax(x @ cent.T, axis=1)
            for c in range(k):
                members = x[assign == c]
                if len(members):
                    cent[c] = members.mean(0)
            cent = normalise(cent)
        obj = float(np.max(x @ cent.T, axis=1).sum())
        if obj > best_obj:
            best, best_obj = cent, obj
    return best


def assign(x: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Nearest centroid (largest cosine) of each row."""
    return topk_ip(centroids, normalise(x), 1)[1][:, 0].astype(np.int64)


def _reseed_empty(x, cent, log):
    for _ in range(cent.shape[0]):
        labels = assign(x, cent)
        sizes = np.bincount(labels, minlength=cent.shape[0])
        empty = np.flatnonzero(sizes == 0)
        if empty.size == 0:
            break
        sims = np.sum(x * cent[labels], axis=1)
        far = int(np.argmin(sims))
        cent[empty[0]] = x[far]
        if log is not None:
            log(
                f"k-means: cluster {int(empty[0])} was empty; re-seeded from point {far}, the farthest from its centroid"
            )
    return cent


def knn_purity(x: np.ndarray, tags, k: int = 10) -> float:
    """Mean share of each row's k nearest neighbours (cosine, itself excluded) that carry its tag."""
    xn = normalise(x)
    _, idx = topk_ip(xn, xn, k + 1)
    tags = np.asarray(tags)
    same = []
    for i in range(len(tags)):
        nb = [j for j in idx[i] if j != i][:k]
        same.append(np.mean(tags[nb] == tags[i]))
    return float(np.mean(same))
