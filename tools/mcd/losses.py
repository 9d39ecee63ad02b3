"""The two MCD terms: pathway matching (OT between teacher and student pathway measures) and the
node-level transport term that upper-bounds the MLP-level discrepancy; and that bound, measured."""

from __future__ import annotations

import math

import numpy as np
import torch

from methodkit.core.errors import UsageError
from methodkit.tools.mcd import graph as G
from methodkit.tools.mcd import transport


def layer_map(n_student: int, n_teacher: int, explicit: str | None = None) -> list[int]:
    """Student layer l -> teacher layer floor((l + 1/2) L_T / L_S - 1/2 + 1/2) (matching relative depths)."""
    if explicit:
        try:
            mapped = [int(v) for v in explicit.split(",")]
        except ValueError:
            raise UsageError(f"--layer-map {explicit!r}: give one teacher layer per student layer, e.g. 1,3") from None
        if len(mapped) != n_student or not all(0 <= v < n_teacher for v in mapped):
            raise UsageError(
                f"--layer-map {explicit!r}: needs {n_student} teacher layers in 0..{n_teacher - 1}"
            )
        return mapped
    if n_student == 0 or n_student > n_teacher:
        raise UsageError(
            f"student has {n_student} layers and the teacher {n_teacher}: pass an explicit --layer-map"
        )
    return [int(math.floor((l_ + 0.5) * n_teacher / n_student)) for l_ in range(n_student)]


def gather_positions(codes, positions):
    """(values, indices) per layer at the target positions: (B, K, k) each."""
    bi = torch.arange(positions.shape[0])[:, None]
    return [(v[bi, positions], i[bi, positions]) for v, i in codes]


def node_loss(t_codes, t_tcs, s_codes, s_tcs, adapter, positions, lmap, eps=0.05, iters=50, keep=None):
    """sum over layer pairs of mean_pos [m_T OT_eps(mu_T, mu_S) + R |m_T - m_S|] + ||b_T - W_a b_S||.

    `keep` (optional, per layer pair a (B, K, k) bool mask of teacher latents) restricts the teacher
    measure (--node-scope graph); the dropped mass is returned so it can be added to the bound."""
    t_sel, s_sel = gather_positions(t_codes, positions), gather_positions(s_codes, positions)
    total, dropped, parts = 0.0, 0.0, []
    for ls, lt in enumerate(lmap):
        a_t, i_t = t_sel[lt]
        b_s, i_s = s_sel[ls]
        u_t = t_tcs[lt].w_dec.detach()[i_t]
        if keep is not None:
            dropped = dropped + float((a_t * (~keep[ls])).sum(-1).mean())
            a_t = a_t * keep[ls]
        v_s = adapter(s_tcs[ls].w_dec.detach()[i_s])
        k = a_t.shape[-1]
        terms, info = transport.node_terms(
            a_t.reshape(-1, k), u_t.reshape(-1, k, u_t.shape[-1]), b_s.reshape(-1, b_s.shape[-1]),
            v_s.reshape(-1, b_s.shape[-1], v_s.shape[-1]), eps, iters,
        )  # fmt: skip
        bias = (t_tcs[lt].b_dec.detach() - adapter(s_tcs[ls].b_dec.detach())).norm()
        total = total + terms.mean() + bias
        parts.append(info)
    return total, dropped, parts


def graph_keep(nodes: dict, t_codes, positions, lmap) -> list[torch.Tensor]:
    """--node-scope graph: per layer pair a (B, K, k) mask of the teacher latents at the target positions
    that are kept feature nodes of that target's pruned graph. `nodes` holds window-major (B*K, N) arrays
    `layer`, `pos`, `latent` of the graphs' feature nodes and `kept` (kept by pruning)."""
    B, K = positions.shape
    layer, pos, latent, kept = (torch.as_tensor(nodes[n]).reshape(B, K, -1) for n in ("layer", "pos", "latent", "kept"))
    at_target = kept.bool() & (pos == positions[..., None])
    out = []
    for lt in lmap:
        _, idx = gather_positions([t_codes[lt]], positions)[0]  # (B, K, k)
        hit = (idx[..., None] == latent[:, :, None, :]) & (at_target & (layer == lt))[:, :, None, :]
        out.append(hit.any(-1))
    return out


