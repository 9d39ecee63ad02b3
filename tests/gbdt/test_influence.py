"""BoostIn: the Numba aggregate against tree_influence's per-validation-row algorithm (NumPy transcription)."""

from __future__ import annotations

import numpy as np

from methodkit.tools.gbdt import influence, kernels

from .helpers import fitted


def test_trees_reproduce_raw_scores():
    # b0 + sum of parsed leaf values must equal LightGBM's raw score: the parser is right
    p, _, booster, trees, L_tr, _ = fitted()
    T = L_tr.shape[1]
    summed = trees.b0 + trees.leaf_values[np.arange(T)[None, :], L_tr].sum(axis=1)
    np.testing.assert_allclose(summed, booster.predict(p.X_tr, raw_score=True), rtol=0, atol=1e-9)
    assert trees.b0 == np.log(p.y_tr.mean() / (1 - p.y_tr.mean()))


def test_aggregate_equals_sum_of_per_instance_boostin():
    p, _, _, trees, L_tr, L_v = fitted()
    reference = influence.boostin_per_instance(L_tr, L_v, trees, p.y_tr, p.y_v, 0.0).sum(axis=1)
    ours = influence.boostin(L_tr, L_v, trees, p.y_tr, p.y_v, 0.0)
    np.testing.assert_allclose(ours, reference, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(influence.boostin_numpy(L_tr, L_v, trees, p.y_tr, p.y_v, 0.0), reference, rtol=1e-6)


def test_kernel_matches_py_func_on_random_leaves():
    rng = np.random.default_rng(3)
    n, m, T, leaves = 50, 20, 7, 5
    L_tr = rng.integers(0, leaves, (n, T))
    L_v = rng.integers(0, leaves, (m, T))
    values = rng.normal(0, 0.1, (T, leaves))
    y_tr, y_v = rng.integers(0, 2, n).astype(float), rng.integers(0, 2, m).astype(float)
    got = kernels.boostin_aggregate(L_tr, L_v, values, y_tr, y_v, 0.1, 0.5, 0.2)
    want = kernels.boostin_aggregate.py_func(L_tr, L_v, values, y_tr, y_v, 0.1, 0.5, 0.2)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_leaf_derivative_by_hand():
    # one tree, one leaf: d_i = lr (g_i + v h_i) / (H + lam) with p = sigmoid(b0)
    from methodkit.tools.gbdt.victim import Trees

    y = np.array([1.0, 0.0, 1.0])
    b0, v, lr, lam = 0.3, -0.2, 0.1, 1.0
    trees = Trees(np.array([[v]]), np.array([1]), b0, lr, [])
    p = 1 / (1 + np.exp(-b0))
    g, h = p - y, p * (1 - p)
    want = lr * (g + v * h) / (3 * h + lam)
    got = influence.leaf_derivatives(np.zeros((3, 1), dtype=np.int64), trees, y, lam)[:, 0]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # aggregated over a validation set of two rows in the same leaf
    yv = np.array([0.0, 0.0])
    agg = influence.boostin(np.zeros((3, 1), dtype=np.int64), np.zeros((2, 1), dtype=np.int64), trees, y, yv, lam)
    np.testing.assert_allclose(agg, want * 2 * p, rtol=1e-12)


def test_helpful_rows_matter_more_than_harmful_ones():
    # removing the most helpful rows raises validation loss more than removing the most harmful ones
    p, victim, booster, trees, L_tr, L_v = fitted(n=600)
    scores = influence.boostin(L_tr, L_v, trees, p.y_tr, p.y_v, victim.lambda_l2)
    k = 30
    order = np.argsort(scores)
    losses = {}
    for name, drop in (("helpful", order[-k:]), ("harmful", order[:k])):
        keep = np.setdiff1d(np.arange(len(scores)), drop)
        model = victim.fit(p.X_tr[keep], p.y_tr[keep], p.cat_idx)
        q = np.clip(model.predict(p.X_v), 1e-15, 1 - 1e-15)
        losses[name] = -np.mean(p.y_v * np.log(q) + (1 - p.y_v) * np.log(1 - q))
    assert losses["helpful"] > losses["harmful"]


def test_select_takes_largest_eligible():
    scores = np.array([5.0, 9.0, 1.0, 7.0, 9.0])
    eligible = np.array([True, False, True, True, True])
    assert influence.select(scores, eligible, 2).tolist() == [3, 4]
