"""Optimal transport for MCD: batches of small entropic problems solved by POT, gradients by the envelope theorem.

`ot.batch.solve_batch` (log-domain Sinkhorn, POT >= 0.9.6) solves B problems of one size at once. The
loss we return is the transport cost of the entropic plan, <P*, C>, which is >= the exact W1 because
P* is a coupling (what the bound needs). Its gradient is taken as the envelope theorem gives it for the
regularised problem: dC = P*, da = f, db = g (the dual potentials, centred), so no backpropagation runs
through the Sinkhorn iterations. `--unbalanced TAU` swaps the hard marginals for KL penalties
(POT's `sinkhorn_unbalanced2`, differentiated by POT's torch backend).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MASS_FLOOR = 1e-6  # every atom keeps at least this mass, so log-domain Sinkhorn never sees log(0)


def _require_pot():
    try:
        import ot  # noqa: F401
        from ot.batch import solve_batch
    except ImportError:  # pragma: no cover - the extra is installed in tests
        from methodkit.core.errors import UsageError

        raise UsageError("POT is missing; pip install 'methodkit[mcd]'") from None
    return solve_batch


def normalise(weights: torch.Tensor) -> torch.Tensor:
    """Rows of nonnegative weights -> probability vectors with a floor (zero mass never reaches Sinkhorn)."""
    w = weights.clamp_min(0) + MASS_FLOOR
    return w / w.sum(-1, keepdim=True)


@dataclass
class Solved:
    plan: torch.Tensor  # (B, n, m)
    f: torch.Tensor  # (B, n) dual potentials (cost units), centred
    g: torch.Tensor  # (B, m)
    marginal_error: torch.Tensor  # (B,) L1 error of both marginals


def solve(cost: torch.Tensor, a: torch.Tensor, b: torch.Tensor, eps: float = 0.05, iters: int = 50) -> Solved:
    solve_batch = _require_pot()
    res = solve_batch(
        cost.detach(), reg=eps, a=a.detach(), b=b.detach(), max_iter=iters, tol=0.0, method="log_sinkhorn",
        grad="detach",
    )  # fmt: skip
    f, g = (eps * p for p in res.potentials)  # solve_batch returns the potentials in units of eps
    err = (res.plan.sum(-1) - a).abs().sum(-1) + (res.plan.sum(-2) - b).abs().sum(-1)
    return Solved(res.plan, f - f.mean(-1, keepdim=True), g - g.mean(-1, keepdim=True), err)


class _EntropicCost(torch.autograd.Function):
    @staticmethod
    def forward(ctx, cost, a, b, eps, iters):
        solved = solve(cost, a, b, eps, iters)
        ctx.save_for_backward(solved.plan, solved.f, solved.g)
        ctx.marginal_error = solved.marginal_error
        return (solved.plan * cost).sum((-1, -2)), solved.marginal_error

    @staticmethod
    def backward(ctx, grad_value, _grad_err):
        plan, f, g = ctx.saved_tensors
        gv = grad_value[:, None]
        return plan * gv[..., None], f * gv, g * gv, None, None


def entropic_cost(cost: torch.Tensor, a: torch.Tensor, b: torch.Tensor, eps: float = 0.05, iters: int = 50):
    """(<P*, C> per problem (B,), marginal error (B,)) for costs (B, n, m) and marginals (B, n), (B, m)."""
    return _EntropicCost.apply(cost, a, b, eps, iters)


def unbalanced_cost(cost: torch.Tensor, a: torch.Tensor, b: torch.Tensor, tau: float, eps: float = 0.05, iters=50):
    """KL-relaxed marginals (strength tau): one POT call per problem (float64, log-domain-free Sinkhorn
    needs the headroom), gradients by POT's torch backend."""
    import warnings

    import ot

    values = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # POT warns on every unconverged problem; the caller counts them
        for i in range(cost.shape[0]):
            v = ot.unbalanced.sinkhorn_unbalanced2(a[i].double(), b[i].double(), cost[i].double(), eps, tau,
                                                   method="sinkhorn", numItermax=iters)  # fmt: skip
            values.append(v.reshape(()).to(cost.dtype))
    return torch.stack(values)


def fgw_cost(cost, c_t, c_s, a, b, alpha: float) -> torch.Tensor:
    """(B,) fused Gromov-Wasserstein values (POT's `fused_gromov_wasserstein2`, square loss): (1 - alpha)
    <P, C> + alpha sum |c_t(i, k) - c_s(j, l)|^2 P_ij P_kl, with c_t, c_s the pathway costs inside each
    measure (the graph-structure ablation). Gradients through POT's torch backend (envelope, as POT sets them)."""
    _require_pot()
    import ot

    values = [ot.gromov.fused_gromov_wasserstein2(cost[i].double(), c_t[i].double(), c_s[i].double(),
                                                   a[i].double(), b[i].double(), alpha=alpha)
              for i in range(cost.shape[0])]  # fmt: skip
    return torch.stack(values).to(cost.dtype)


def pathway_loss(cost, w_t, w_s, eps=0.05, iters=50, unbalanced: float | None = None, tol: float = 1e-3):
    """OT between teacher and student pathway measures. Problems whose Sinkhorn marginals still miss by
    more than `tol` are re-solved with 10x the iterations, and those still off are solved unbalanced
    (tau 1 unless given). Returns (mean loss, number of problems that needed the unbalanced fallback)."""
    a, b = normalise(w_t), normalise(w_s)
    if unbalanced:
        return unbalanced_cost(cost, a, b, unbalanced, eps, iters).mean(), 0
    values, err = entropic_cost(cost, a, b, eps, iters)
    n_bad = 0
    bad = torch.nonzero(err > tol).flatten()
    if len(bad):
        longer, err2 = entropic_cost(cost[bad], a[bad], b[bad], eps, 10 * iters)
        values = values.index_put((bad,), longer)
        still = bad[err2 > tol]
        n_bad = len(still)
        if n_bad:
            values = values.index_put((still,), unbalanced_cost(cost[still], a[still], b[still], 1.0, eps, 10 * iters))
    return values.mean(), n_bad


def euclidean(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(B, n, d), (B, m, d) -> (B, n, m) Euclidean distances (not squared; smooth at 0)."""
    d2 = (x[:, :, None, :] - y[:, None, :, :]).pow(2).sum(-1)
    return (d2 + 1e-12).sqrt()


def node_terms(a_t, u_t, b_s, v_s, eps=0.05, iters=50):
    """Per problem: m_T * OT_eps(mu_T, mu_S) + R |m_T - m_S| with Euclidean cost.

    a_t (B, k) teacher activations at locations u_t (B, k, d); b_s (B, k') student activations at
    (adapted) locations v_s (B, k', d). Returns (terms (B,), parts dict of the pieces, each (B,)).
    """
    m_t, m_s = a_t.sum(-1), b_s.sum(-1)
    cost = euclidean(u_t, v_s)
    w1, err = entropic_cost(cost, normalise(a_t), normalise(b_s), eps, iters)
    radius = v_s.norm(dim=-1).max(-1).values
    terms = m_t * w1 + radius * (m_t - m_s).abs()
    return terms, {"m_t": m_t, "m_s": m_s, "ot": w1, "radius": radius, "marginal_error": err}


def exact_w1(a, u, b, v) -> float:
    """Exact W1 between two normalised point measures (POT's network simplex): the bound's reference."""
    import numpy as np
    import ot

    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    cost = ot.dist(np.asarray(u, dtype=np.float64), np.asarray(v, dtype=np.float64), metric="euclidean")
    return float(ot.emd2(a / a.sum(), b / b.sum(), cost))
