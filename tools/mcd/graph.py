"""Attribution graphs (circuit-tracer semantics) from transcoders, their pruning, and top-P pathways.

The model is run with attention patterns, RMSNorm scales and transcoder activations frozen and each MLP
replaced by its transcoder's reconstruction plus an error term; it is then linear in the residual
stream. Leaves: token embeddings (nodes (pos)), transcoder activations (nodes (layer, pos, latent)),
errors (nodes (layer, pos)). An edge s -> t is a_s times the gradient of t's input (a feature's
pre-activation, or the logit direction W_U[y] - mean_v W_U[v]) with respect to a_s: batched
vector-Jacobian products (`is_grads_batched`), one batch per kind of target, never one per edge.
With `differentiable=True` the gradients keep their graph, so edge weights (and pathway weights)
carry gradients into the model's weights and activations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from methodkit.core.nn.transformer import trace


@dataclass
class GraphSettings:
    max_nodes: int = 32  # feature nodes per target, by |direct logit attribution| (circuit-tracer's cap)
    node_threshold: float = 0.8
    edge_threshold: float = 0.98
    n_paths: int = 32
    depths: int = 4  # M: relative depths a pathway descriptor is resampled to


@dataclass
class Graphs:
    """A batch of K*B attribution graphs on a shared node layout (dense, masked)."""

    adjacency: torch.Tensor  # (G, n, n) signed A[target, source] (differentiable when asked)
    mask: torch.Tensor  # (G, n, n) bool: edges kept by pruning
    node_mask: torch.Tensor  # (G, n) bool
    influence: torch.Tensor  # (G, n) node influence on the logit before pruning
    feat_layer: torch.Tensor  # (G, N) layer of each feature node
    feat_pos: torch.Tensor  # (G, N)
    feat_latent: torch.Tensor  # (G, N) transcoder latent id
    target_pos: torch.Tensor  # (G,)
    target_tok: torch.Tensor  # (G,)
    tokens: torch.Tensor  # (G, T) the input of each graph's sequence
    n_layers: int
    ctx: int
    extra: dict = field(default_factory=dict)

    @property
    def n_feat(self) -> int:
        return self.feat_layer.shape[1]

    def node_kind(self) -> np.ndarray:
        """Per node: 0 embedding, 1 error, 2 feature, 3 logit."""
        t, L, n = self.ctx, self.n_layers, self.n_feat
        return np.concatenate([np.zeros(t), np.ones(L * t), 2 * np.ones(n), [3]]).astype(np.int64)


def sparse_codes(model, tcs, tokens):
    """Normal forward: (hidden, taps, per layer (values (B,T,k), indices (B,T,k))) with gradients kept."""
    hidden, taps = trace(model, tokens)
    codes = []
    for layer, tap in enumerate(taps):
        tc = tcs[layer]
        pre = tap["mlp_in"] @ tc.w_enc.detach().T + tc.b_enc.detach()
        top = torch.topk(pre, tc.cfg.k, dim=-1)
        codes.append((torch.relu(top.values), top.indices))
    return hidden, taps, codes


def unembedding(model) -> torch.Tensor:
    return model.embed.weight if model.lm_head is None else model.lm_head.weight


def build(model, tcs, tokens, positions, targets, settings: GraphSettings, *, codes=None, differentiable=False):
    """Attribution graphs for every sequence b of `tokens` (B, T) at target positions (B, K) and target
    tokens (B, K). `codes` are the transcoder activations from `sparse_codes` (computed if omitted);
    with `differentiable` their values and the Jacobians keep gradients."""
    B, T = tokens.shape
    K = positions.shape[1]
    L = model.cfg.n_layers
    if codes is None:
        with torch.set_grad_enabled(differentiable):
            _, _, codes = sparse_codes(model, tcs, tokens)
    emb_val = model.embed(tokens)
    if not differentiable:
        emb_val = emb_val.detach()
        codes = [(v.detach(), i) for v, i in codes]
    emb_leaf = emb_val.detach().requires_grad_(True)
    val_leaves = [v.detach().requires_grad_(True) for v, _ in codes]
    err_leaves, mlp_ins = [], []

    def replace(layer, x, out):
        tc = tcs[layer]
        w_dec, b_dec = tc.w_dec.detach(), tc.b_dec.detach()
        idx = codes[layer][1]
        recon_value = torch.einsum("btk,btkd->btd", codes[layer][0].detach(), w_dec[idx]) + b_dec
        err = (out - recon_value).detach().requires_grad_(True)
        err_leaves.append(err)
        mlp_ins.append(x)
        return torch.einsum("btk,btkd->btd", val_leaves[layer], w_dec[idx]) + b_dec + err

    with torch.enable_grad():
        hidden, _ = trace(model, tokens, freeze=True, mlp=replace, embed=emb_leaf)
        w_u = unembedding(model)
        direction = w_u[targets] - w_u.mean(0)  # (B, K, d)
        leaves = [emb_leaf, *val_leaves, *err_leaves]
        # logit rows: one batched VJP over the K target slots (every sequence at once)
        grad_out = torch.zeros(K, B, T, hidden.shape[-1])
        bi = torch.arange(B)
        for k in range(K):
            grad_out[k, bi, positions[:, k]] = direction[:, k] if differentiable else direction[:, k].detach()
        grads = torch.autograd.grad(
            hidden, leaves, grad_out, is_grads_batched=True, create_graph=differentiable, retain_graph=True
        )
        logit_attr = _attributions(grads, emb_val, codes, err_leaves, L)  # dict of (K,B,...) tensors
        feat_abs = logit_attr["feat"].detach().abs()  # (K, B, L, T, k)
        kk = feat_abs.shape[-1]
        n_sel = min(settings.max_nodes, L * T * kk)
        flat = feat_abs.reshape(K, B, -1)
        sel = torch.topk(flat, n_sel, dim=-1).indices  # (K, B, N)
        s_layer, rest = sel // (T * kk), sel % (T * kk)
        s_pos, s_slot = rest // kk, rest % kk
        latent = torch.stack([codes[l_][1] for l_ in range(L)], 0)  # (L, B, T, k)
        s_latent = latent[s_layer, bi[None, :, None], s_pos, s_slot]
        # feature rows: one batched VJP over the K*N selected features
        N = n_sel
        g_out = [torch.zeros(K * N, B, T, x.shape[-1]) for x in mlp_ins]
        for layer in range(L):
            w_enc = tcs[layer].w_enc.detach()
            hit = s_layer == layer  # (K, B, N)
            k_i, b_i, n_i = torch.nonzero(hit, as_tuple=True)
            g_out[layer][k_i * N + n_i, b_i, s_pos[k_i, b_i, n_i]] = w_enc[s_latent[k_i, b_i, n_i]]
        fgrads = torch.autograd.grad(
            mlp_ins, leaves, g_out, is_grads_batched=True, create_graph=differentiable, retain_graph=differentiable,
            allow_unused=True,
        )  # fmt: skip
    fgrads = [torch.zeros((K * N, *leaf.shape)) if g is None else g for g, leaf in zip(fgrads, leaves)]
    feat_attr = _attributions(fgrads, emb_val, codes, err_leaves, L)
    adjacency = _assemble(logit_attr, feat_attr, s_layer, s_pos, s_slot, K, B, T, L, N)
    g = K * B
    graphs = Graphs(
        adjacency=adjacency,
        mask=torch.zeros(adjacency.shape, dtype=torch.bool),
        node_mask=torch.zeros(adjacency.shape[:2], dtype=torch.bool),
        influence=torch.zeros(adjacency.shape[:2]),
        feat_layer=s_layer.reshape(g, N),
        feat_pos=s_pos.reshape(g, N),
        feat_latent=s_latent.reshape(g, N),
        target_pos=positions.T.reshape(g),
        target_tok=targets.T.reshape(g),
        tokens=tokens[None].expand(K, B, T).reshape(g, T),
        n_layers=L,
        ctx=T,
    )
    prune(graphs, settings)
    return graphs


def _attributions(grads, emb_val, codes, err_leaves, L):
    """Edge values a_s * dTarget/da_s for each kind of source, from batched gradients (R, B, ...)."""
    g_emb, g_val, g_err = grads[0], grads[1 : 1 + L], grads[1 + L :]
    emb = (g_emb * emb_val[None]).sum(-1)  # (R, B, T)
    feat = torch.stack([g * codes[l_][0][None] for l_, g in enumerate(g_val)], 2)  # (R, B, L, T, k)
    err = torch.stack([(g * e.detach()[None]).sum(-1) for g, e in zip(g_err, err_leaves)], 2)  # (R, B, L, T)
    return {"emb": emb, "feat": feat, "err": err}


def _assemble(logit_attr, feat_attr, s_layer, s_pos, s_slot, K, B, T, L, N):
    """Dense (K*B, n, n) signed adjacency, nodes [embeddings T | errors L*T | features N | logit]."""
    n = T + L * T + N + 1
    kb = torch.arange(K)[:, None, None], torch.arange(B)[None, :, None]

    def feat_sources(attr_feat):  # (K, B, R', L, T, k) -> values at the selected features (K, B, R', N)
        return attr_feat[kb[0][..., None], kb[1][..., None], torch.arange(attr_feat.shape[2])[None, None, :, None],
                         s_layer[:, :, None, :], s_pos[:, :, None, :], s_slot[:, :, None, :]]  # fmt: skip

    # logit row
    lf = logit_attr["feat"][kb[0], kb[1], s_layer, s_pos, s_slot]  # (K, B, N)
    logit_row = torch.cat(
        [logit_attr["emb"], logit_attr["err"].reshape(K, B, L * T), lf, torch.zeros(K, B, 1)], -1
    )  # (K, B, n)
    # feature rows: gradients came as (K*N, B, ...) -> (K, N, B, ...) -> (K, B, N, ...)
    def rows(x):
        return x.reshape(K, N, B, *x.shape[2:]).transpose(1, 2)

    fe = rows(feat_attr["emb"])  # (K, B, N, T)
    ferr = rows(feat_attr["err"]).reshape(K, B, N, L * T)
    ff = feat_sources(rows(feat_attr["feat"]))  # (K, B, N, N)
    feat_rows = torch.cat([fe, ferr, ff, torch.zeros(K, B, N, 1)], -1)  # (K, B, N, n)
    top = torch.zeros(K, B, T + L * T, n)
    adjacency = torch.cat([top, feat_rows, logit_row[:, :, None, :]], 2)
    return adjacency.reshape(K * B, n, n)


def _influence(norm_abs: torch.Tensor, logit: int, depth: int) -> torch.Tensor:
    """Total influence of every node on the logit: e_logit (A + A^2 + ...), A row-normalised, a DAG."""
    x = norm_abs[:, logit, :].clone()
    total = x.clone()
    for _ in range(depth):
        x = torch.einsum("gn,gnm->gm", x, norm_abs)
        if float(x.abs().max()) < 1e-12:
            break
        total = total + x
    return total


def row_normalise(abs_adj: torch.Tensor) -> torch.Tensor:
    return abs_adj / abs_adj.sum(-1, keepdim=True).clamp_min(1e-12)


def _cover(scores: torch.Tensor, threshold: float) -> torch.Tensor:
    """Mask of the largest entries (per row of `scores`) whose cumulative sum first reaches threshold*total."""
    order = torch.sort(scores, dim=-1, descending=True)
    cum = order.values.cumsum(-1)
    total = cum[..., -1:].clamp_min(1e-12)
    keep_sorted = (cum - order.values) < threshold * total  # keep until the threshold is crossed
    keep_sorted &= order.values > 0
    mask = torch.zeros_like(keep_sorted)
    return mask.scatter(-1, order.indices, keep_sorted)


@torch.no_grad()
def prune(graphs: Graphs, settings: GraphSettings) -> None:
    """circuit-tracer's pruning: node influence covering node_threshold, edges covering edge_threshold
    (edge score = target influence x normalised weight), then drop dangling nodes until none is left."""
    adj = graphs.adjacency.detach().abs()
    G, n, _ = adj.shape
    _T, L, _N = graphs.ctx, graphs.n_layers, graphs.n_feat
    logit = n - 1
    kind = torch.from_numpy(graphs.node_kind())
    normed = row_normalise(adj)
    influence = _influence(normed, logit, L + 2)
    graphs.influence = influence
    feat = kind == 2
    node_keep = torch.ones(G, n, dtype=torch.bool)
    feat_keep = _cover(influence[:, feat], settings.node_threshold)
    node_keep[:, feat] = feat_keep
    pair = node_keep[:, :, None] & node_keep[:, None, :]
    normed = row_normalise(adj * pair)
    infl = _influence(normed, logit, L + 2)
    infl[:, logit] = 1.0
    score = normed * infl[:, :, None]
    edge_keep = _cover(score.reshape(G, -1), settings.edge_threshold).reshape(G, n, n) & pair
    for _ in range(L + 3):
        has_out = edge_keep.any(1)
        has_in = edge_keep.any(2)
        alive = torch.where(feat, has_in & has_out, has_out)
        alive[:, logit] = True
        alive &= node_keep
        edge_keep &= alive[:, :, None] & alive[:, None, :]
        if torch.equal(alive, node_keep):
            break
        node_keep = alive
    graphs.mask = edge_keep
    graphs.node_mask = node_keep


def feature_nodes(graphs: Graphs) -> dict[str, np.ndarray]:
    """The feature nodes of each graph, (G, N) each: layer, position, latent id, kept by pruning."""
    start = graphs.ctx * (graphs.n_layers + 1)
    kept = graphs.node_mask[:, start : start + graphs.n_feat]
    return {"layer": graphs.feat_layer.numpy(), "pos": graphs.feat_pos.numpy(),
            "latent": graphs.feat_latent.numpy(), "kept": kept.numpy()}  # fmt: skip


def topological_layer(graphs: Graphs) -> torch.Tensor:
    """(G, n) layer of each node: embeddings -1, errors/features their layer, logit L."""
    T, L, _N = graphs.ctx, graphs.n_layers, graphs.n_feat
    G = graphs.adjacency.shape[0]
    err_layer = torch.arange(L).repeat_interleave(T)
    fixed = torch.cat([-torch.ones(T, dtype=torch.long), err_layer])
    return torch.cat([fixed.expand(G, -1), graphs.feat_layer, torch.full((G, 1), L)], 1)


def pathways(graphs: Graphs, n_paths: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-P pathways (embedding -> features -> logit) of each graph by the k-best DP over the pruned DAG.

    Returns (paths (G, P, L+2) node ids, padded with -1; weights (G, P) from the pruned graph; empty (G,)
    bool: no pathway at all)."""
    from methodkit.tools.mcd.kernels import k_best_paths

    G, n, _ = graphs.adjacency.shape
    L = graphs.n_layers
    normed = row_normalise(graphs.adjacency.detach().abs() * graphs.mask).numpy()
    mask = graphs.mask.numpy()
    layer = topological_layer(graphs).numpy()
    kind = graphs.node_kind()
    out_paths = -np.ones((G, n_paths, L + 2), dtype=np.int64)
    out_w = np.zeros((G, n_paths))
    for g in range(G):
        order = np.lexsort((np.arange(n), layer[g]))  # by layer, then id: a topological order
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n)
        sub = mask[g][np.ix_(order, order)]
        w = normed[g][np.ix_(order, order)]
        rows, cols = np.nonzero(sub)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(indptr, rows + 1, 1)
        indptr = np.cumsum(indptr)
        is_source = kind[order] == 0
        weights, paths = k_best_paths(indptr, cols.astype(np.int64), w[rows, cols].astype(np.float64),
                                      is_source, int(rank[n - 1]), n_paths, L + 2)  # fmt: skip
        valid = paths >= 0
        out_paths[g][valid] = order[paths[valid]]
        out_w[g] = weights
    return out_paths, out_w, out_w[:, 0] <= 0


