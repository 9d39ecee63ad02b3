"""Numba kernels against their vectorised NumPy twins, and the batched PLS1 against scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cross_decomposition import PLSRegression

from methodkit.tools.pls import batch, kernels, kernels_xp

RNG = np.random.default_rng(20260)


def test_orthonormalize_step_matches_reference():
    K, p, B = 4, 17, 9
    W = np.zeros((K, p, B))
    W2 = np.zeros((K, p, B))
    for k in range(K):
        V = RNG.normal(size=(p, B))
        if k == 2:
            V[:, 3] = W[0, :, 3] * 2.0 - W[1, :, 3]  # inside the span: exhausted
        ex1 = kernels.orthonormalize_step(V.copy(), W, k, 1e-9)
        ex2 = kernels_xp.orthonormalize_step(V.copy(), W2, k, 1e-9)
        np.testing.assert_array_equal(ex1, ex2)
        np.testing.assert_allclose(W[k], W2[k], atol=1e-12)
    assert ex1.sum() == 0 or True
    G = np.einsum("kib,lib->bkl", W, W)
    for b in range(B):
        d = np.diag(G[b])
        assert set(np.round(d, 12)) <= {0.0, 1.0}
        np.testing.assert_allclose(G[b] - np.diag(d), 0, atol=1e-12)
    assert np.all(W[2, :, 3] == 0)


@pytest.mark.parametrize("Bt", [1, 6])
def test_refit_and_combine_match_reference(Bt):
    K, n, B = 3, 25, 6
    T = RNG.normal(size=(K, n, Bt))
    T[2, :, 0] = 0.0  # an exhausted score column: zero coefficient, no failure
    Y = RNG.normal(size=(n, B))
    b1 = kernels.refit_coefficients(T, Y, 1e-12)
    b2 = kernels_xp.refit_coefficients(T, Y, 1e-12)
    np.testing.assert_allclose(b1, b2, atol=1e-10)
    t0 = T[:2, :, 0].T
    np.testing.assert_allclose(b1[0, :2], np.linalg.lstsq(t0, Y[:, 0], rcond=None)[0], atol=1e-10)
    assert b1[0, 2] == 0.0
    np.testing.assert_allclose(kernels.combine_scores(T, b1), kernels_xp.combine_scores(T, b2), atol=1e-10)


def test_pearson_standardize_sumsq_match_reference():
    n, B = 30, 7
    A = RNG.normal(size=(n, B))
    Y = RNG.normal(size=(n, B))
    A[:, 2] = 1.5  # flat prediction -> degenerate, r = 0
    r1, z1, bad1 = kernels.pearson_atanh(A, Y, 0.9999, 1e-15)
    r2, z2, bad2 = kernels_xp.pearson_atanh(A, Y, 0.9999, 1e-15)
    np.testing.assert_allclose(r1, r2, atol=1e-12)
    np.testing.assert_allclose(z1, z2, atol=1e-12)
    np.testing.assert_array_equal(bad1, bad2)
    assert bad1[2] and r1[2] == 0.0
    np.testing.assert_allclose(r1[0], np.corrcoef(A[:, 0], Y[:, 0])[0, 1], atol=1e-12)
    out1 = kernels.standardize_columns(A, Y, 1e-12)
    out2 = kernels_xp.standardize_columns(A, Y, 1e-12)
    for a, b in zip(out1, out2):
        np.testing.assert_allclose(a, b, atol=1e-12)
    for a, b in zip(kernels.sum_squares_columns(A, Y), kernels_xp.sum_squares_columns(A, Y)):
        np.testing.assert_allclose(a, b, atol=1e-10)


@pytest.mark.parametrize("n,p", [(60, 25), (40, 90)])  # kernel (n > 2p) and wide routes
def test_pls1_weights_and_predictions_equal_sklearn(n, p):
    X = RNG.normal(size=(n, p)) @ RNG.normal(size=(p, p)) * 0.3
    y = X[:, :4].sum(axis=1) + RNG.normal(size=n)
    K = 3
    tr, te = np.arange(n // 2), np.arange(n // 2, n)
    split = batch.standardize_split(X, tr, te)
    ys = (y[tr] - y[tr].mean()) / y[tr].std(ddof=1)
    W, ranks = batch.pls1_weights(split.Xtr, ys[:, None].copy(), K, batch.operations())
    model = PLSRegression(K, scale=True).fit(X[tr], y[tr])
    # same weight vectors up to sign (Lanczos on X'X == NIPALS weights)
    for k in range(K):
        np.testing.assert_allclose(np.abs(W[k, :, 0] @ model.x_weights_[:, k]), 1.0, atol=1e-8)
    assert ranks[0] == K
    for ops in (batch.operations(), batch.reference_operations()):
        out = batch.split_corr_batch(split, y[tr, None], y[te, None], K, batch.pls1_weights, ops, want_r2=True)
        yhat = model.predict(X[te]).ravel()
        np.testing.assert_allclose(out.r[0], np.corrcoef(yhat, y[te])[0, 1], atol=1e-9)
        r2 = 1 - ((yhat - y[te]) ** 2).sum() / ((y[te] - y[tr].mean()) ** 2).sum()
        np.testing.assert_allclose(out.r2[0], r2, atol=1e-9)


def test_k1_gemm_route_equals_refit_route_for_many_columns():
    n, p, B = 50, 12, 40
    X = RNG.normal(size=(n, p))
    Y = RNG.normal(size=(n, B)) + X[:, :1]
    tr, te = np.arange(25), np.arange(25, 50)
    split = batch.standardize_split(X, tr, te)
    ops = batch.operations()
    a = batch.k1_corr_batch(split, Y[tr], Y[te], ops)
    b = batch.split_corr_batch(split, Y[tr], Y[te], 1, batch.pls1_weights, ops)
    np.testing.assert_allclose(a.z, b.z, atol=1e-10)


def test_batched_columns_equal_one_at_a_time():
    n, p, B, K = 44, 15, 8, 2
    X = RNG.normal(size=(n, p))
    Y = RNG.normal(size=(n, B))
    tr, te = np.arange(22), np.arange(22, 44)
    split = batch.standardize_split(X, tr, te)
    ops = batch.operations()
    together = batch.split_corr_batch(split, Y[tr], Y[te], K, batch.pls1_weights, ops)
    for b in range(B):
        alone = batch.split_corr_batch(split, Y[tr, b : b + 1], Y[te, b : b + 1], K, batch.pls1_weights, ops)
        np.testing.assert_allclose(together.z[b], alone.z[0], atol=1e-12)


def test_rank_exhaustion_is_counted():
    n, p = 40, 3
    X = RNG.normal(size=(n, p))
    y = RNG.normal(size=n)
    split = batch.standardize_split(X, np.arange(20), np.arange(20, 40))
    out = batch.split_corr_batch(split, y[:20, None], y[20:, None], 5, batch.pls1_weights, batch.operations())
    assert out.truncated[0]


def test_small_symmetric_eigen_and_pseudo_inverse_match_lapack():
    for K in (1, 2, 3, 5, 8):
        A = RNG.normal(size=(K + 4, K))
        G = A.T @ A
        vals, vecs = kernels._sym_eig(G)
        order = np.argsort(vals)
        np.testing.assert_allclose(vals[order], np.linalg.eigvalsh(G), rtol=1e-12, atol=1e-12 * vals.max())
        np.testing.assert_allclose(vecs.T @ vecs, np.eye(K), atol=1e-13)
        np.testing.assert_allclose(vecs @ np.diag(vals) @ vecs.T, G, atol=1e-12 * np.abs(G).max())
        g = RNG.normal(size=K)
        np.testing.assert_allclose(kernels._pinv_solve(G, g, 1e-12), np.linalg.solve(G, g), rtol=1e-9)
    G = np.diag([4.0, 0.0, 1.0])  # an exhausted component: its coefficient is 0
    np.testing.assert_allclose(kernels._pinv_solve(G, np.ones(3), 1e-12), [0.25, 0.0, 1.0])
    assert not kernels._pinv_solve(np.zeros((3, 3)), np.ones(3), 1e-12).any()


def _fused_case(K, weighted):
    n, p = 50, 12
    rng = np.random.default_rng(K)
    X = rng.normal(size=(n, p)) @ np.linalg.cholesky(0.5 ** np.abs(np.subtract.outer(range(p), range(p)))).T
    X[:, 3] = 2.5  # zero-variance column: dropped on every train half
    X[: n - 5, 7] = 1.0  # constant on most train halves, not all
    y = X[:, 0] - X[:, 5] + rng.normal(size=n)
    if K == 4:
        X = rng.normal(size=(n, 2)) @ rng.normal(size=(2, p))  # rank 2: every split truncates at K = 4
        y = np.where(np.arange(n) < 2, 1.0, 0.0)  # splits with both 1s on one side are flat there (degenerate)
    w = None
    if weighted:
        w = rng.uniform(0.2, 3.0, n)
        w[[4, 9]] = 0.0  # rows left out
    return X, y, w, rng


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("K", [1, 2, 3, 4])
def test_fused_observed_pass_equals_split_by_split(K, weighted):
    """The all-splits pass (Numba, and its NumPy/CuPy twin) = the per-split loop, weighted or not."""
    from methodkit.tools.pls import fused, methods

    X, y, w, rng = _fused_case(K, weighted)
    n = len(y)
    splits = methods.draw_splits(n, K, 40, rng)
    loop = methods.split_pass(
        X, y[:, None].copy(), splits, K, methods.Directions(), batch.operations(), observed=True, w=w
    )
    for ops in (batch.operations(), batch.reference_operations()):
        one = fused.observed_pass(X, y, splits, K, ops, w)
        np.testing.assert_allclose(one.z, loop.z, rtol=0, atol=1e-10)
        np.testing.assert_allclose(one.r, loop.r, rtol=0, atol=1e-10)
        np.testing.assert_allclose(one.r2, loop.r2, rtol=0, atol=1e-10)
        np.testing.assert_array_equal(one.degenerate, loop.degenerate)
        np.testing.assert_array_equal(one.truncated, loop.truncated)
        np.testing.assert_array_equal(one.dropped, loop.dropped)
        for a, b in zip(one.W, loop.W):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
    if K == 4:
        assert loop.truncated.all() and 0 < loop.degenerate.sum() < 40
    else:
        assert loop.dropped.min() >= 1 and not loop.degenerate.any()


def test_fused_weighted_moments_see_near_constant_columns():
    """A column constant on a train half is dropped even where the one-pass variance cancels (two-pass redo)."""
    from methodkit.tools.pls import fused, methods

    rng = np.random.default_rng(5)
    n, p = 40, 6
    X = rng.normal(size=(n, p))
    X[:, 2] = np.where(np.arange(n) < 3, 5.0, 0.0)  # 0 on a train half that misses rows 0-2: sd exactly 0
    y = X[:, 0] + rng.normal(size=n)
    w = rng.uniform(0.5, 2.0, n)
    splits = methods.draw_splits(n, 2, 40, rng)
    one = fused.observed_pass(X, y, splits, 2, batch.operations(), w)
    loop = methods.split_pass(
        X, y[:, None].copy(), splits, 2, methods.Directions(), batch.operations(), observed=True, w=w
    )
    np.testing.assert_array_equal(one.dropped, loop.dropped)
    assert 0 < one.dropped.sum() < 40
    np.testing.assert_allclose(one.z, loop.z, rtol=0, atol=1e-10)


def test_device_path_with_numpy_twins_equals_numba_path(monkeypatch):
    """api.run on device 'cuda' with the CuPy twins run by NumPy: every method, weighted too."""
    from methodkit.tools.pls import api
    from methodkit.tools.pls.data import from_arrays, with_weights
    from methodkit.tools.pls.simulate import simulate

    X, y = simulate("toeplitz0.5", 50, 10, snr=0.5, rng=np.random.default_rng(12))
    real = batch.operations
    monkeypatch.setattr(
        batch, "operations", lambda device="cpu": batch.reference_operations() if device == "cuda" else real()
    )
    for w in (None, np.random.default_rng(1).uniform(0.5, 2, 50)):
        d = from_arrays(X, y, "s") if w is None else with_weights(from_arrays(X, y, "s"), w, "w")
        for K in (1, 3):
            opts = dict(method="all", force_nb=True, splits=6, perms=19, segments=5, rotate="varimax", seed=1)
            cpu = api.run(d, [K], api.Options(**opts))
            dev = api.run(d, [K], api.Options(**opts, device="cuda"))
            for a, b in zip(cpu, dev):
                assert (a.method, a.pvalue) == (b.method, pytest.approx(b.pvalue, abs=1e-12))
                assert a.statistic == pytest.approx(b.statistic, abs=1e-10)
