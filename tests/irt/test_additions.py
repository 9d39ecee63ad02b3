"""SQUAREM, MAP abilities, Stocking-Lord linking and the Polya-Gamma Gibbs sampler."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.irt import estimators, evaluate, mcmc, mml
from methodkit.tools.irt.result import Estimate
from methodkit.tools.irt.simulate import DrawSpec, draw


@pytest.mark.parametrize(
    "model", [pytest.param("1pl", marks=pytest.mark.slow), "2pl", pytest.param("3pl", marks=pytest.mark.slow)]
)
def test_squarem_reaches_the_em_optimum_in_fewer_em_steps(model):
    data = draw(DrawSpec(model=model, profile="mmlu", n_models=200, n_items=20), 3)
    plain = mml.fit(data.Y, model, mml.MMLSettings(tol=1e-6))
    fast = mml.fit(data.Y, model, mml.MMLSettings(tol=1e-6, accelerate="squarem"))
    assert plain.info["converged"] and fast.info["converged"]
    assert fast.info["em_evaluations"] < plain.info["em_evaluations"]
    assert fast.info["loglik"] == pytest.approx(plain.info["loglik"], abs=1e-3)
    assert np.max(np.abs(fast.b - plain.b)) < 1e-3
    assert np.max(np.abs(fast.a - plain.a)) < 1e-3


def test_map_abilities_are_the_grid_maximum_of_the_log_posterior():
    data = draw(DrawSpec(model="3pl", profile="mmlu", n_models=30, n_items=40), 4)
    Y = data.Y.copy()
    Y[0, :5] = 255  # missing cells are left out of the likelihood
    theta, sd = mml.map_abilities(Y, data.a, data.b, data.c)
    grid = np.linspace(-5, 5, 20001)
    P = data.c + (1 - data.c) / (1 + np.exp(-data.a * (grid[:, None] - data.b)))
    for n in range(Y.shape[0]):
        ok = Y[n] != 255
        y = Y[n, ok].astype(float)
        lp = (y * np.log(P[:, ok]) + (1 - y) * np.log1p(-P[:, ok])).sum(1) - 0.5 * grid**2
        assert theta[n] == pytest.approx(grid[np.argmax(lp)], abs=1e-3)
    assert np.all((sd > 0) & (sd < 1))


def test_mml_map_scoring_is_used_and_close_to_eap(small2pl):
    eap = mml.fit(small2pl.Y, "2pl", mml.MMLSettings())
    mapped = mml.fit(small2pl.Y, "2pl", mml.MMLSettings(scoring="map"))
    assert not np.allclose(eap.theta, mapped.theta)
    assert np.corrcoef(eap.theta, mapped.theta)[0, 1] > 0.99
    theta, _ = mml.map_abilities(small2pl.Y, mapped.a, mapped.b, mapped.c)
    assert np.allclose(mapped.theta, theta)


@pytest.mark.parametrize("flip", [False, True])
def test_stocking_lord_recovers_a_known_linear_transform(flip):
    rng = np.random.default_rng(5)
    J, N = 40, 60
    a = np.exp(rng.normal(0.2, 0.4, J))
    b = rng.normal(-0.3, 1.2, J)
    c = rng.beta(5, 17, J)
    theta = rng.standard_normal(N)
    A, B = 1.7, -0.4  # truth = A * estimate + B
    s = -1.0 if flip else 1.0
    noisy = s * (theta - B) / A + rng.normal(0, 0.4, N)  # abilities estimated with error
    est = Estimate(a=s * a * A, b=s * (b - B) / A, c=c, theta=noisy)
    link = evaluate.stocking_lord(est, a, b, c, theta if flip else None)
    assert link.flipped == flip
    assert link.A == pytest.approx(A, rel=1e-4)
    assert link.B == pytest.approx(B, abs=1e-4)
    # mean-sigma on the noisy abilities misses A (their sd is inflated by the error)
    assert abs(evaluate.link(noisy, theta)[0] - A) > 0.05


def test_eval_with_stocking_lord_linking(small2pl):
    est = mml.fit(small2pl.Y, "2pl", mml.MMLSettings())
    ms = evaluate.evaluate(est, small2pl, "2pl")
    sl = evaluate.evaluate(est, small2pl, "2pl", linking="stocking-lord")
    assert sl["linking"] == "stocking-lord" and ms["linking"] == "mean-sigma"
    assert sl["link_A"] != ms["link_A"]
    assert sl["corr_b"] == pytest.approx(ms["corr_b"])  # a linear map leaves correlations alone
    assert sl["rmse_b"] < 0.5


@pytest.mark.parametrize("z", [0.0, 1.5, 4.0])
def test_polya_gamma_draws_have_the_known_moments(z):
    from polyagamma import random_polyagamma

    x = random_polyagamma(1.0, np.full(200_000, z), random_state=np.random.default_rng(7))
    if z == 0:
        mean, var = 1 / 4, 1 / 24
    else:
        mean = np.tanh(z / 2) / (2 * z)
        var = (np.sinh(z) - z) / (4 * z**3 * np.cosh(z / 2) ** 2)
    assert x.mean() == pytest.approx(mean, abs=5 * np.sqrt(var / len(x)))
    assert x.var() == pytest.approx(var, rel=0.05)


@pytest.mark.parametrize("model", [pytest.param("1pl", marks=pytest.mark.slow), "2pl"])
def test_polya_gamma_gibbs_posterior_means_are_near_the_mml_modes(small2pl, model):
    """N = 300: posterior means and MML modes nearly agree, except where the posterior is skewed (extreme items)."""
    mml_fit = estimators.run(small2pl, model, "mml", estimators.make_settings("mml")).estimate
    settings = estimators.make_settings("mcmc", sampler="pg", warmup=300, draws=600)
    fit = estimators.run(small2pl, model, "mcmc", settings, seed=1)
    pg = fit.estimate
    assert fit.info["status"] == "ok" and fit.info["rhat_max"] < 1.1
    p = (small2pl.Y == 1).mean(0)
    middle = (p > 0.1) & (p < 0.9)
    assert np.max(np.abs(pg.b - mml_fit.b)[middle]) < 0.15
    assert np.max(np.abs(pg.a - mml_fit.a)[middle]) < 0.25
    assert np.corrcoef(pg.theta, mml_fit.theta)[0, 1] > 0.995
    assert np.mean((pg.b_low <= small2pl.b) & (small2pl.b <= pg.b_high)) >= 0.75


def test_polya_gamma_refuses_the_3pl(small2pl):
    from methodkit.core.errors import UsageError

    with pytest.raises(UsageError, match="1PL/2PL"):
        mcmc.fit(small2pl.Y, "3pl", mcmc.MCMCSettings(sampler="pg", warmup=5, draws=5))


def test_lsat7_2pl_matches_r_mirt():
    """R mirt's LSAT7 example, mirt(LSAT7, 1) (EM, 61 nodes): slopes a1 and intercepts d, logLik -2658.805."""
    pytest.importorskip("mirt")
    from methodkit.core import datasets
    from methodkit.tools.irt.data import from_wide

    frame = datasets.load("irt-lsat7")
    assert frame.shape == (1000, 5)
    data = from_wide(frame, "irt-lsat7")
    fit = estimators.run(data, "2pl", "mml", estimators.make_settings("mml", tol=1e-6))
    a = np.array([0.988, 1.081, 1.706, 0.765, 0.736])
    d = np.array([1.856, 0.808, 1.804, 0.486, 1.855])
    assert np.allclose(fit.estimate.a, a, atol=0.003)
    assert np.allclose(-fit.estimate.a * fit.estimate.b, d, atol=0.003)
    assert fit.info["loglik"] == pytest.approx(-2658.805, abs=0.01)