def path_weights(graphs: Graphs, paths: np.ndarray) -> torch.Tensor:
    """Differentiable pathway weights: product of the row-normalised |edge| weights along each path."""
    normed = row_normalise(graphs.adjacency.abs() * graphs.mask)
    G, P, H = paths.shape
    src = torch.from_numpy(paths[:, :, :-1])
    dst = torch.from_numpy(paths[:, :, 1:])
    hop = (src >= 0) & (dst >= 0)
    gi = torch.arange(G)[:, None, None].expand_as(src)
    w = normed[gi, dst.clamp_min(0), src.clamp_min(0)]
    w = torch.where(hop, w, torch.ones_like(w))
    return w.prod(-1) * torch.from_numpy(paths[:, :, 0] >= 0)


def feature_psi(w_u: torch.Tensor, w_dec: torch.Tensor, subset: torch.Tensor) -> torch.Tensor:
    """Logit-lens signature of decoder directions (..., d): normalise(W_U u) restricted to the token subset."""
    lens = w_dec @ w_u[subset].T
    return lens / lens.norm(dim=-1, keepdim=True).clamp_min(1e-8)


@dataclass
class PathDescriptors:
    psi: torch.Tensor  # (G, P, M, S)
    depth: torch.Tensor  # (G, P) mean relative depth of the feature hops (0 without any)
    dpos: torch.Tensor  # (G, P) target position - source position
    src: torch.Tensor  # (G, P) source token
    weight: torch.Tensor  # (G, P) pathway weights (differentiable when the graph is)
    empty: np.ndarray  # (G,)

    def detached(self) -> PathDescriptors:
        return PathDescriptors(self.psi.detach(), self.depth, self.dpos, self.src, self.weight.detach(), self.empty)


