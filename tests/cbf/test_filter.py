"""The CBF filter: exact Bayesian model averaging, the Kalman limit, numba vs torch, exact gradients."""

from __future__ import annotations

import math

import numpy as np
import pytest

from methodkit.tools.cbf import fit, forward, grid, signals
from methodkit.tools.cbf.forward import FilterOptions


def kalman(outcome, v, s, m0=60.0, w0=10.0):
    """A plain Kalman filter written out: predictions before each outcome and log p(o_t | o_<t)."""
    m, w = m0, w0
    preds, logz = [], []
    for o in outcome:
        preds.append(m)
        pv = w + v
        tot = pv + s
        logz.append(-0.5 * math.log(2 * math.pi * tot) - 0.5 * (o - m) ** 2 / tot)
        k = pv / tot
        m, w = m + k * (o - m), (1 - k) * pv
    return np.array(preds), np.array(logz)


def test_k1_is_the_kalman_filter(cbf_agents):
    c = cbf_agents.cohort
    sig = signals.mixture_signals(c, np.full((c.n_subjects, 1), 7.0), np.full((c.n_subjects, 1), 30.0), FilterOptions())
    preds, logz = kalman(c.outcome[1, 2], 7.0, 30.0)
    assert np.allclose(sig.arrays["pred_mean"][1, 2], preds, atol=1e-12)
    assert np.allclose(sig.logz[1, 2], logz, atol=1e-12)
    assert np.allclose(sig.arrays["ambiguity"][1, 2], 0.0)


def test_grid_is_exact_model_averaging_over_kalman_filters(cbf_agents):
    c = cbf_agents.cohort
    vn = grid.nodes(np.array([0.4]), np.array([3.0]), 0.5, 200.0, 4)
    sn = grid.nodes(np.array([0.6]), np.array([2.0]), 0.5, 400.0, 4)
    sig = signals.mixture_signals(c.subset([0]), vn, sn, FilterOptions())
    o = c.outcome[0, 0]
    runs = [kalman(o, v, s) for v in vn[0] for s in sn[0]]
    preds = np.array([r[0] for r in runs])
    cum = np.cumsum(np.array([r[1] for r in runs]), axis=1)
    logw = np.concatenate([np.zeros((16, 1)), cum[:, :-1]], axis=1)  # weights before trial t
    w = np.exp(logw - logw.max(0))
    w /= w.sum(0)
    assert np.allclose(sig.arrays["pred_mean"][0, 0], (w * preds).sum(0), atol=1e-9)
    evidence = np.log(np.exp(cum[:, -1] - cum[:, -1].max()).mean()) + cum[:, -1].max()
    assert np.isclose(sig.logz[0, 0].sum(), evidence, atol=1e-9)


def test_collapsed_grid_reproduces_the_kalman_filter(cbf_agents):
    c = cbf_agents.cohort.subset([0])
    vn = grid.nodes(np.array([0.3]), np.array([1e6]), 0.5, 200.0, 15)  # unclamped: kappa = 1e6
    sn = grid.nodes(np.array([0.6]), np.array([1e6]), 0.5, 400.0, 15)
    sig = signals.mixture_signals(c, vn, sn, FilterOptions())
    preds, _ = kalman(c.outcome[0, 0], vn[0, 7], sn[0, 7])
    assert np.max(np.abs(sig.arrays["pred_mean"][0, 0] - preds)) < 1e-4
    # the spread is the Beta's: with equal nodes (K = 1) the match is exact
    sig1 = signals.mixture_signals(c, vn[:, 7:8], sn[:, 7:8], FilterOptions())
    assert np.max(np.abs(sig1.arrays["pred_mean"][0, 0] - preds)) < 1e-12


@pytest.mark.parametrize("carry,switch", [(False, 0.0), (True, 0.1)])
def test_numba_kernel_matches_torch_forward(cbf_agents, carry, switch):
    import torch

    c = cbf_agents.cohort
    vn = grid.nodes(np.array([0.2, 0.5, 0.7, 0.5]), np.array([1.0, 5.0, 30.0, 2.0]), 0.5, 200.0, 5)
    sn = grid.nodes(np.array([0.5, 0.3, 0.5, 0.9]), np.array([2.0, 1.0, 8.0, 50.0]), 0.5, 400.0, 5)
    opts = FilterOptions(switch=switch, carry_over=carry)
    sig = signals.mixture_signals(c, vn, sn, opts)
    pred, logz = forward.filter_predictions(
        torch.from_numpy(c.outcome), torch.from_numpy(c.valid), torch.from_numpy(vn), torch.from_numpy(sn), opts
    )
    assert np.allclose(pred.numpy(), sig.arrays["pred_mean"], atol=1e-10)
    assert np.allclose(logz.numpy(), sig.logz, atol=1e-10)


def test_signals_are_sane(cbf_agents):
    c = cbf_agents.cohort
    vn = grid.nodes(np.full(4, 0.5), np.full(4, 2.0), 0.5, 200.0, 6)
    sn = grid.nodes(np.full(4, 0.5), np.full(4, 2.0), 0.5, 400.0, 6)
    sig = signals.mixture_signals(c, vn, sn, FilterOptions())
    assert np.isfinite(sig.arrays["lr"]).mean() > 0.99
    single = signals.mixture_signals(c, vn[:, 2:3], sn[:, 3:4], FilterOptions())
    lr = single.arrays["lr"]  # one Kalman filter: the learning rate is its gain, in (0, 1), falling to steady state
    assert np.nanmin(lr) > 0 and np.nanmax(lr) < 1
    assert np.all(np.diff(lr[0, 0]) <= 1e-12)
    assert np.all((sig.arrays["entropy"] >= 0) & (sig.arrays["entropy"] <= 1 + 1e-12))
    assert np.allclose(sig.arrays["entropy"][:, :, 0], 1.0)  # uniform prior weights
    assert np.all(sig.arrays["ambiguity"] >= 0)


