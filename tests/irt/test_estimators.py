"""Estimators: kernels vs NumPy/SciPy references, MML vs girth, recovery of the others, diagnostics."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from methodkit.tools.irt import diagnostics, estimators, evaluate, kernels, mml, reference
from methodkit.tools.irt.simulate import DrawSpec, draw


def _objective_numpy(par, r, n, nodes, code, prior):
    la, b, lc = par
    a = np.exp(la) if code > 1 else 1.0
    c = 1 / (1 + np.exp(-lc)) if code == 3 else 0.0
    p = np.clip(c + (1 - c) / (1 + np.exp(-a * (nodes - b))), 1e-10, 1 - 1e-10)
    f = np.sum(r * np.log(p) + (n - r) * np.log(1 - p))
    if code == 3:
        f += (prior[6] - 1) * np.log(c) + (prior[7] - 1) * np.log(1 - c)
    return f


@pytest.mark.parametrize("code", [1, 2, 3])
def test_mstep_finds_the_scipy_maximum(code):
    rng = np.random.default_rng(code)
    nodes = np.linspace(-6, 6, 61)
    w = np.exp(-0.5 * nodes**2) * 40
    true_p = 0.2 * (code == 3) + (1 - 0.2 * (code == 3)) / (1 + np.exp(-1.3 * (nodes - 0.4)))
    r = rng.binomial(np.round(w).astype(int), true_p).astype(float)
    n = np.round(w)
    prior = np.array([0, 0, 0.5, 0, 0, 2, 5, 17.0])
    params = np.zeros((1, 3))
    params[0, 2] = -1.0 if code == 3 else 0.0
    for _ in range(30):
        kernels.mstep(params, r[None], n[None], nodes, code, prior, 50, 1e-12, np.full(3, -20.0), np.full(3, 20.0))
    free = {1: [1], 2: [0, 1], 3: [0, 1, 2]}[code]

    def neg(x):
        par = np.array([0.0, 0.0, 0.0])
        par[free] = x
        return -_objective_numpy(par, r, n, nodes, code, prior)

    best = optimize.minimize(
        neg,
        np.zeros(len(free)) + (np.array([0, 0, -1.0]) if code == 3 else 0),
        method="Nelder-Mead",
        options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 20000},
    )
    assert -neg(params[0, free]) >= -best.fun - 1e-6
    assert np.allclose(params[0, free], best.x, atol=2e-3)


def test_louis_information_equals_numerical_hessian(small2pl):
    d = small2pl
    est = mml.fit(d.Y, "2pl", mml.MMLSettings())
    params = np.c_[np.log(est.a), est.b, np.zeros(len(est.b))]
    nodes = np.linspace(-6, 6, 61)
    w = np.exp(-0.5 * nodes**2)
    logw = np.log(w / w.sum())
    Yf, Mf = (d.Y == 1).astype(float), np.ones(d.Y.shape)
    W, _ = mml.e_step(Yf, Mf, params, nodes, logw, 2, np.float64)
    info = kernels.louis_information(np.ascontiguousarray(d.Y.T), W, params, nodes, 2)

    def marginal(p0):
        p = params.copy()
        p[0] = p0
        return mml.e_step(Yf, Mf, p, nodes, logw, 2, np.float64)[1]

    h, H = 1e-4, np.zeros((2, 2))
    for i in range(2):
        for k in range(2):
            ei, ek = np.eye(3)[i] * h, np.eye(3)[k] * h
            x = params[0]
            H[i, k] = (
                marginal(x + ei + ek) - marginal(x + ei - ek) - marginal(x - ei + ek) + marginal(x - ei - ek)
            ) / (4 * h * h)
    assert np.allclose(info[0][:2, :2], -H, rtol=1e-4)


@pytest.mark.parametrize("code", [1, 2, 3])
def test_mcmc_kernels_match_numpy_twins(code):
    rng = np.random.default_rng(10 + code)
    N, J = 40, 25
    Y = (rng.random((N, J)) < 0.6).astype(np.uint8)
    Y[rng.random((N, J)) < 0.1] = 255
    theta = rng.standard_normal(N)
    params = np.c_[0.3 * rng.standard_normal(J), rng.standard_normal(J), rng.standard_normal(J) - 1]
    prior = np.array([0.0, 0.5, 0.0, 2.0, 5.0, 17.0])
    step_t, z_t, u_t = np.full(N, 0.8), rng.standard_normal(N), np.log(rng.random(N))
    step_i, z_i, u_i = np.full(J, 0.3), rng.standard_normal((J, 3)), np.log(rng.random(J))
    t_ours, acc = theta.copy(), np.zeros(N, np.int8)
    kernels.mh_theta(Y, t_ours, params, code, step_t, z_t, u_t, acc)
    t_ref, acc_ref = reference.mh_theta(Y, theta, params, code, step_t, z_t, u_t)
    assert np.allclose(t_ours, t_ref) and np.array_equal(acc, acc_ref) and 0 < acc.sum() < N
    p_ours, acc_i = params.copy(), np.zeros(J, np.int8)
    kernels.mh_items(np.ascontiguousarray(Y.T), theta, p_ours, code, step_i, z_i, u_i, prior, acc_i)
    p_ref, acc_iref = reference.mh_items(Y, theta, params, code, step_i, z_i, u_i, prior)
    assert np.allclose(p_ours, p_ref) and np.array_equal(acc_i, acc_iref)


def test_mml_2pl_matches_girth(small2pl):
    girth = pytest.importorskip("girth")
    ours = mml.fit(small2pl.Y, "2pl", mml.MMLSettings())
    ref = girth.twopl_mml(small2pl.Y.T.astype(int))
    assert np.abs(ours.a - ref["Discrimination"]).max() < 0.02
    assert np.abs(ours.b - ref["Difficulty"]).max() < 0.03


def test_mml_1pl_matches_girth_rasch(small2pl):
    girth = pytest.importorskip("girth")
    d = draw(DrawSpec(model="1pl", n_models=300, n_items=10), 2)
    ours = mml.fit(d.Y, "1pl", mml.MMLSettings())
    ref = girth.rasch_mml(d.Y.T.astype(int))
    assert np.corrcoef(ours.b, ref["Difficulty"])[0, 1] > 0.999
    assert np.abs(ours.b - ref["Difficulty"]).max() < 0.1


def test_mml_missing_cells_and_louis_coverage():
    d = draw(DrawSpec(n_models=400, n_items=30, missing=0.3, capability="multimodal"), 4)
    fit = estimators.run(d, "2pl", "mml", estimators.make_settings("mml", se="louis"))
    assert fit.info["converged"] and fit.info["status"] == "ok"
    m = evaluate.evaluate(fit.estimate, d, "2pl")
    assert m["corr_b"] > 0.95 and m["corr_a"] > 0.8 and m["kendall_tau"] > 0.6  # 21 items per model
    assert m["coverage_b"] > 0.8 and m["coverage_a"] > 0.8


def test_mml_empirical_histogram_stays_standardised_and_bimodal():
    d = draw(DrawSpec(n_models=400, n_items=30, capability="multimodal"), 4)
    fit = estimators.run(d, "2pl", "mml", estimators.make_settings("mml", latent="ehw", max_cycles=60))
    weights = np.array(fit.info["latent_weights"])
    nodes = np.linspace(-6, 6, 61)
    assert weights @ nodes == pytest.approx(0, abs=1e-3) and weights @ nodes**2 == pytest.approx(1, abs=0.02)
    assert weights[30] < weights[[27, 28, 32, 33]].max()  # a dip at 0 between the modes at +-1.2


def test_mcmc_recovers_and_reports_diagnostics():
    d = draw(DrawSpec(n_models=60, n_items=20), 5)
    fit = estimators.run(d, "2pl", "mcmc", estimators.make_settings("mcmc", warmup=300, draws=300), seed=1)
    info = fit.info
    assert (
        info["status"] == "ok" and info["rhat_max"] < 1.3 and info["ess_min"] > 4
    )  # min over 100 parameters, 600 draws
    assert 0.15 < info["accept_theta"] < 0.5 and 0.15 < info["accept_items"] < 0.5  # Robbins-Monro hit ~0.3
    m = evaluate.evaluate(fit.estimate, d, "2pl")
    assert m["corr_b"] > 0.9 and m["coverage_b"] > 0.8


def test_mcmc_same_seed_same_draws():
    d = draw(DrawSpec(n_models=10, n_items=8), 5)
    s = estimators.make_settings("mcmc", warmup=20, draws=20)
    one = estimators.run(d, "2pl", "mcmc", s, seed=3).estimate
    two = estimators.run(d, "2pl", "mcmc", s, seed=3).estimate
    assert np.array_equal(one.b, two.b) and np.array_equal(one.theta, two.theta)


def test_vi_recovers_with_positive_a_and_intervals():
    d = draw(DrawSpec(n_models=80, n_items=30), 6)
    fit = estimators.run(d, "2pl", "vi", estimators.make_settings("vi", steps=250), seed=0)
    e = fit.estimate
    assert (e.a > 0).all() and (e.b_low < e.b).all() and (e.b < e.b_high).all()
    m = evaluate.evaluate(e, d, "2pl")
    assert m["corr_b"] > 0.9 and np.isfinite(fit.info["elbo"])


def test_psn_trains_with_early_stopping_and_unconstrained_a():
    d = draw(DrawSpec(n_models=60, n_items=30), 7)
    fit = estimators.run(d, "2pl", "psn", estimators.make_settings("psn", epochs=30), seed=0)
    assert fit.info["n_iter"] <= 30 and fit.info["val_loss"] < 0.69  # beats a coin
    assert evaluate.evaluate(fit.estimate, d, "2pl")["kendall_tau"] > 0.6
    pos = estimators.run(d, "2pl", "psn", estimators.make_settings("psn", epochs=3, positive_a=True), seed=0)
    assert (pos.estimate.a > 0).all()


def test_time_limit_and_memory_limit():
    from methodkit.core.errors import UsageError

    d = draw(DrawSpec(n_models=30, n_items=20), 1)
    fit = estimators.run(d, "2pl", "mcmc", estimators.make_settings("mcmc", warmup=10**6, draws=10), time_limit=0.3)
    assert fit.info["status"] == "timeout"
    with pytest.raises(UsageError, match="over --mem-limit"):
        estimators.run(d, "2pl", "mml", mem_limit_mb=0.001)


def test_rhat_and_ess_known_answers():
    rng = np.random.default_rng(0)
    iid = rng.standard_normal((4, 2000, 3))
    assert np.all(np.abs(diagnostics.rhat(iid) - 1) < 0.01)
    assert np.all(np.abs(diagnostics.bulk_ess(iid) / 8000 - 1) < 0.15)
    rho, x = 0.9, np.zeros((4, 4000, 1))
    e = rng.standard_normal(x.shape)
    for t in range(1, 4000):
        x[:, t] = rho * x[:, t - 1] + e[:, t]
    expected = 16000 * (1 - rho) / (1 + rho)  # AR(1) integrated autocorrelation time
    assert diagnostics.ess(x)[0] == pytest.approx(expected, rel=0.25)
    shifted = iid.copy()
    shifted[0] += 3
    assert diagnostics.rhat(shifted).min() > 1.3


@pytest.mark.parametrize("code", [1, 2])
def test_mcmc_ratio_product_equals_the_log_space_acceptance_ratio(code):
    """The fused kernels' ratio product (with flushes and the overflow fallback) gives the twin's delta."""
    rng = np.random.default_rng(20 + code)
    N, J = 30, 400
    Y = (rng.random((N, J)) < 0.5).astype(np.uint8)
    Y[rng.random((N, J)) < 0.05] = 255
    theta = 3 * rng.standard_normal(N)
    params = np.c_[rng.uniform(-1, 4, J), 3 * rng.standard_normal(J), np.zeros(J)]  # a up to 55: huge |z|
    step_t, z_t = np.full(N, 2.0), rng.standard_normal(N)
    prop = theta + step_t * z_t
    delta = 0.5 * (theta**2 - prop**2)
    delta += reference.cell_loglik_matrix(Y, prop, params, code).sum(1)
    delta -= reference.cell_loglik_matrix(Y, theta, params, code).sum(1)
    for shift, expected in ((-1e-7, 1), (1e-7, 0)):
        acc = np.zeros(N, np.int8)
        kernels.mh_theta(Y, theta.copy(), params, code, step_t, z_t, delta + shift, acc)
        assert np.all(acc == expected)


def test_bulk_ess_with_an_odd_number_of_draws():
    rng = np.random.default_rng(1)
    odd = rng.standard_normal((2, 25, 3))  # split chains drop the middle draw (a 25-draw probe used to crash)
    assert diagnostics.bulk_ess(odd).shape == (3,)
    even = rng.standard_normal((4, 2000, 2))
    old = diagnostics.ess(diagnostics._rank_normalise(diagnostics._split(even)).reshape(even.shape))
    assert np.allclose(diagnostics.bulk_ess(even), old)  # same split chains, only their order differs
    assert np.all(np.abs(diagnostics.bulk_ess(rng.standard_normal((4, 2001, 2))) / 8000 - 1) < 0.15)


def test_average_ranks_match_scipy_with_the_ties_of_rejected_proposals():
    from scipy import stats

    rng = np.random.default_rng(2)
    chain = np.repeat(rng.standard_normal((40, 5)), rng.integers(1, 6, 40), axis=0)  # MH: runs of repeats
    for x in (chain, rng.integers(0, 3, (50, 4)).astype(float), np.zeros((7, 2)), rng.standard_normal((9, 3))):
        assert np.array_equal(diagnostics.average_ranks(x), stats.rankdata(x, axis=0))


def test_e_step_weights_have_no_subnormals_and_sum_to_one():
    """Far-off nodes get exact zeros, not subnormal floats (which slowed the count GEMMs ~5x)."""
    data = draw(DrawSpec(model="2pl", n_models=60, n_items=300), 5)
    em = mml._EMMap(data.Y, "2pl", mml.MMLSettings(), np.float64)
    params = mml.start_values(data.Y, "2pl")
    params[:, 0] = 1.5  # a = e^1.5 over 300 items: log posteriors far below -700 at the edge nodes
    W, _ = em.estep(params)
    tiny = np.finfo(np.float64).tiny
    assert not np.any((W > 0) & (W < tiny))
    assert np.any(W == 0) and np.allclose(W.sum(axis=1), 1.0)


def test_diagnostics_by_parameter_blocks_equal_one_pass(monkeypatch):
    """The blocked diagnostics (bounded memory on 28k-parameter posteriors) give the one-pass values exactly."""
    rng = np.random.default_rng(11)
    draws = rng.standard_normal((2, 60, 7)).cumsum(axis=1)
    draws[:, :, 3] = draws[:, :1, 3]  # a constant parameter: NaN in every statistic, in both layouts
    one_pass = [f(draws) for f in (diagnostics.rhat, diagnostics.ess, diagnostics.bulk_ess)]
    monkeypatch.setattr(diagnostics, "PARAMETER_BLOCK", 3)
    blocked = [f(draws) for f in (diagnostics.rhat, diagnostics.ess, diagnostics.bulk_ess)]
    for a, b in zip(one_pass, blocked):
        assert a.shape == (7,) and np.array_equal(a, b, equal_nan=True)


def test_psn_reports_the_scale_with_mean_a_positive():
    # at 40 x 100 the unconstrained PSN with seed 1 ends on the reversed scale (all a < 0, corr(theta,
    # truth) -0.95 before the reflection); the fit must come back as the other estimators report it
    d = draw(DrawSpec(n_models=40, n_items=100), 0)
    fit = estimators.run(d, "2pl", "psn", estimators.make_settings("psn", epochs=20), seed=1)
    e = fit.estimate
    assert fit.info["sign_reflected"] is True
    assert e.a.mean() > 0 and fit.info["n_negative_a"] == int((e.a < 0).sum())
    assert np.corrcoef(e.theta, d.theta)[0, 1] > 0.9 and np.corrcoef(e.b, d.b)[0, 1] > 0.8
    assert evaluate.evaluate(e, d, "2pl")["sign_flip"] is False


def test_psn_reflection_keeps_every_probability():
    from methodkit.tools.irt import psn
    from methodkit.tools.irt.models import prob

    rng = np.random.default_rng(3)
    a, b, theta = -np.abs(rng.normal(1, 0.3, 8)), rng.normal(size=8), rng.normal(size=5)
    before = prob(theta, a, b, np.zeros(8))
    assert psn.identify_sign(a, b, theta) and a.mean() > 0
    np.testing.assert_allclose(prob(theta, a, b, np.zeros(8)), before, rtol=0, atol=1e-15)
    assert not psn.identify_sign(a, b, theta)


def test_mml_caps_discriminations_whose_ml_does_not_exist():
    # the smallest size that shows the N = 200, J = 2000 case (docs/irt.md): at 50 x 200 (draw
    # seed 0) items separated along the ability order run to the old box's end e^4 = 55 and take
    # corr(a, truth) to 0.20; under the default a_max = 5 (python mirt's) it is 0.59
    d = draw(DrawSpec(n_models=50, n_items=200), 0)
    old = estimators.run(d, "2pl", "mml", estimators.make_settings("mml", a_max=float(np.exp(4))))
    assert np.corrcoef(old.estimate.a, d.a)[0, 1] < 0.3 and old.info["n_items_at_bound"] >= 1
    fit = estimators.run(d, "2pl", "mml", estimators.make_settings("mml"))
    e = fit.estimate
    assert np.corrcoef(e.a, d.a)[0, 1] > 0.5 and e.a.max() <= 5.0 + 1e-9
    upper = fit.info["items_at_bound"]["a_upper"]
    assert fit.info["n_items_at_bound"] == len(upper) >= 1
    assert set(upper) == set(d.item_id[e.a >= 5.0 - 1e-6].astype(str))
    assert "upper bound 5" in fit.info["warnings"][0] and fit.to_dict()["n_items_at_bound"] == len(upper)
    weak = estimators.run(d, "2pl", "mml", estimators.make_settings("mml", prior="weak"))
    assert weak.info["n_items_at_bound"] == 0 and weak.info["warnings"] == []


def test_vi_elbo_change_needs_two_flat_windows():
    from methodkit.tools.irt import vi

    rng = np.random.default_rng(0)
    flat = list(-1000 + rng.normal(0, 5, 400))
    rising = list(np.linspace(-2000, -1000, 400) + rng.normal(0, 5, 400))
    assert vi.elbo_change(flat, 100) < 0.01 < vi.elbo_change(rising, 100)
    assert vi.elbo_change(flat[:150], 100) is None


@pytest.mark.parametrize(
    "method, options, says",
    [
        ("mml", {"max_cycles": 2}, "MML stopped after 2 EM cycles"),
        ("mcmc", {"warmup": 10, "draws": 10}, "MCMC not converged: R-hat max"),
        ("vi", {"steps": 150}, "VI ran 150 steps, fewer than two windows"),
        ("psn", {"epochs": 1}, "PSN used all 1 epochs"),
    ],
)
def test_unconverged_fits_say_so(method, options, says):
    d = draw(DrawSpec(n_models=30, n_items=20), 5)
    fit = estimators.run(d, "2pl", method, estimators.make_settings(method, **options), seed=0)
    assert fit.info["status"] == "ok" and fit.info["converged"] is False
    assert any(w.startswith(says) for w in fit.info["warnings"]), fit.info["warnings"]
    assert fit.to_dict()["convergence"] == fit.info["convergence"]


def test_vi_converges_only_when_its_elbo_settles():
    d = draw(DrawSpec(n_models=30, n_items=40), 2)
    fit = estimators.run(d, "2pl", "vi", estimators.make_settings("vi", steps=2000), seed=0)
    change = fit.info["convergence"]["elbo_rel_change"]
    assert fit.info["converged"] is True and change < 0.01
    assert not any(w.startswith("VI") for w in fit.info["warnings"])
