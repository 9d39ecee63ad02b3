"""J(Δ): the victim's validation objective after the poisoned rows move (issue §2.4-2.5).

`retrain` rebuilds the LightGBM data set from the modified matrix and trains from
scratch, as a real victim would. `refit` keeps the tree structures of an anchor
model, routes the moved rows to their new leaves and recomputes every leaf value
with the Newton step (tree_influence's LeafRefit idea); the anchor is retrained on
the current iterate every `refit_every` iterations.

Speed (measured on Adult, 26k rows, 100 trees: ~90% of an attack is LightGBM
training): `workers` > 1 trains the 2q probes of an iteration at once in threads
(LightGBM releases the GIL; every fit is deterministic, so the result does not
depend on the number of workers); `fast_bins` builds the bin boundaries once from
the clean data and lends them to every retrain (lgb.Dataset reference=), which a
real victim would not do, hence opt-in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.tools.gbdt import kernels
from methodkit.tools.gbdt.influence import LAMBDA_FLOOR
from methodkit.tools.gbdt.victim import Victim, leaf_indices, parse_trees, scores

OBJECTIVES = ("logloss", "f1")
ORACLES = ("retrain", "refit")


def objective_value(p_val: np.ndarray, y_val: np.ndarray, objective: str) -> float:
    """What the attacker maximises: validation logloss, or minus validation F1."""
    s = scores(p_val, y_val)
    return s["logloss"] if objective == "logloss" else -s["f1"]


@dataclass
class Oracle:
    victim: Victim
    X_tr: np.ndarray
    y_tr: np.ndarray
    X_v: np.ndarray
    y_v: np.ndarray
    cat_idx: list[int]
    objective: str = "logloss"
    kind: str = "retrain"
    fast_bins: bool = False
    workers: int = 1
    fits: int = 0
    refits: int = 0
    _anchor: object = None
    _reference: object = None

    def modified(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> np.ndarray:
        """X_tr with X[rows[b], cols[b, a]] = values[b, a] (cols -1 = unused slot)."""
        X = self.X_tr.copy()
        b_idx, a_idx = np.nonzero(cols >= 0)
        X[rows[b_idx], cols[b_idx, a_idx]] = values[b_idx, a_idx]
        return X

    def fit(self, X: np.ndarray):
        self.fits += 1
        if self.fast_bins and self._reference is None:
            self._reference = self.victim.bins(self.X_tr, self.y_tr, self.cat_idx)
        return self.victim.fit(X, self.y_tr, self.cat_idx, reference=self._reference)

    def many(self, rows, cols, values_list: list[np.ndarray]) -> list[float]:
        """J at several points, in order; retrains run `workers` at a time in threads."""
        if self.kind != "retrain" or self.workers <= 1 or len(values_list) <= 1:
            return [self(rows, cols, values) for values in values_list]
        return [value for value, _ in self.trained(rows, cols, values_list)]

    def trained(self, rows, cols, values_list: list[np.ndarray]) -> list[tuple[float, object]]:
        """(J, booster) of true retrains at several points, in order (`workers` at a time in threads)."""
        if self.fast_bins and self._reference is None:
            self._reference = self.victim.bins(self.X_tr, self.y_tr, self.cat_idx)

        def one(values):
            X = self.modified(rows, cols, values)
            booster = self.victim.fit(X, self.y_tr, self.cat_idx, reference=self._reference)
            return objective_value(booster.predict(self.X_v), self.y_v, self.objective), booster

        if self.workers <= 1 or len(values_list) <= 1:
            out = [one(values) for values in values_list]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=self.workers) as pool:
                out = list(pool.map(one, values_list))
        self.fits += len(values_list)
        return out

    def anchor(self, X: np.ndarray) -> None:
        """(refit) Retrain on X and keep its tree structures for the next evaluations."""
        self.adopt(self.fit(X), X)

    def adopt(self, booster, X: np.ndarray) -> None:
        """(refit) Use `booster`, trained on X, as the anchor."""
        trees = parse_trees(booster, self.y_tr, self.victim.full_params())
        self._anchor = (booster, trees, leaf_indices(booster, X), leaf_indices(booster, self.X_v))

    def __call__(self, rows, cols, values) -> float:
        X = self.modified(rows, cols, values)
        if self.kind == "retrain":
            booster = self.fit(X)
            return objective_value(booster.predict(self.X_v), self.y_v, self.objective)
        if self._anchor is None:
            self.anchor(X)
        booster, trees, L_tr, L_v = self._anchor
        L = L_tr.copy()
        L[rows] = leaf_indices(booster, X[rows])
        raw = kernels.leaf_refit_scores(
            L,
            self.y_tr,
            L_v,
            trees.n_leaves,
            trees.learning_rate,
            max(self.victim.lambda_l2, LAMBDA_FLOOR),
            trees.b0,
        )
        self.refits += 1
        return objective_value(1.0 / (1.0 + np.exp(-raw)), self.y_v, self.objective)