@pytest.mark.parametrize(
    "model,objective,response,filt",
    [
        ("cbf", "joint", forward.ResponseModel(censor=True, lapse=0.02), FilterOptions()),
        ("kf", "joint", forward.ResponseModel(censor=True, lapse=0.02), FilterOptions()),
        ("cbf", "responses", forward.ResponseModel(), FilterOptions(switch=0.05, carry_over=True)),
        ("cbf", "outcomes", forward.ResponseModel(), FilterOptions(carry_over=True)),
    ],
)
def test_numba_adjoint_gradient_equals_torch_autograd(cbf_agents, model, objective, response, filt):
    import torch

    c = cbf_agents.cohort
    c.response[0, 1, 2] = np.nan  # a missing response is left out of both
    c.valid[3, 2, -3:] = False  # a short block
    opts = fit.FitOptions(model=model, grid=grid.GridSpec(k=5), response=response, objective=objective, filter=filt)
    d = 5 if model == "cbf" else 3
    theta = np.array(fit.models.GRADIENT_MODELS[model].prior_mean) + np.random.default_rng(0).normal(0, 0.6, (4, d))
    try:
        loss, g = fit.Objective(c, np.arange(4), opts)(theta)
        value, *_ = fit.Objective(c, np.arange(4), opts).parts(theta, need_grad=False)
        t = torch.tensor(theta, requires_grad=True)
        ref, _, _, _ = fit.neg_log_posterior(t, fit._batch(c, np.arange(4), 1), opts)
        ref.sum().backward()
        torch_path = fit.Objective(c, np.arange(4), fit.FitOptions(**{**opts.__dict__, "gradient": "torch"}))
        loss_t, g_t = torch_path(theta)
    finally:
        c.response[0, 1, 2] = 50.0
        c.valid[3, 2, -3:] = True
    assert np.allclose(loss, ref.detach().numpy(), rtol=1e-10)
    assert np.array_equal(value, loss)
    assert np.allclose(g, t.grad.numpy(), rtol=1e-7, atol=1e-7)
    assert np.allclose(loss_t, loss, rtol=1e-10) and np.allclose(g_t, g, rtol=1e-7, atol=1e-7)


def test_shape_coordinates_round_trip_and_chain_rule(cbf_agents):
    c = cbf_agents.cohort
    obj = fit.Objective(c, np.arange(4), fit.FitOptions(grid=grid.GridSpec(k=4)))
    space = fit.ShapeSpace(obj, "cbf")
    theta = np.array(fit.models.CBF.prior_mean) + np.random.default_rng(5).normal(0, 0.5, (4, 5))
    y = space.to_y(theta)
    assert np.allclose(space.to_theta(y), theta, atol=1e-12)
    mu, kappa = fit.models.sigmoid(theta[:, 0]), np.exp(theta[:, 1])
    assert np.allclose(np.exp(y[:, :2]), np.column_stack([mu * kappa, (1 - mu) * kappa]))
    _, gy = space(y)
    for j in range(5):
        e = np.zeros(5)
        e[j] = 1e-6
        fd = (space(y + e)[0] - space(y - e)[0]) / 2e-6
        assert np.allclose(fd, gy[:, j], rtol=1e-5, atol=1e-5)


def test_screening_picks_the_best_grid_points(cbf_agents):
    c = cbf_agents.cohort
    opts = fit.FitOptions(grid=grid.GridSpec(k=4), screen=3)
    obj = fit.Objective(c, np.arange(4), opts)
    fixed = fit.ShapeSpace(obj, "cbf").to_y(np.array(fit.models.CBF.starts))
    picked = fit.screen_starts(obj, opts, fixed)
    assert picked.shape == (4, 3, 5)
    space = fit.ShapeSpace(obj, "cbf")
    cand = np.clip(fit.models.screen_grid("cbf"), *space.bounds(5))
    for s in range(4):
        loss, _ = space(cand, np.full(len(cand), s))
        assert np.allclose(np.sort(loss)[:3], space(picked[s], np.full(3, s))[0])


def test_fit_by_the_adjoint_agrees_with_the_torch_reference_path(cbf_agents):
    c = cbf_agents.cohort.subset([0, 1])
    base = dict(grid=grid.GridSpec(k=4), restarts=2, screen=1)
    a = fit.run(c, fit.FitOptions(**base)).table
    b = fit.run(c, fit.FitOptions(**base, gradient="torch")).table
    assert np.allclose(a["loglik"], b["loglik"], atol=1e-6)
    for col in ("mu_v", "mu_s", "sigma_r"):
        assert np.allclose(a[col], b[col], atol=1e-3)
    assert np.allclose(np.log(a[["kappa_v", "kappa_s"]]), np.log(b[["kappa_v", "kappa_s"]]), atol=1e-2)


def test_loglik_gradcheck_in_float64(cbf_agents):
    import torch

    c = cbf_agents.cohort.subset([0])
    opts = fit.FitOptions(grid=grid.GridSpec(k=3))
    batch = fit._batch(c, np.arange(1), 1)
    theta = torch.tensor([[0.2, 0.8, -0.3, 1.5, 1.4]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda th: fit.row_terms(th, batch, opts)[0], (theta,), eps=1e-6, atol=1e-4, rtol=1e-4
    )