@pytest.mark.slow
def test_irtorch_swesat_is_scored_against_its_key():
    from methodkit.core import datasets

    if "irt-swesat-quant" not in datasets.names():
        pytest.skip("irtorch not installed (pip install --no-deps irtorch)")
    frame = datasets.load("irt-swesat-quant")
    assert frame.shape == (5000, 80)
    values = frame.to_numpy(dtype=float, na_value=np.nan)
    assert set(np.unique(values[~np.isnan(values)])) == {0.0, 1.0}
    p = np.nanmean(values, axis=0)
    assert 0.3 < p.mean() < 0.8  # a scored test, not option indices


class _CountingNumpy:
    """numpy as the E-step's array module, counting the calls that go through it (the CuPy code path)."""

    def __init__(self):
        self.calls = 0

    def __getattr__(self, name):
        self.calls += 1
        return getattr(np, name)


def test_estep_array_module_path_matches_scipy_logsumexp(small2pl):
    from scipy.special import logsumexp

    xp = _CountingNumpy()
    params = mml.start_values(small2pl.Y, "2pl")
    nodes = np.linspace(-6, 6, 61)
    logw = -0.5 * nodes**2
    logw -= logsumexp(logw)
    Yf = (small2pl.Y == 1).astype(float)
    Mf = (small2pl.Y != 255).astype(float)
    W, loglik = mml.e_step(Yf, Mf, params, nodes, logw, 2, np.float64, xp)
    assert xp.calls > 0
    P = mml.node_probs(params, nodes, 2)
    LL = Yf @ (np.log(P) - np.log1p(-P)) + Mf @ np.log1p(-P) + logw
    assert loglik == pytest.approx(logsumexp(LL, axis=1).sum(), rel=1e-12)
    assert np.allclose(W, np.exp(LL - logsumexp(LL, axis=1, keepdims=True)))


@pytest.mark.gpu
def test_cupy_estep_fit_equals_the_cpu_fit():
    pytest.importorskip("cupy")
    from methodkit.core.backend import cuda_available

    if not cuda_available():
        pytest.skip("no CUDA device")
    data = draw(DrawSpec(model="2pl", profile="mmlu", n_models=400, n_items=300), 2)
    cpu = mml.fit(data.Y, "2pl", mml.MMLSettings())
    gpu = mml.fit(data.Y, "2pl", mml.MMLSettings(device="cuda"))
    assert gpu.info["n_iter"] == cpu.info["n_iter"]
    assert np.allclose(gpu.a, cpu.a, atol=1e-6) and np.allclose(gpu.b, cpu.b, atol=1e-6)