def describe(model, tcs, graphs: Graphs, paths: np.ndarray, weights: torch.Tensor, subset, M: int, empty):
    """Descriptors in the shared space: the source embedding's signature at z=0 then each feature's at
    z=(l+1/2)/L, resampled to M relative depths by linear interpolation in z."""
    G, P, H = paths.shape
    T, L, _N = graphs.ctx, graphs.n_layers, graphs.n_feat
    w_u = unembedding(model)
    emb_psi = feature_psi(w_u, model.embed.weight[graphs.tokens], subset)  # (G, T, S)
    feat_psi = _feature_table(model, tcs, graphs, subset)  # (G, N, S)
    S = emb_psi.shape[-1]
    table = torch.cat([emb_psi, torch.zeros(G, L * T, S), feat_psi, torch.zeros(G, 1, S)], 1)  # by node id
    first_feat = T + L * T
    layer = topological_layer(graphs).numpy()
    z_nodes = np.where(np.arange(table.shape[1])[None] < T, 0.0, (layer + 0.5) / L)  # (G, n)
    interp = np.zeros((G, P, M, H))
    depth = np.zeros((G, P))
    dpos = np.zeros((G, P))
    src = np.zeros((G, P), dtype=np.int64)
    targets = np.linspace(0.5 / M, 1 - 0.5 / M, M)
    tok = graphs.tokens.numpy()
    tpos = graphs.target_pos.numpy()
    for g in range(G):
        for p in range(P):
            nodes = paths[g, p]
            nodes = nodes[nodes >= 0]
            if len(nodes) == 0:
                continue
            hops = nodes[:-1]  # drop the logit
            zs = z_nodes[g, hops]
            feats = hops >= first_feat
            depth[g, p] = zs[feats].mean() if feats.any() else 0.0
            dpos[g, p] = tpos[g] - hops[0]
            src[g, p] = tok[g, hops[0]]
            for m, zt in enumerate(targets):
                j = int(np.searchsorted(zs, zt))
                if j == 0 or len(zs) == 1:
                    interp[g, p, m, 0] = 1.0
                elif j >= len(zs):
                    interp[g, p, m, len(zs) - 1] = 1.0
                else:
                    t = (zt - zs[j - 1]) / max(zs[j] - zs[j - 1], 1e-9)
                    interp[g, p, m, j - 1], interp[g, p, m, j] = 1 - t, t
    idx = torch.from_numpy(np.clip(paths, 0, None))
    hop_psi = table[torch.arange(G)[:, None, None], idx]  # (G, P, H, S)
    psi = torch.einsum("gpmh,gphs->gpms", torch.from_numpy(interp).float(), hop_psi)
    psi = psi / psi.norm(dim=-1, keepdim=True).clamp_min(1e-8)
    return PathDescriptors(psi, torch.from_numpy(depth).float(), torch.from_numpy(dpos).float(),
                           torch.from_numpy(src), weights, empty)  # fmt: skip


