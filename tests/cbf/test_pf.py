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
