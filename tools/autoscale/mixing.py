"""Cluster quotas, cluster-guided vector retrieval and the Cluster-GA mixture update."""

from __future__ import annotations

import numpy as np

from methodkit.tools.autoscale import search


def quotas(weights: np.ndarray, sizes: np.ndarray, budget: int) -> np.ndarray:
    """n_k: largest-remainder rounding of w_k * budget, capped at each cluster's size, the excess handed on
    to the clusters with room in proportion to their weights (the total is min(budget, sum of sizes))."""
    w = np.asarray(weights, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.int64)
    budget = int(min(budget, sizes.sum()))
    n = np.zeros_like(sizes)
    room = sizes > 0
    while n.sum() < budget and room.any():
        left = budget - n.sum()
        share = np.where(room, w, 0.0)
        share = share / share.sum() if share.sum() > 0 else room / room.sum()
        raw = share * left
        add = np.floor(raw).astype(np.int64)
        order = np.argsort(-(raw - add), kind="stable")
        add[order[: left - add.sum()]] += 1
        n = np.minimum(n + add, sizes)
        room = n < sizes
    return n


def retrieve(emb: np.ndarray, members: np.ndarray, queries: np.ndarray, n_k: int, rng) -> np.ndarray:
    """n_k unique cluster members nearest the queries (inner product of normalised vectors, IndexFlatIP):
    top hits per query taken round-robin, at most n_k / |Q| + 1 per query, then random members to fill."""
    if n_k <= 0:
        return np.zeros(0, dtype=np.int64)
    if n_k >= len(members):
        return np.sort(members)
    base = search.normalise(emb[members])
    q = search.normalise(queries)
    per_query = n_k // len(q) + 1
    _, hits = search.topk_ip(base, q, min(len(members), per_query + n_k // max(1, len(q)) + 1))
    chosen: list[int] = []
    seen: set[int] = set()
    taken = np.zeros(len(q), dtype=np.int64)
    pos = np.zeros(len(q), dtype=np.int64)
    while len(chosen) < n_k:
        progressed = False
        for i in range(len(q)):
            if len(chosen) >= n_k:
                break
            while pos[i] < hits.shape[1] and taken[i] < per_query:
                j = int(hits[i, pos[i]])
                pos[i] += 1
                if j >= 0 and j not in seen:
                    seen.add(j)
                    chosen.append(j)
                    taken[i] += 1
                    progressed = True
                    break
        if not progressed:
            break
    if len(chosen) < n_k:
        rest = np.setdiff1d(np.arange(len(members)), np.array(chosen, dtype=np.int64))
        chosen += rng.choice(rest, size=n_k - len(chosen), replace=False).tolist()
    return np.sort(members[np.array(chosen, dtype=np.int64)])


def smooth(w: np.ndarray, c: float) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    return (1 - c) * w / w.sum() + c / len(w)


def ascent(w: np.ndarray, g: np.ndarray, eta: float, c: float) -> np.ndarray:
    """log w <- log w + eta g / std(g), then DoReMi-style smoothing toward uniform."""
    sd = float(np.std(g))
    g_hat = g / sd if sd > 0 else np.zeros_like(g)
    logw = np.log(np.maximum(w, 1e-12)) + eta * g_hat
    w_new = np.exp(logw - logw.max())
    return smooth(w_new, c)


def cluster_gradients(states, build_model, cluster_x, cluster_y, val_x, val_y, val_u, loss_fn) -> np.ndarray:
    """g_k = cos(grad L_k, grad sum_j u_j l_j / sum u) averaged over checkpoints: the one-step look-ahead
    hypergradient of the failure-weighted val surrogate with respect to cluster k's mixture weight."""
    import torch

    model = build_model()
    vx, vy = torch.as_tensor(val_x), torch.as_tensor(val_y)
    u = torch.as_tensor(val_u, dtype=torch.float32)
    total = np.zeros(len(cluster_x))
    for state in states:
        model.load_state_dict(state)
        params = [p for p in model.parameters()]
        loss_val = (loss_fn(model, vx, vy) * u).sum() / u.sum()
        g_val = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss_val, params)])
        for k, (cx, cy) in enumerate(zip(cluster_x, cluster_y)):
            if len(cy) == 0:
                continue
            lk = loss_fn(model, torch.as_tensor(cx), torch.as_tensor(cy)).mean()
            gk = torch.cat([g.reshape(-1) for g in torch.autograd.grad(lk, params)])
            total[k] += float(torch.nn.functional.cosine_similarity(gk, g_val, dim=0))
    return total / max(1, len(states))