def _feature_table(model, tcs, graphs: Graphs, subset) -> torch.Tensor:
    w_u = unembedding(model)
    G, N = graphs.feat_latent.shape
    out = torch.zeros(G, N, len(subset))
    for layer in range(graphs.n_layers):
        hit = graphs.feat_layer == layer
        if hit.any():
            rows = tcs[layer].w_dec.detach()[graphs.feat_latent[hit]]
            out = out.index_put(torch.nonzero(hit, as_tuple=True), feature_psi(w_u, rows, subset))
    return out


@dataclass
class CostWeights:
    depth: float = 1.0
    pos: float = 1.0
    token: float = 0.5


def pathway_cost(t: PathDescriptors, s: PathDescriptors, ctx: int, cw: CostWeights) -> torch.Tensor:
    """(G, P_T, P_S): sum_m (1 - cos(psi_m, psi'_m)) + l_z |z - z'| + l_pos |dpos - dpos'|/ctx + l_tok [src != src']."""
    cos = torch.einsum("gpms,gqms->gpq", t.psi, s.psi)
    M = t.psi.shape[2]
    cost = M - cos
    cost = cost + cw.depth * (t.depth[:, :, None] - s.depth[:, None, :]).abs()
    cost = cost + cw.pos * (t.dpos[:, :, None] - s.dpos[:, None, :]).abs() / ctx
    cost = cost + cw.token * (t.src[:, :, None] != s.src[:, None, :]).float()
    return cost


