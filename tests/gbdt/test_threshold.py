"""The threshold-crossing search: segments, interval probes, first-order move scores, the search itself."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from methodkit.tools.gbdt import attack, kernels, threshold
from methodkit.tools.gbdt.feasible import Region
from methodkit.tools.gbdt.victim import Victim, leaf_indices

from .helpers import fitted, random_spd


def _region(rng, B=6, k=3, eps=1.3, box=2.0):
    U = np.zeros((B, k, k))
    s = np.zeros((B, k))
    for b in range(B):
        s[b], U[b] = np.linalg.eigh(random_spd(rng, k))
    x0 = rng.normal(scale=0.3, size=(B, k))
    return Region(
        rows=np.arange(B),
        dims=np.tile(np.arange(k), (B, 1)),
        x0=x0,
        U=U,
        s=s,
        lo=np.full((B, k), -box),
        hi=np.full((B, k), box),
        int_mask=np.zeros((B, k), dtype=bool),
        mean=np.zeros((B, k)),
        sd=np.ones((B, k)),
        logmask=np.zeros((B, k), dtype=bool),
        eps=np.full(B, eps),
    )


def test_coordinate_segments_end_on_the_ellipsoid_or_the_box():
    rng = np.random.default_rng(0)
    region = _region(rng)
    Z = region.project(region.x0 + rng.normal(scale=0.5, size=region.x0.shape))
    lo, hi = threshold.coordinate_segments(region, Z, threshold.precisions(region))
    B, k = Z.shape
    for b in range(B):
        for a in range(k):
            assert lo[b, a] <= Z[b, a] + 1e-12 <= hi[b, a] + 2e-12
            for end, box in ((lo[b, a], region.lo[b, a]), (hi[b, a], region.hi[b, a])):
                point = Z.copy()
                point[b, a] = end
                radius = region.radius(point)[b]
                # each end is on the ellipsoid's boundary unless the box cut it first
                assert np.isclose(radius, region.eps[b], rtol=1e-9) or (
                    np.isclose(end, box) and radius <= region.eps[b] * (1 + 1e-9)
                )
                point[b, a] = end + (1e-6 if end == hi[b, a] else -1e-6)  # one step further is outside
                assert not region.inside(point, tol=0)[b]


def test_interval_points_one_per_threshold_interval_nearest_first():
    thr = np.array([-3.0, 1.5, 3.5, 7.2, 20.0])
    assert threshold.interval_points(thr, 0.0, 10.0, 2.0, integer=True) == [1.0, 5.0, 9.0]
    assert threshold.interval_points(thr, 0.0, 10.0, 2.0, integer=False) == pytest.approx([0.75, 5.35, 8.6])
    # at a threshold the value is in the interval on its left (LightGBM: x <= threshold goes left)
    assert threshold.interval_points(thr, 0.0, 10.0, 3.5, integer=False) == pytest.approx([0.75, 5.35, 8.6])
    assert threshold.interval_points(thr, 0.0, 10.0, 3.6, integer=False) == pytest.approx([2.5, 8.6, 0.75])
    # an interval without an integer inside is skipped; nothing to cross gives nothing
    assert threshold.interval_points(np.array([2.2, 2.6]), 0.0, 4.0, 1.0, integer=True) == [3.0]
    assert threshold.interval_points(thr, 2.0, 3.0, 2.5, integer=False) == []


def _move_scores_numpy(L_rows, L_cand, owner, y_rows, G, H, Gv, leaf_values, lr, lam, b0):
    """The formula of kernels.move_scores written out with arrays (reference)."""
    C, T = L_cand.shape
    out = np.zeros(C)
    for c in range(C):
        b = owner[c]
        F_old = b0 + np.concatenate([[0.0], np.cumsum(leaf_values[np.arange(T), L_rows[b]])[:-1]])
        F_new = b0 + np.concatenate([[0.0], np.cumsum(leaf_values[np.arange(T), L_cand[c]])[:-1]])
        p_old, p_new = 1 / (1 + np.exp(-F_old)), 1 / (1 + np.exp(-F_new))
        g_old, h_old = p_old - y_rows[b], p_old * (1 - p_old)
        g_new, h_new = p_new - y_rows[b], p_new * (1 - p_new)
        t = np.arange(T)
        a, leaf = L_rows[b], L_cand[c]
        G_a, H_a = G[t, a].copy(), H[t, a].copy()
        G_l, H_l = G[t, leaf].copy(), H[t, leaf].copy()
        same = a == leaf
        v_a, v_l = -lr * G_a / (H_a + lam), -lr * G_l / (H_l + lam)
        stay = Gv[t, a] * (-lr * (G_a - g_old + g_new) / (H_a - h_old + h_new + lam) - v_a)
        leave = Gv[t, a] * (-lr * (G_a - g_old) / (H_a - h_old + lam) - v_a)
        join = Gv[t, leaf] * (-lr * (G_l + g_new) / (H_l + h_new + lam) - v_l)
        out[c] = np.sum(np.where(same, stay, leave + join))
    return out


def test_move_scores_kernel_matches_the_formula():
    rng = np.random.default_rng(3)
    T, width, B, C = 7, 5, 4, 30
    L_rows = rng.integers(0, width, size=(B, T))
    owner = rng.integers(0, B, size=C)
    L_cand = L_rows[owner]
    L_cand = np.where(rng.random((C, T)) < 0.4, rng.integers(0, width, size=(C, T)), L_cand)  # some leaves change
    y_rows = rng.integers(0, 2, size=B).astype(float)
    G, Gv = rng.normal(size=(T, width)), rng.normal(size=(T, width))
    H = rng.uniform(1.0, 5.0, size=(T, width))
    values = rng.normal(scale=0.2, size=(T, width))
    args = (L_rows, L_cand, owner, y_rows, G, H, Gv, values, 0.1, 1e-3, -0.4)
    np.testing.assert_allclose(kernels.move_scores(*args), _move_scores_numpy(*args), rtol=1e-10, atol=1e-14)


def test_staged_leaf_sums_match_the_boostin_reference():
    p, victim, booster, trees, L_tr, _ = fitted(300, seed=2)
    from methodkit.tools.gbdt.influence import _staged_gradients

    G, H = kernels.staged_leaf_sums(L_tr, trees.leaf_values, p.y_tr.astype(float), trees.b0)
    g, h = _staged_gradients(L_tr, trees, p.y_tr)
    for t in (0, 7, L_tr.shape[1] - 1):
        np.testing.assert_allclose(G[t], np.bincount(L_tr[:, t], g[:, t], minlength=G.shape[1]), atol=1e-10)
        np.testing.assert_allclose(H[t], np.bincount(L_tr[:, t], h[:, t], minlength=G.shape[1]), atol=1e-10)


def test_probe_scores_rank_moves_like_the_exact_leaf_refit():
    """The first-order score of a probe vs the exact change of validation loss it causes when the
    anchor's structure is kept and every leaf refit (cascade through later rounds included)."""
    p, victim, booster, trees, L_tr, L_v = fitted(400, seed=1)
    cfg = attack.AttackConfig(budget=0.1, eps=1.5)
    region = _attack_region(p, booster, cfg)
    precision = threshold.precisions(region)
    owner, points = threshold.probes(region, region.x0, precision, threshold.split_thresholds(trees))
    assert len(owner) > 50
    probe_rows = threshold.rows_of(region, owner)
    assert np.all(probe_rows.inside(points))
    X = p.X_tr
    scores = threshold.score_probes(booster, trees, X, p.y_tr, p.X_v, p.y_v, region, owner, points, 0.0)
    lam = 1e-3

    def val_loss(L):
        raw = kernels.leaf_refit_scores(L, p.y_tr, L_v, trees.n_leaves, trees.learning_rate, lam, trees.b0)
        q = 1 / (1 + np.exp(-raw))
        return -np.mean(p.y_v * np.log(q) + (1 - p.y_v) * np.log(1 - q))

    base = val_loss(L_tr)
    pick = np.random.default_rng(0).choice(len(owner), size=60, replace=False)
    exact = []
    for c in pick:
        Xc = X.copy()
        Xc[region.rows[owner[c]], region.dims[owner[c]]] = probe_rows.to_orig(points)[c]
        L = L_tr.copy()
        L[region.rows[owner[c]]] = leaf_indices(booster, Xc[region.rows[owner[c]]][None, :])[0]
        exact.append(val_loss(L) - base)
    rho = spearmanr(scores[pick], exact).statistic
    print(f"spearman {rho:.3f}")
    assert rho > 0.8, rho


def _attack_region(p, booster, cfg):
    from methodkit.tools.gbdt import dims as dimsmod
    from methodkit.tools.gbdt import influence as infl
    from methodkit.tools.gbdt.feasible import Standardizer, build_region
    from methodkit.tools.gbdt.victim import parse_trees

    mutable = [p.index(c) for c in p.mutable]
    chosen = dimsmod.by_gain(booster.feature_importance("gain"), mutable, cfg.dims)
    trees = parse_trees(booster, p.y_tr, Victim().full_params())
    scored = infl.score_rows("boostin", booster, trees, p.X_tr, p.y_tr, p.X_v, p.y_v, 0.0, None)
    rows = infl.select(scored.scores, np.all(np.isfinite(p.X_tr[:, chosen]), axis=1), int(cfg.budget * len(p.y_tr)))
    std = Standardizer.fit(p.X_tr, mutable, "none")
    dims = np.tile(np.asarray(chosen), (len(rows), 1))
    integer = {p.index(c) for c in p.integer}
    return build_region(p.X_tr, p.y_tr, std, rows, dims, cfg.eps, "class", integer, p.features)
