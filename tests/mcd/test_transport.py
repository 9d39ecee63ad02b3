"""Batched entropic OT (POT's ot.batch) with envelope gradients, against POT's own solvers."""

import numpy as np
import ot
import pytest
import torch

from methodkit.tools.mcd import transport


def _problem(seed, b=3, n=6, m=5):
    g = torch.Generator().manual_seed(seed)
    cost = torch.rand(b, n, m, generator=g, dtype=torch.float64)
    a = torch.softmax(torch.randn(b, n, generator=g, dtype=torch.float64), 1)
    bb = torch.softmax(torch.randn(b, m, generator=g, dtype=torch.float64), 1)
    return cost, a, bb


def test_cost_matches_pot_sinkhorn2_and_cost_gradient_is_the_plan():
    """The value is POT's sinkhorn2 (<P*, C>); dC is the gradient of the regularised objective, which POT's
    torch backend gives by differentiating through every iteration (grad='autodiff')."""
    from ot.batch import solve_batch

    cost, a, b = _problem(0)
    c = cost.clone().requires_grad_(True)
    values, err = transport.entropic_cost(c, a, b, eps=0.05, iters=2000)
    values.sum().backward()
    for i in range(3):
        ref = ot.sinkhorn2(a[i], b[i], cost[i], 0.05, method="sinkhorn_log", numItermax=5000, stopThr=1e-12)
        assert float(values[i]) == pytest.approx(float(ref), abs=1e-5)
    c2 = cost.clone().requires_grad_(True)
    solve_batch(c2, reg=0.05, a=a, b=b, max_iter=2000, tol=0, method="log_sinkhorn", grad="autodiff").value.sum().backward()
    assert torch.allclose(c.grad, c2.grad, atol=1e-5)
    assert float(err.max()) < 1e-6


def test_marginal_gradient_is_the_dual_potential():
    """Envelope theorem: d(regularised OT)/d b_j equals g_j (up to a constant): finite differences agree."""
    from ot.batch import solve_batch

    cost, a, b = _problem(1)
    bb = b.clone().requires_grad_(True)
    values, _ = transport.entropic_cost(cost, a, bb, eps=0.05, iters=3000)
    values[0].backward()

    def reg_value(marg):
        return solve_batch(cost, reg=0.05, a=a, b=marg, max_iter=3000, tol=0, method="log_sinkhorn", grad="detach").value[0]

    d = torch.zeros_like(b)
    d[0, 1], d[0, 3] = 1e-5, -1e-5
    fd = (reg_value(b + d) - reg_value(b - d)) / 2e-5
    assert float(fd) == pytest.approx(float(bb.grad[0, 1] - bb.grad[0, 3]), abs=1e-4)


def test_entropic_cost_upper_bounds_exact_w1():
    rng = np.random.default_rng(2)
    for _ in range(5):
        u, v = rng.standard_normal((6, 4)), rng.standard_normal((5, 4))
        a, b = rng.random(6), rng.random(5)
        w1 = transport.exact_w1(a, u, b, v)
        cost = torch.from_numpy(ot.dist(u, v, metric="euclidean"))[None]
        value, _ = transport.entropic_cost(cost, torch.from_numpy(a / a.sum())[None], torch.from_numpy(b / b.sum())[None],
                                           0.05, 2000)  # fmt: skip
        assert float(value) >= w1 - 1e-6


def test_zero_mass_gets_a_floor_and_unconverged_problems_are_counted():
    w = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    out = transport.normalise(w)
    assert torch.all(out > 0) and torch.allclose(out.sum(-1), torch.ones(2))
    cost, a, b = _problem(3, b=4, n=8, m=8)
    peaky_a, peaky_b = transport.normalise(a**12), transport.normalise(b**12)
    value, n_bad = transport.pathway_loss(6 * cost, peaky_a, peaky_b, eps=0.05, iters=3)
    assert torch.isfinite(value) and n_bad >= 0
    value_u, _ = transport.pathway_loss(6 * cost, peaky_a, peaky_b, unbalanced=1.0)
    assert torch.isfinite(value_u)