def descriptors_for(model, tcs, tokens, positions, targets, settings: GraphSettings, subset, *, codes=None,
                    differentiable=False):  # fmt: skip
    """Graph -> pruned -> top-P pathways -> descriptors, for a batch of sequences."""
    graphs = build(model, tcs, tokens, positions, targets, settings, codes=codes, differentiable=differentiable)
    paths, _, empty = pathways(graphs, settings.n_paths)
    weights = path_weights(graphs, paths)
    desc = describe(model, tcs, graphs, paths, weights, subset, settings.depths, empty)
    return desc, graphs, paths


def node_names(graphs: Graphs, g: int) -> list[str]:
    T, L, N = graphs.ctx, graphs.n_layers, graphs.n_feat
    names = [f"emb@{q}" for q in range(T)] + [f"err L{l_}@{q}" for l_ in range(L) for q in range(T)]
    names += [f"f L{int(graphs.feat_layer[g, m])}@{int(graphs.feat_pos[g, m])}#{int(graphs.feat_latent[g, m])}"
              for m in range(N)]  # fmt: skip
    return names + [f"logit {int(graphs.target_tok[g])}@{int(graphs.target_pos[g])}"]


def summary(graphs: Graphs, paths, weights, empty) -> dict:
    kind = graphs.node_kind()
    nodes = graphs.node_mask.numpy()
    return {
        "graphs": int(graphs.adjacency.shape[0]),
        "feature_nodes_kept": float(nodes[:, kind == 2].sum(1).mean()),
        "edges_kept": float(graphs.mask.numpy().sum((1, 2)).mean()),
        "empty": int(empty.sum()),
        "top_path_weight": float(weights[:, 0].mean()),
        "paths_found": float((weights > 0).sum(1).mean()),
    }