def path_loss(t_desc: G.PathDescriptors, s_desc: G.PathDescriptors, ctx, cw, eps=0.05, iters=50, unbalanced=None,
              fgw: float | None = None):  # fmt: skip
    """OT between the teacher's and the student's pathway measures, over graphs where both have paths;
    with `fgw` (alpha) fused Gromov-Wasserstein, the structure of each measure being its own pathway costs."""
    ok = ~(t_desc.empty | s_desc.empty)
    n_empty = int((~ok).sum())
    if not ok.any():
        return None, n_empty, 0
    idx = torch.from_numpy(np.flatnonzero(ok))
    t = _take(t_desc, idx)
    s = _take(s_desc, idx)
    cost = G.pathway_cost(t, s, ctx, cw)
    if fgw is not None:
        c_t, c_s = G.pathway_cost(t, t, ctx, cw), G.pathway_cost(s, s, ctx, cw)
        value = transport.fgw_cost(cost, c_t, c_s, transport.normalise(t.weight), transport.normalise(s.weight), fgw)
        return value.mean(), n_empty, 0
    value, n_bad = transport.pathway_loss(cost, t.weight, s.weight, eps, iters, unbalanced)
    return value, n_empty, n_bad


def _take(d: G.PathDescriptors, idx) -> G.PathDescriptors:
    return G.PathDescriptors(d.psi[idx], d.depth[idx], d.dpos[idx], d.src[idx], d.weight[idx], d.empty[idx.numpy()])


@torch.no_grad()
def bound_check(teacher, t_tcs, student, s_tcs, adapter, tokens, lmap, positions=None) -> list[dict]:
    """Per (layer pair, sequence, position): the measured ||MLP_T - W_a MLP_S|| and the bound
    eps_T + ||W_a|| eps_S + m_T W1 + R |m_T - m_S| + ||b_T - W_a b_S|| (W1 exact, by POT's emd)."""
    from methodkit.core.nn.transformer import trace

    _, t_taps = trace(teacher, tokens)
    _, s_taps = trace(student, tokens)
    w_a = adapter.weight
    op_norm = float(torch.linalg.matrix_norm(w_a, ord=2))
    B, T = tokens.shape
    pos_list = range(T) if positions is None else positions
    rows = []
    for ls, lt in enumerate(lmap):
        tt, st = t_tcs[lt], s_tcs[ls]
        xt, yt = t_taps[lt]["mlp_in"], t_taps[lt]["mlp_out"]
        xs, ys = s_taps[ls]["mlp_in"], s_taps[ls]["mlp_out"]
        at, it = tt.encode_sparse(xt)
        bs, is_ = st.encode_sparse(xs)
        rt, rs = tt.decode_sparse(at, it), st.decode_sparse(bs, is_)
        bias = float((tt.b_dec - adapter(st.b_dec)).norm())
        for b in range(B):
            for p in pos_list:
                u = tt.w_dec[it[b, p]]
                v = adapter(st.w_dec[is_[b, p]])
                m_t, m_s = float(at[b, p].sum()), float(bs[b, p].sum())
                radius = float(v.norm(dim=-1).max())
                if m_t > 0 and m_s > 0:
                    transport_term = m_t * transport.exact_w1(at[b, p], u, bs[b, p], v)
                else:  # one side has no mass: bound the sum by its norms directly
                    transport_term = m_t * float(u.norm(dim=-1).max()) + m_s * radius
                w1 = transport_term / m_t if m_t > 0 else 0.0
                eps_t = float((yt[b, p] - rt[b, p]).norm())
                eps_s = float((ys[b, p] - rs[b, p]).norm())
                lhs = float((yt[b, p] - adapter(ys[b, p])).norm())
                bound = eps_t + op_norm * eps_s + transport_term + radius * abs(m_t - m_s) + bias
                rows.append({"layer_s": ls, "layer_t": lt, "seq": b, "pos": int(p), "discrepancy": lhs,
                             "bound": bound, "eps_t": eps_t, "eps_s": eps_s, "w1": w1, "m_t": m_t, "m_s": m_s})  # fmt: skip
    return rows
