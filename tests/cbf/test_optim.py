"""Batched per-row L-BFGS: each row reaches its own minimum."""

from __future__ import annotations

import numpy as np

from methodkit.tools.cbf.optim import minimize_rows


def test_rows_of_rosenbrock_and_quadratics_converge():
    scale = np.array([1.0, 10.0, 100.0, 1.0])

    def fun(x, rows):
        a = scale[rows]
        f = a * (x[:, 0] - 1) ** 2 + 100 * (x[:, 1] - x[:, 0] ** 2) ** 2
        g = np.column_stack(
            [2 * a * (x[:, 0] - 1) - 400 * x[:, 0] * (x[:, 1] - x[:, 0] ** 2), 200 * (x[:, 1] - x[:, 0] ** 2)]
        )
        return f, g

    x0 = np.array([[-1.2, 1.0], [0.0, 0.0], [2.0, 2.0], [-1.5, 2.5]])
    x, f, g, n = minimize_rows(fun, x0, max_iter=500, gtol=1e-8)
    assert np.allclose(x, 1.0, atol=1e-5)
    assert n > 0


def test_non_finite_rows_do_not_disturb_others():
    def fun(x, rows):
        f = ((x - 3.0) ** 2).sum(1)
        f[rows == 1] = np.nan
        return f, 2 * (x - 3.0)

    x, f, _, _ = minimize_rows(fun, np.zeros((3, 2)), max_iter=50, gtol=1e-10)
    assert np.allclose(x[[0, 2]], 3.0)
    assert np.isnan(f[1])


def test_box_bounds_are_kept_and_the_projected_gradient_vanishes():
    from methodkit.tools.cbf.optim import projected_gradient

    target = np.array([[2.0, -3.0], [0.5, 0.5], [-4.0, 4.0]])

    def fun(x, rows):
        d = x - target[rows]
        return (d * d * [1.0, 30.0]).sum(1), 2 * d * [1.0, 30.0]

    lower, upper = np.array([-1.0, -1.0]), np.array([1.0, np.inf])
    x, f, g, _ = minimize_rows(fun, np.zeros((3, 2)), max_iter=100, gtol=1e-9, lower=lower, upper=upper)
    assert np.allclose(x, [[1.0, -1.0], [0.5, 0.5], [-1.0, 4.0]], atol=1e-8)
    assert np.all(x >= lower) and np.all(x <= upper)
    assert np.abs(projected_gradient(x, g, lower, upper)).max() < 1e-8
    assert np.abs(g[0]).max() > 1.0  # at the bounds the raw gradient does not vanish
