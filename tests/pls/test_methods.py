"""Known answers and reference libraries for the four tests, the gate and the rotation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.cross_decomposition import PLSRegression
from statsmodels.stats.multitest import multipletests

from methodkit.core.errors import DataError, RunFailure, UsageError
from methodkit.tools.pls import api, batch, gate, methods
from methodkit.tools.pls.data import from_arrays, from_frame
from methodkit.tools.pls.rotation import varimax
from methodkit.tools.pls.simulate import simulate

RNG = np.random.default_rng(7)


def _design(n=60, p=20, snr=0.5, geometry="toeplitz0.5", seed=1):
    X, y = simulate(geometry, n, p, snr=snr, rng=np.random.default_rng(seed))
    return from_arrays(X, y, "sim")


def test_nb_asymptotic_by_hand():
    z = np.array([0.30, 0.10, 0.25, 0.05, 0.40, 0.20])
    out = methods.nb_asymptotic(z, n_train=50, n_test=50)
    s = z.std(ddof=1)
    se = s * np.sqrt(1 / 6 + 1.0)
    assert out.t == pytest.approx(z.mean() / se)
    assert out.pvalue == pytest.approx(stats.t.sf(z.mean() / se, 5))
    assert out.statistic == pytest.approx(np.tanh(z.mean()))
    assert out.rho_hat == pytest.approx(max(0.0, 1 - s**2 * 47))


def test_split_sizes_and_plan():
    assert methods.n_train_for(100, 2) == 50
    assert methods.n_train_for(9, 5) == 6  # max(4, K+2=7) clipped to n-3 = 6
    s = methods.draw_splits(41, 2, 5, np.random.default_rng(0))
    assert s.n_train == 20 and s.n_test == 21
    for tr, te in zip(s.train, s.test):
        assert sorted(np.concatenate([tr, te])) == list(range(41))


def test_permutation_pvalue_counts_failures_as_exceedances():
    out = methods.perm_pvalue(0.5, np.array([0.1, 0.6, 0.2, 0.3]), np.array([False, False, True, False]), "x")
    assert out.pvalue == pytest.approx((1 + 2) / 5)
    with pytest.raises(RunFailure, match="degenerate resampling"):
        methods.perm_pvalue(0.5, np.zeros(4), np.array([True, True, True, False]), "x")


def test_holm_matches_statsmodels():
    p = RNG.uniform(size=12) ** 3
    np.testing.assert_allclose(methods.holm(p), multipletests(p, method="holm")[1], atol=1e-12)


def test_coefficients_equal_sklearn_pls_scale_true():
    d = _design(n=50, p=15)
    coef, _ = methods.pls_coefficients(d.X, d.y, 3, batch.operations())
    ref = PLSRegression(3, scale=True).fit(d.X, d.y).coef_.ravel()
    np.testing.assert_allclose(coef, ref, atol=1e-8 * np.abs(ref).max())


def test_jackknife_equals_naive_sklearn_loop():
    d = _design(n=24, p=6)
    ops = batch.operations()
    segs = methods.jackknife_segments(24, None, np.random.default_rng(0))
    out = methods.jackknife(d.X, d.y, 2, ops, segs, "mean")
    reps = np.array(
        [PLSRegression(2, scale=True).fit(np.delete(d.X, i, 0), np.delete(d.y, i)).coef_.ravel() for i in range(24)]
    )
    full = PLSRegression(2, scale=True).fit(d.X, d.y).coef_.ravel()
    sd = np.sqrt(23 / 24 * ((reps - reps.mean(0)) ** 2).sum(0))
    np.testing.assert_allclose(out.sd, sd, rtol=1e-7)
    np.testing.assert_allclose(out.t, full / sd, rtol=1e-7)
    np.testing.assert_allclose(out.p, 2 * stats.t.sf(np.abs(full / sd), 23), rtol=1e-6)
    assert out.df == 23 and out.n_fits == 25
    full_centre = methods.jackknife(d.X, d.y, 2, ops, segs, "full")
    assert np.all(full_centre.sd >= out.sd - 1e-12)  # centring on b-hat adds the bias term


def test_cv_q2_equals_naive_sklearn_loop():
    d = _design(n=40, p=10)
    folds = methods.draw_folds(40, 4, np.random.default_rng(3))
    q = methods.cv_q2_pass(d.X, d.y[:, None].copy(), folds, 2, methods.Directions(), batch.operations())
    press = total = 0.0
    for te in folds:
        tr = np.setdiff1d(np.arange(40), te)
        m = PLSRegression(2, scale=True).fit(d.X[tr], d.y[tr])
        sd = d.y[tr].std(ddof=1)
        press += (((m.predict(d.X[te]).ravel() - d.y[te]) / sd) ** 2).sum()
        total += (((d.y[te] - d.y[tr].mean()) / sd) ** 2).sum()
    assert q.q2[0] == pytest.approx(1 - press / total, abs=1e-9)
    assert q.n_fits == 4


def test_nb_perm_reuses_splits_and_k1_route():
    d = _design(n=50, p=12, snr=0.0)
    for K in (1, 2):
        r = api.run(d, [K], api.Options(method="nb-perm", perms=60, seed=3, splits=10))[0]
        assert r.n_fits == 10 * 61
        assert np.isfinite(r.null).all() and r.null.shape == (60,)
        assert r.pvalue == pytest.approx((1 + (r.null >= r.statistic).sum()) / 61)
        # the same seed gives the same observed statistic as NB-asymptotic (same splits)
        nb = api.run(d, [K], api.Options(method="nb", seed=3, splits=10))[0]
        assert nb.statistic == pytest.approx(r.statistic, abs=1e-14)


def test_gate_clauses():
    X = RNG.normal(size=(30, 4))
    g = gate.check(X)
    assert g.fired and "p = 4" in g.reason
    g = gate.check(RNG.normal(size=(20, 10)))
    assert g.fired and "n = 20 < 25" in g.reason
    f = RNG.normal(size=(100, 1))
    g = gate.check(f + 0.05 * RNG.normal(size=(100, 30)))
    assert g.fired and "stable rank" in g.reason and g.stable_rank < 3
    g = gate.check(RNG.normal(size=(100, 30)))
    assert not g.fired and g.stable_rank > 3
    Xs = (X - X.mean(0)) / X.std(0)
    assert gate.stable_rank(X) == pytest.approx((Xs**2).sum() / np.linalg.norm(Xs, 2) ** 2)


def test_gate_reroutes_unless_forced():
    X, y = simulate("onefactor", 60, 20, snr=0.3, rng=np.random.default_rng(2))
    d = from_arrays(X, y, "sim")
    r = api.run(d, [2], api.Options(method="nb", perms=50, splits=8))[0]
    assert (r.method, r.method_requested, r.gate["fired"]) == ("nb-perm", "nb", True)
    r = api.run(d, [2], api.Options(method="nb", splits=8, force_nb=True))[0]
    assert r.method == "nb"


def test_varimax_matches_statsmodels_and_leaves_statistics_unchanged():
    from statsmodels.multivariate.factor_rotation import rotate_factors

    W = RNG.normal(size=(12, 3))
    L, M = varimax(W, kaiser=False)
    L2, M2 = rotate_factors(W, "varimax")
    np.testing.assert_allclose(L, L2, atol=1e-10)
    assert np.abs(M - np.eye(3)).max() > 1e-3  # a real rotation
    d = _design(n=60, p=20)
    for m in ("nb", "nb-perm", "cvq2-perm", "jackknife"):
        r = api.run(d, [3], api.Options(method=m, perms=40, splits=10, rotate="varimax", force_nb=True))[0]
        assert r.rotation_delta is not None and r.rotation_delta <= 1e-9, (m, r.rotation_delta)


def test_spca_and_fixed_directions():
    d = _design(n=80, p=30, snr=1.0)
    r = api.run(d, [2], api.Options(method="nb", directions=methods.Directions("spca", keep=6)))[0]
    assert r.pvalue < 0.05
    W = RNG.normal(size=(30, 2))
    a = api.run(d, [2], api.Options(method="nb", directions=methods.Directions("fixed", W=W)))[0]
    b = api.run(
        d, [2], api.Options(method="nb", directions=methods.Directions("fixed", W=W @ [[2.0, 1.0], [0.5, -1.0]]))
    )[0]
    assert a.statistic == pytest.approx(b.statistic, abs=1e-10)  # depends on span(W) only
    with pytest.raises(DataError, match="W has shape"):
        api.run(d, [3], api.Options(directions=methods.Directions("fixed", W=W)))


def test_design_checks():
    import pandas as pd

    frame = pd.DataFrame(
        {"a": [1.0, 2, 3, 4], "b": [1.0, 1, 1, 1], "c": [1.0, 2, 3, 4], "d": [2.0, 1, 5, 3], "y": [1.0, 0, 2, 1]}
    )
    frame.attrs.update(source="t.csv", format="csv")
    d = from_frame(frame, "y")
    assert d.names == ["a", "d"]
    assert any("zero-variance" in w and "b" in w for w in d.warnings)
    assert any("duplicate" in w and "c" in w for w in d.warnings)
    bad = frame.copy()
    bad.loc[2, "d"] = np.nan
    bad.attrs.update(frame.attrs)
    with pytest.raises(DataError, match="line 4: column 'd' is empty/NaN"):
        from_frame(bad, "y")
    assert from_frame(bad, "y", dropna=True).n == 3
    flat = frame.assign(y=1.0)
    flat.attrs.update(frame.attrs)
    with pytest.raises(DataError, match="constant"):
        from_frame(flat, "y")
    with pytest.raises(DataError, match="non-numeric"):
        from_frame(frame.assign(s=list("abcd")), "y")
    with pytest.raises(DataError, match="K \\+ 5"):
        api.check_k(d, 2, api.Options())
    with pytest.raises(UsageError):
        api.plan_methods("bogus", gate.check(RNG.normal(size=(30, 6))), False)


def test_weights_constant_equals_unweighted_on_every_path():
    from methodkit.tools.pls.data import with_weights

    d0 = _design(n=60, p=15)
    d1 = with_weights(_design(n=60, p=15), np.full(60, 2.5), "w")
    for method in ("nb", "nb-perm", "cvq2-perm", "jackknife"):
        opts = api.Options(method=method, force_nb=True, perms=30, splits=8, segments=8, rotate="varimax", seed=2)
        a, b = api.run(d0, [2], opts)[0], api.run(d1, [2], opts)[0]
        assert a.statistic == pytest.approx(b.statistic, abs=1e-12)
        assert a.pvalue == pytest.approx(b.pvalue, abs=1e-12)
        assert b.rotation_delta <= 1e-9


def test_integer_weights_equal_duplicated_rows_in_sklearn():
    X, y = simulate("toeplitz0.5", 50, 12, snr=0.5, rng=np.random.default_rng(8))
    w = np.random.default_rng(9).integers(0, 4, 50).astype(float)  # 0 = row left out
    coef, _ = methods.pls_coefficients(X, y, 3, batch.operations(), w=w)
    reps = w.astype(int)
    ref = PLSRegression(3, scale=True).fit(np.repeat(X, reps, axis=0), np.repeat(y, reps)).coef_.ravel()
    np.testing.assert_allclose(coef, ref, rtol=0, atol=1e-10 * np.abs(ref).max())


def test_weighted_pearson_and_kish():
    rng = np.random.default_rng(10)
    A, Y, w = rng.normal(size=(30, 3)), rng.normal(size=(30, 3)), rng.uniform(0.1, 3, 30)
    r, z, bad = batch.weighted_pearson_atanh(A, Y, w, 0.9999, 1e-15)
    for b in range(3):
        c = np.cov(A[:, b], Y[:, b], aweights=w)
        assert r[b] == pytest.approx(c[0, 1] / np.sqrt(c[0, 0] * c[1, 1]), abs=1e-12)
    assert not bad.any() and np.allclose(z, np.arctanh(r))
    assert batch.kish(np.ones(40)) == 40 and batch.kish(np.array([1.0, 0, 0, 1])) == 2
    g = gate.check(rng.normal(size=(40, 6)), np.where(np.arange(40) < 5, 20.0, 1.0))
    assert g.fired and "Kish n_eff" in g.reason and g.n_eff == pytest.approx(135**2 / 2035)


def test_select_k_equals_naive_sklearn_cv_and_marks_rows_exploratory():
    from methodkit.tools.pls import select

    d = _design(n=80, p=20, snr=1.0)
    folds = methods.draw_folds(d.n, 5, np.random.default_rng(3))
    sel = select.select_k(d.X, d.y, 6, folds, batch.operations())
    mse = np.zeros((5, 6))
    press_total = np.zeros(6)
    total = 0.0
    for f, te in enumerate(folds):
        tr = np.setdiff1d(np.arange(d.n), te)
        mu, sd = d.y[tr].mean(), d.y[tr].std(ddof=1)
        total += (((d.y[te] - mu) / sd) ** 2).sum()
        for k in range(1, 7):
            pred = PLSRegression(k, scale=True).fit(d.X[tr], d.y[tr]).predict(d.X[te]).ravel()
            press = (((pred - d.y[te]) / sd) ** 2).sum()
            mse[f, k - 1] = press / len(te)
            press_total[k - 1] += press
    np.testing.assert_allclose(sel.cv_mse, mse.mean(axis=0), rtol=1e-9)
    np.testing.assert_allclose(sel.q2, 1 - press_total / total, rtol=1e-9)
    mean, se = mse.mean(axis=0), mse.std(axis=0, ddof=1) / np.sqrt(5)
    assert sel.chosen == 1 + np.flatnonzero(mean <= mean.min() + se[np.argmin(mean)])[0]
    rows = api.run(d, [], api.Options(method="nb", force_nb=True, select_k=6, splits=10))
    assert [r.k for r in rows] == [rows[0].selection["chosen"]] and rows[0].exploratory
    assert "NOT valid" in rows[0].selection["warning"]
    plain = api.run(d, [2], api.Options(method="nb", force_nb=True, splits=10))[0].to_dict()
    assert plain["exploratory"] is False and plain["selection"] is None
    with pytest.raises(UsageError, match="--select-k must be >= 1"):
        api.run(d, [], api.Options(select_k=0))


def test_power_on_dask_equals_serial_for_the_same_seed():
    pytest.importorskip("distributed", reason="dask[distributed] comes with methodkit[pls]")
    from methodkit.tools.pls import power

    scenario = power.Scenario("toeplitz0.5", 15, 3, 0.5)
    options = api.Options(splits=8, perms=29, seed=11)
    args = (scenario, [30, 45], ["nb", "cvq2-perm"], 2, 5, options)
    serial = power.curves(*args)
    dask = power.curves(*args, scheduler="local", workers=2, processes=False)
    key = [(p.method, p.n, p.rejected, p.mean_fits) for p in serial]
    assert key == [(p.method, p.n, p.rejected, p.mean_fits) for p in dask]
    assert 0 < sum(p.rejected for p in serial) < 20  # not all-or-nothing: the comparison can fail


@pytest.mark.parametrize("geometry", ["iid", "onefactor", "toeplitz0.5", "spectrum"])
def test_top_eigenvalue_equals_eigvalsh(geometry):
    rng = np.random.default_rng(13)
    if geometry == "spectrum":  # NIR-like: one dominant direction (power iteration returns early)
        X = np.outer(rng.normal(size=120), np.linspace(1, 2, 60)) + 0.01 * rng.normal(size=(120, 60))
    else:
        X, _ = simulate(geometry, 120, 60, snr=0.0, rng=rng)
    S = X.T @ X
    assert gate.top_eigenvalue(S) == pytest.approx(np.linalg.eigvalsh(S)[-1], rel=1e-12)
    assert gate.top_eigenvalue(np.zeros((4, 4))) == 0.0
