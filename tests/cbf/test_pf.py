"""Particle-filter kernels: lesion limits equal the Kalman filter, seeds fix the output, resampling is systematic."""

from __future__ import annotations

import numpy as np

from methodkit.tools.cbf import kernels, models, signals
from methodkit.tools.cbf.forward import FilterOptions

from .test_filter import kalman


def test_pf_beta_with_both_lesions_is_the_kalman_filter(cbf_agents):
    c = cbf_agents.cohort.subset([0, 1])
    values = {
        "lambda_v": np.zeros(2),
        "lambda_s": np.zeros(2),
        "v0": np.array([5.0, 30.0]),
        "s0": np.array([20.0, 60.0]),
    }
    sig = signals.model_signals(c, "pf-beta", values, grid=None, fopts=FilterOptions(), particles=50, runs=2)
    for s, (v, sto) in enumerate([(5.0, 20.0), (30.0, 60.0)]):
        preds, _ = kalman(c.outcome[s, 1], v, sto)
        assert np.allclose(sig.arrays["pred_mean"][s, 1], preds, atol=1e-9)
    assert np.allclose(sig.arrays["ambiguity"], 0.0, atol=1e-9)


def test_pf_hpl_without_jumps_is_the_kalman_filter_at_the_initial_variances(cbf_agents):
    c = cbf_agents.cohort.subset([2])
    values = {"mu_v": np.zeros(1), "mu_s": np.zeros(1), "sigma": np.full(1, 0.5)}
    sig = signals.model_signals(c, "pf-hpl", values, grid=None, fopts=FilterOptions(), particles=20, runs=1)
    preds, _ = kalman(c.outcome[0, 0], models.HPL_INIT, models.HPL_INIT)
    assert np.allclose(sig.arrays["pred_mean"][0, 0], preds, atol=1e-9)


def test_same_seeds_same_output_and_different_seeds_differ(cbf_agents):
    c = cbf_agents.cohort
    params = models.kernel_params("pf-beta", np.tile([0.3, 0.2, 10.0, 30.0], (4, 1)))

    def once(seeds):
        outs = [np.empty((4, 2, *c.outcome.shape[1:])) for _ in range(4)]
        col = np.zeros((4, 2), dtype=np.int64)
        kernels.pf_filter(kernels.PF_BETA, c.outcome, c.valid, params, 200, seeds, 60.0, 10.0, *outs, col)
        return outs[0]

    seeds = np.arange(8, dtype=np.int64).reshape(4, 2) + 100
    a, b = once(seeds), once(seeds)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, once(seeds + 1))
    assert np.isfinite(a).all()


def test_systematic_resampling_matches_a_numpy_reference():
    rng = np.random.default_rng(0)
    for _ in range(20):
        w = rng.random(37)
        w /= w.sum()
        u0 = rng.random()
        index = np.empty(37, dtype=np.int64)
        kernels._systematic_resample(w, u0, index)
        points = (u0 + np.arange(37)) / 37
        ref = np.minimum(np.searchsorted(np.cumsum(w), points), 36)
        assert np.array_equal(index, ref)


def test_own_generator_draws_follow_their_distributions():
    """KS tests of the PF's xoshiro256+ / ziggurat / Marsaglia-Tsang / Beta(a, 1/2) samplers (fixed seeds)."""
    from scipy import stats

    cases = [
        (0, 0.0, stats.uniform()),
        (1, 0.0, stats.norm()),
        (2, 2.0, stats.gamma(2.0)),
        (2, 0.3, stats.gamma(0.3)),
        (3, 2.0, stats.beta(2.0, 0.5)),  # lambda = 0.2
        (3, 0.2, stats.beta(0.2, 0.5)),  # lambda = 5/7: shape < 1 takes the boosted branch
        (3, 19.5, stats.beta(19.5, 0.5)),  # lambda = 0.025
    ]
    for kind, shape, dist in cases:
        x = kernels.sample(kind, shape, 11, 40_000)
        assert stats.kstest(x, dist.cdf).pvalue > 1e-3, (kind, shape)
        assert abs(x.mean() - dist.mean()) < 5 * dist.std() / 200.0, (kind, shape)


def test_normal_tail_beyond_the_ziggurat_base_has_the_right_mass():
    x = kernels.sample(1, 0.0, 5, 1_000_000)
    tail = (np.abs(x) > 3.0).mean()
    assert abs(tail - 0.0026998) < 4 * np.sqrt(0.0027 / 1e6)
    assert np.abs(x).max() > 4.0  # draws do come from the tail branch


def test_generator_streams_depend_on_the_seed_only():
    a, b, c = (kernels.sample(0, 0.0, s, 1000) for s in (1, 1, 2))
    assert np.array_equal(a, b)
    assert not np.allclose(a, c)
    assert abs(np.corrcoef(a, c)[0, 1]) < 0.1


def test_pf_beta_transition_matches_the_published_diffusion():
    """One step of the precision diffusion: E[z_t / z_{t-1}] = E[eps] / eta = 1 (Piray & Daw 2021)."""
    lam = 0.2
    eta, nu = 1 - lam, 0.5 / lam
    eps = kernels.sample(3, eta * nu, 3, 100_000)
    ratio = eps / eta
    assert abs(ratio.mean() - 1.0) < 0.005
    assert abs(eps.var() - (eta * (1 - eta)) / (nu + 1)) < 0.002
