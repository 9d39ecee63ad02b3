"""Beta quantile grids: known answers, the implicit-differentiation gradient, and torch gradcheck."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from methodkit.tools.cbf import grid


def test_uniform_beta_gives_equal_mass_levels():
    u = grid.beta_quantiles(np.array(1.0), np.array(1.0), 5)
    assert np.allclose(u, [0.1, 0.3, 0.5, 0.7, 0.9])


@pytest.mark.parametrize("a,b", [(2.0, 5.0), (0.3, 0.7), (40.0, 12.0)])
def test_quantiles_match_scipy_stats(a, b):
    u = grid.beta_quantiles(np.array(a), np.array(b), 7)
    assert np.allclose(u, stats.beta.ppf((np.arange(7) + 0.5) / 7, a, b), rtol=1e-10)


def test_nodes_span_the_range_log_linearly():
    nodes = grid.nodes(0.5, 2.0, 1.0, 100.0, 3)  # Beta(1, 1): u = 1/6, 1/2, 5/6
    assert np.allclose(np.log(nodes), np.log(100.0) * np.array([1 / 6, 0.5, 5 / 6]))


def test_large_concentration_collapses_the_grid():
    nodes = grid.nodes(0.3, 1e6, 0.5, 200.0, 15)
    assert np.ptp(np.log(nodes)) < 0.02  # sd of u is ~5e-4 at kappa = 1e6
    assert np.isclose(nodes[7], np.exp(np.log(0.5) + np.log(400.0) * 0.3), rtol=1e-3)


def test_implicit_gradient_matches_finite_differences_of_betaincinv():
    a, b = np.array([[2.5]]), np.array([[0.8]])
    u = grid.beta_quantiles(a[:, 0], b[:, 0], 9)
    du_da, du_db = grid.beta_quantile_grad(a, b, u)
    h = 1e-6
    fd_a = (grid.beta_quantiles(a[:, 0] + h, b[:, 0], 9) - grid.beta_quantiles(a[:, 0] - h, b[:, 0], 9)) / (2 * h)
    fd_b = (grid.beta_quantiles(a[:, 0], b[:, 0] + h, 9) - grid.beta_quantiles(a[:, 0], b[:, 0] - h, 9)) / (2 * h)
    assert np.allclose(du_da, fd_a, rtol=1e-5, atol=1e-9)
    assert np.allclose(du_db, fd_b, rtol=1e-5, atol=1e-9)


def test_torch_function_passes_gradcheck():
    import torch

    a = torch.tensor([0.7, 3.0, 25.0], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([1.3, 0.4, 30.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda x, y: grid.beta_quantile_torch(x, y, 6), (a, b), eps=1e-6, atol=1e-6, rtol=1e-4
    )
