"""The refit oracle: leaf values recomputed on the same data reproduce LightGBM's predictions."""

from __future__ import annotations

import numpy as np

from methodkit.tools.gbdt import kernels
from methodkit.tools.gbdt.oracle import Oracle

from .helpers import fitted


def test_leaf_refit_on_unchanged_data_reproduces_the_model():
    p, victim, booster, trees, L_tr, L_v = fitted()
    # with LightGBM's lambda_l2 = 0 (a vanishing floor) the Newton values are LightGBM's own leaf values
    raw = kernels.leaf_refit_scores(L_tr, p.y_tr, L_v, trees.n_leaves, trees.learning_rate, 1e-12, trees.b0)
    np.testing.assert_allclose(raw, booster.predict(p.X_v, raw_score=True), rtol=0, atol=1e-6)


def test_refit_oracle_tracks_retrain_direction():
    p, victim, *_ = fitted(n=500)
    rows = np.arange(0, 60)
    cols = np.tile([0, 1], (60, 1))
    moved = p.X_tr[rows[:, None], cols] - 2.5 * np.where(p.y_tr[rows] == 1, 1, -1)[:, None]
    same = p.X_tr[rows[:, None], cols]
    for kind in ("retrain", "refit"):
        oracle = Oracle(victim, p.X_tr, p.y_tr, p.X_v, p.y_v, p.cat_idx, kind=kind)
        base, hurt = oracle(rows, cols, same), oracle(rows, cols, moved)
        assert hurt > base, kind  # class-reversing moves raise validation loss under both oracles
