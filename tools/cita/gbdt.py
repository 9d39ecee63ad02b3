"""The fast baseline ranker: LightGBM lambdarank over candidate groups with Borda-aggregated pair labels.

Each context is one group (its candidates). Every pair (a, b, y, w) of the group, from any source, gives
a Borda count: a gets λ_s·w·y points and b gets λ_s·w·(1 − y). The group's candidates are then graded
0, 1, 2, ... by the dense rank of their points (0 = fewest; ties share a grade), and lambdarank learns
f(c, a) on the same feature rows φ(c, a) the MLP sees. Scores are LightGBM raw scores (σ(f) is not a
calibrated probability here).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.tools.cita.cim import SOURCES, PairSet, _task_hash

MAX_GRADE = 30  # LightGBM's default label_gain covers grades 0..30


def borda_points(n_rows: int, pa, pb, y, w) -> np.ndarray:
    """Borda count per feature row: the winner side of each pair gets w·y, the other w·(1 − y)."""
    pts = np.zeros(n_rows, np.float64)
    y = np.asarray(y, np.float64)
    w = np.asarray(w, np.float64)
    np.add.at(pts, np.asarray(pa), w * y)
    np.add.at(pts, np.asarray(pb), w * (1.0 - y))
    return pts


def grades_of(points: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """Integer relevance grades: the dense rank of the Borda points within each group (0 = lowest)."""
    out = np.zeros(len(points), np.int32)
    for rows in groups:
        vals = np.round(points[rows], 9)
        levels = np.unique(vals)
        out[rows] = np.minimum(np.searchsorted(levels, vals), MAX_GRADE)
    return out


@dataclass
class GbdtSpec:
    lambdas: dict
    trees: int = 200
    learning_rate: float = 0.05
    num_leaves: int = 31
    seed: int = 0
    val_fraction: float = 0.15


@dataclass
class GbdtRanker:
    booster: object

    def score(self, X: np.ndarray) -> np.ndarray:
        if not len(X):
            return np.zeros(0)
        return np.asarray(self.booster.predict(X, num_threads=1), np.float64)

    def to_string(self) -> str:
        return self.booster.model_to_string()

    @classmethod
    def from_string(cls, text: str) -> GbdtRanker:
        import lightgbm as lgb

        return cls(lgb.Booster(model_str=text))


def group_table(pairs: PairSet, lambdas: dict):
    """(rows per context, grades per feature row) from every pair, each pair weighted by its source's λ."""
    ctx_of = np.zeros(len(pairs.X), np.int64)
    for (c, _), row in pairs.point.items():
        ctx_of[row] = c
    lam = np.array([lambdas.get(s, 0.0) for s in SOURCES])[pairs.src]
    points = borda_points(len(pairs.X), pairs.pa, pairs.pb, pairs.y, pairs.w * lam)
    groups = [np.flatnonzero(ctx_of == c) for c in range(len(pairs.contexts))]
    groups = [g for g in groups if g.size]
    return ctx_of, groups, grades_of(points, groups)


def train(pairs: PairSet, spec: GbdtSpec):
    """Fit lambdarank on the non-held-out groups; held-out tasks give the behaviour-pair accuracy."""
    import lightgbm as lgb

    ctx_of, groups, grades = group_table(pairs, spec.lambdas)
    real_ids = {ctx["task_id"] for ctx in pairs.contexts if not ctx["task_id"].startswith("synthetic:")}
    held_ctx = {
        c
        for c, ctx in enumerate(pairs.contexts)
        if len(real_ids) >= 3 and _task_hash(ctx["task_id"], spec.seed) < spec.val_fraction
    }
    fit_groups = [g for g in groups if int(ctx_of[g[0]]) not in held_ctx and g.size > 1]
    if not fit_groups:
        raise UsageError("every candidate group fell in the held-out tasks; lower --val-fraction")
    rows = np.concatenate(fit_groups)
    data = lgb.Dataset(pairs.X[rows], label=grades[rows], group=[g.size for g in fit_groups], params={"verbose": -1})
    params = {
        "objective": "lambdarank",
        "learning_rate": spec.learning_rate,
        "num_leaves": spec.num_leaves,
        "min_data_in_leaf": 5,
        "seed": spec.seed,
        "deterministic": True,
        "force_row_wise": True,
        "num_threads": 1,
        "verbose": -1,
    }
    booster = lgb.train(params, data, num_boost_round=spec.trees)
    model = GbdtRanker(booster)
    val = np.flatnonzero(np.isin(ctx_of[pairs.pa], list(held_ctx)) & (pairs.src == 0))
    acc = None
    if val.size:
        f = model.score(pairs.X)
        acc = float(np.mean(f[pairs.pa[val]] > f[pairs.pb[val]]))
    info = {
        "val_pair_acc": acc,
        "n_val_pairs": int(val.size),
        "n_fit_groups": len(fit_groups),
        "n_fit_rows": int(rows.size),
        "trees": spec.trees,
        "max_grade": int(grades.max()) if grades.size else 0,
    }
    return model, info
