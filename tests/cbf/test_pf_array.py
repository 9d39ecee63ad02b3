"""The whole-array particle filter (the CuPy path, run here with NumPy as the array module)."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.cbf import betatable, kernels, models
from methodkit.tools.cbf.pf_array import pf_filter_array

from .test_filter import kalman


def test_array_pf_beta_with_both_lesions_is_the_kalman_filter(cbf_agents):
    c = cbf_agents.cohort.subset([0, 1])
    params = models.kernel_params("pf-beta", np.array([[0.0, 0.0, 5.0, 20.0], [0.0, 0.0, 30.0, 60.0]]))
    outs, collapses = pf_filter_array(np, "pf-beta", c.outcome, c.valid, params, 30, 1, 2, 60.0, 10.0, True)
    for s, (v, sv) in enumerate(((5.0, 20.0), (30.0, 60.0))):
        for b in range(c.outcome.shape[1]):
            preds, _ = kalman(c.outcome[s, b], v, sv)
            for r in range(2):
                assert np.allclose(outs[0][s, r, b], preds, atol=1e-9)
                assert np.allclose(outs[1][s, r, b], v) and np.allclose(outs[3][s, r, b], 0.0)
    assert not collapses.any()


def test_array_pf_hpl_without_jumps_is_the_kalman_filter(cbf_agents):
    c = cbf_agents.cohort.subset([0])
    params = models.kernel_params("pf-hpl", np.array([[0.0, 0.0, 0.5]]))
    outs, _ = pf_filter_array(np, "pf-hpl", c.outcome, c.valid, params, 20, 3, 1, 60.0, 10.0, False)
    preds, _ = kalman(c.outcome[0, 0], models.HPL_INIT, models.HPL_INIT)
    assert np.allclose(outs[0][0, 0, 0], preds, atol=1e-9)
    assert np.isnan(outs[1]).all()  # signals off


@pytest.mark.parametrize("model,values", [("pf-beta", [0.3, 0.2, 10.0, 30.0]), ("pf-hpl", [0.3, 0.2, 0.6])])
def test_array_filter_agrees_with_the_numba_kernel_in_distribution(cbf_agents, model, values):
    """Per-run squared prediction error and mean ambiguity: Welch t between 60 array runs and 60 kernel runs."""
    from scipy import stats

    c = cbf_agents.cohort.subset([0])
    R, P = 60, 300
    params = models.kernel_params(model, np.array([values]))
    arr, _ = pf_filter_array(np, model, c.outcome, c.valid, params, P, 5, R, 60.0, 10.0, True)
    outs = [np.empty((1, R, *c.outcome.shape[1:])) for _ in range(4)]
    if model == "pf-beta":
        tables, use = betatable.tables_for(params[:, :2])
        kind = kernels.PF_BETA
    else:
        tables, use, kind = np.zeros((1, 2, 1, 8)), np.zeros((1, 2), dtype=np.int64), kernels.PF_HPL
    seeds = np.arange(R, dtype=np.int64)[None, :] + 99
    col = np.zeros((1, R), dtype=np.int64)
    kernels.pf_filter(kind, c.outcome, c.valid, params, P, seeds, 60.0, 10.0, *outs, col, True, tables, use)
    for k, stat in ((0, "sse"), (3, "ambiguity")):
        if stat == "sse":
            a = ((arr[0][0] - c.outcome[0][None]) ** 2).sum(axis=(1, 2))
            b = ((outs[0][0] - c.outcome[0][None]) ** 2).sum(axis=(1, 2))
        else:
            a, b = arr[k][0].mean(axis=(1, 2)), outs[k][0].mean(axis=(1, 2))
        assert abs(stats.ttest_ind(a, b, equal_var=False).statistic) < 4.0, (model, stat)


def test_array_filter_small_shape_and_lesion_rows_and_seeds(cbf_agents):
    """A shape below the table (lambda = .9: gamma ratio), a lesioned dimension and a tabulated one in one
    call; same seed -> same output, another seed -> another."""
    c = cbf_agents.cohort.subset([0, 1])
    params = models.kernel_params("pf-beta", np.array([[0.9, 0.0, 10.0, 30.0], [0.2, 0.2, 10.0, 30.0]]))
    a, _ = pf_filter_array(np, "pf-beta", c.outcome, c.valid, params, 50, 7, 2, 60.0, 10.0, True)
    b, _ = pf_filter_array(np, "pf-beta", c.outcome, c.valid, params, 50, 7, 2, 60.0, 10.0, True)
    d, _ = pf_filter_array(np, "pf-beta", c.outcome, c.valid, params, 50, 8, 2, 60.0, 10.0, True)
    assert np.array_equal(a[0], b[0]) and not np.array_equal(a[0], d[0])
    assert np.isfinite(a[0]).all()
    assert np.allclose(a[2][0], 30.0)  # lambda_s = 0: the stochasticity never moves


@pytest.mark.gpu
def test_cuda_particle_filter_agrees_with_the_cpu_kernel(cbf_agents):
    from scipy import stats

    from methodkit.core.backend import cuda_available

    if not cuda_available():
        pytest.skip("no CuPy or no CUDA device")

    from methodkit.tools.cbf.particles import run_particles

    c = cbf_agents.cohort.subset([0])
    seeds = np.arange(60, dtype=np.int64)[None, :] + 3
    vals = np.array([[0.3, 0.2, 10.0, 30.0]])
    gpu, _ = run_particles("pf-beta", c.outcome, c.valid, vals, 300, seeds, 60.0, 10.0, True, "cuda")
    cpu, _ = run_particles("pf-beta", c.outcome, c.valid, vals, 300, seeds, 60.0, 10.0, True, "cpu")
    a = ((gpu[0][0] - c.outcome[0][None]) ** 2).sum(axis=(1, 2))
    b = ((cpu[0][0] - c.outcome[0][None]) ** 2).sum(axis=(1, 2))
    assert abs(stats.ttest_ind(a, b, equal_var=False).statistic) < 4.0
