"""The projection P_i: ellipsoid (Newton/bisection), Dykstra onto ellipsoid ∩ box, the integer lattice."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.gbdt import kernels
from methodkit.tools.gbdt.feasible import Standardizer, build_region

from .helpers import random_spd


def _scipy_projection(y, x0, cov, eps, lo=None, hi=None):
    from scipy.optimize import minimize

    inv = np.linalg.inv(cov)
    cons = [{"type": "ineq", "fun": lambda x: eps**2 - (x - x0) @ inv @ (x - x0)}]
    bounds = None if lo is None else list(zip(lo, hi))
    res = minimize(lambda x: np.sum((x - y) ** 2), x0, constraints=cons, bounds=bounds, method="SLSQP", tol=1e-12)
    return res.x


@pytest.mark.parametrize("k", [1, 2, 4])
def test_ellipsoid_projection_matches_scipy(k):
    rng = np.random.default_rng(k)
    for _ in range(5):
        cov = random_spd(rng, k)
        s, U = np.linalg.eigh(cov)
        x0, y = rng.standard_normal(k), 3 * rng.standard_normal(k)
        got = kernels._project_ellipsoid(y, x0, U, s, 0.7)
        want = _scipy_projection(y, x0, cov, 0.7)
        np.testing.assert_allclose(got, want, atol=2e-5)
        d = got - x0
        assert d @ np.linalg.inv(cov) @ d <= 0.49 * (1 + 1e-9)


def test_point_inside_is_returned_unchanged():
    U, s = np.eye(2), np.array([1.0, 4.0])
    y = np.array([0.1, 0.2])
    assert np.array_equal(kernels._project_ellipsoid(y, np.zeros(2), U, s, 1.0), y)


def test_dykstra_matches_scipy_on_ellipsoid_and_box():
    rng = np.random.default_rng(7)
    k = 3
    for _ in range(5):
        cov = random_spd(rng, k)
        s, U = np.linalg.eigh(cov)
        x0 = rng.uniform(-0.5, 0.5, k)
        lo, hi = x0 - rng.uniform(0.05, 0.3, k), x0 + rng.uniform(0.05, 0.3, k)
        y = x0 + 2 * rng.standard_normal(k)
        none = np.zeros(k, dtype=bool)
        got = kernels.project_one(y, x0, U, s, 1.0, lo, hi, none, np.zeros(k), np.ones(k), none, 200, 1e-12)
        want = _scipy_projection(y, x0, cov, 1.0, lo, hi)
        np.testing.assert_allclose(got, want, atol=1e-4)
        assert np.all(got >= lo - 1e-12) and np.all(got <= hi + 1e-12)


def test_batch_kernel_is_feasible_idempotent_and_matches_py_func():
    rng = np.random.default_rng(11)
    B, k = 40, 3
    covs = np.array([random_spd(rng, k) for _ in range(B)])
    s, U = np.linalg.eigh(covs)
    X0 = rng.standard_normal((B, k))
    mean, sd = np.full((B, k), 3.0), np.full((B, k), 0.5)
    X0[:, 0] = (np.round(X0[:, 0] * 0.5 + 3.0) - 3.0) / 0.5  # integral in original units
    Y = X0 + 3 * rng.standard_normal((B, k))
    lo, hi = X0 - 1.0, X0 + 0.5
    int_mask = np.zeros((B, k), dtype=bool)
    int_mask[:, 0] = True
    logmask = np.zeros((B, k), dtype=bool)
    eps = np.full(B, 1.5)
    args = (X0, U, s, eps, lo, hi, int_mask, mean, sd, logmask, 50, 1e-9)
    P = kernels.project_rows(Y, *args)
    want = np.array(
        [
            kernels.project_one.py_func(
                Y[i], X0[i], U[i], s[i], 1.5, lo[i], hi[i], int_mask[i], mean[i], sd[i], logmask[i], 50, 1e-9
            )
            for i in range(B)
        ]
    )
    np.testing.assert_allclose(P, want, atol=1e-9)
    radius = kernels.mahalanobis_rows(P - X0, U, s)
    assert np.all(radius <= 1.5 * (1 + 1e-6))
    assert np.all((P >= lo - 1e-9) & (P <= hi + 1e-9))
    orig = P[:, 0] * 0.5 + 3.0
    np.testing.assert_allclose(orig, np.round(orig), atol=1e-9)
    np.testing.assert_allclose(kernels.project_rows(P, *args), P, atol=1e-7)


def test_region_from_data_pins_constant_columns_and_honours_log1p():
    rng = np.random.default_rng(0)
    n = 200
    y = (rng.random(n) < 0.4).astype(float)
    gain = np.where(rng.random(n) < 0.8, 0.0, np.round(rng.lognormal(7, 1.5, n)))
    flat = np.where(y == 1, 5.0, rng.normal(5, 1, n))  # constant within class 1
    X = np.column_stack([rng.normal(size=n), gain, flat])
    std = Standardizer.fit(X, [0, 1, 2], "log1p")
    assert std.logmask.tolist() == [False, True, False]
    rows = np.flatnonzero(y == 1)[:10]
    region = build_region(X, y, std, rows, np.tile([0, 1, 2], (10, 1)), 1.0, "class", {1}, ["a", "gain", "flat"])
    assert any("flat" in w for w in region.dropped)
    P = region.project(region.x0 + 5 * rng.standard_normal(region.x0.shape))
    assert region.inside(P).all()
    np.testing.assert_array_equal(P[:, 2], region.x0[:, 2])
    orig = region.to_orig(P)[:, 1]
    np.testing.assert_allclose(orig, np.round(orig), atol=1e-6)
    assert np.all(orig >= -1e-9)


def test_dykstra_does_not_stall_before_the_projection():
    # the iterate can stop moving while the two projections still disagree (row 92 of this draw did)
    rng = np.random.default_rng(0)
    B, k = 10_000, 5  # the draw of bench/gbdt/bench.py
    A = rng.standard_normal((B, k, k))
    cov = A @ np.transpose(A, (0, 2, 1)) + 0.1 * np.eye(k)
    s, U = np.linalg.eigh(cov)
    X0 = rng.standard_normal((B, k))
    Y = X0 + 2 * rng.standard_normal((B, k))
    none = np.zeros(k, dtype=bool)
    i = 92
    lo, hi = X0[i] - 0.8, X0[i] + 0.8
    got = kernels.project_one(Y[i], X0[i], U[i], s[i], 1.0, lo, hi, none, np.zeros(k), np.ones(k), none, 2000, 1e-9)
    want = _scipy_projection(Y[i], X0[i], cov[i], 1.0, lo, hi)
    assert np.linalg.norm(got - Y[i]) <= np.linalg.norm(want - Y[i]) + 1e-6