def to_arrays(graphs: Graphs, paths, weights) -> dict:
    """Pruned graphs as concatenated CSR rows (one block of n rows per graph) plus node tables and pathways."""
    adj = (graphs.adjacency.detach() * graphs.mask).numpy()
    G, n, _ = adj.shape
    rows = adj.reshape(G * n, n)
    nz = rows != 0
    indptr = np.concatenate([[0], np.cumsum(nz.sum(1))]).astype(np.int64)
    return {
        "indptr": indptr, "indices": np.nonzero(nz)[1].astype(np.int32), "data": rows[nz].astype(np.float32),
        "n_nodes": np.array(n), "node_kind": graphs.node_kind(), "node_mask": graphs.node_mask.numpy(),
        "influence": graphs.influence.numpy().astype(np.float32), "feat_layer": graphs.feat_layer.numpy(),
        "feat_pos": graphs.feat_pos.numpy(), "feat_latent": graphs.feat_latent.numpy(),
        "target_pos": graphs.target_pos.numpy(), "target_tok": graphs.target_tok.numpy(),
        "tokens": graphs.tokens.numpy(), "paths": paths, "path_weights": weights,
    }  # fmt: skip


def to_json(graphs: Graphs, paths, weights, g: int, max_edges: int = 64) -> dict:
    names = node_names(graphs, g)
    adj = (graphs.adjacency[g].detach() * graphs.mask[g]).numpy()
    tgt, src = np.nonzero(adj)
    order = np.argsort(-np.abs(adj[tgt, src]))[:max_edges]
    keep = np.flatnonzero(graphs.node_mask[g].numpy())
    return {
        "target": names[-1],
        "nodes": [{"id": int(i), "name": names[i], "influence": float(graphs.influence[g, i])} for i in keep],
        "edges": [{"source": names[src[i]], "target": names[tgt[i]], "weight": float(adj[tgt[i], src[i]])} for i in order],
        "pathways": [{"weight": float(weights[g, p]), "nodes": [names[i] for i in paths[g, p] if i >= 0]}
                     for p in range(paths.shape[1]) if weights[g, p] > 0],
    }  # fmt: skip
