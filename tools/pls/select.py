"""Exploratory choice of K by cross-validation (R pls::selectNcomp 'onesigma' rule).

Choosing K on the same rows that are then tested biases every p-value downward, so the
confirmatory verb refuses `-k auto`; this exists only behind `--select-k`, and every
row it produces carries a loud warning. PLS1 bases are nested (the first k Krylov
vectors are the k-component basis), so one fit with K_max components per fold gives
the held-out predictions of every K <= K_max.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from methodkit.tools.pls import batch

WARNING = (
    "K was selected on the same data (--select-k): the p-values are biased low and NOT valid; "
    "exploratory only. Pre-specify K (or select it on independent rows) for a confirmatory test"
)


@dataclass
class Selection:
    chosen: int
    k_max: int
    rule: str
    q2: list[float]  # pooled CV Q2 for K = 1..k_max
    cv_mse: list[float]  # mean over folds of the held-out MSE (standardised y)
    cv_se: list[float]  # its standard error over folds
    folds: int
    warning: str = WARNING

    def to_dict(self) -> dict:
        return asdict(self)


def select_k(X, y, k_max: int, folds: list[np.ndarray], ops, w=None) -> Selection:
    """Smallest K whose CV error is within one standard error of the best K (Hastie's one-sigma rule)."""
    n = len(y)
    F = len(folds)
    press = np.zeros((F, k_max))
    total = np.zeros(F)
    size = np.zeros(F)
    for f, test in enumerate(folds):
        train = np.setdiff1d(np.arange(n), test)
        split = batch.standardize_split(X, train, test, ops.xp, w)
        Ytr_s, Yte_s, _ = batch.standardize_y(split, y[train, None], y[test, None], ops)
        W, _ = batch.pls1_weights(split.Xtr, Ytr_s, k_max, ops)
        for k in range(1, k_max + 1):
            yhat = batch.heldout_predict(split.Xtr, Ytr_s, split.Xte, ops.xp.ascontiguousarray(W[:k]), ops)
            p_, t_ = batch.weighted_sum_squares(split, yhat, Yte_s, ops)
            press[f, k - 1] = float(batch._host(p_)[0])
            total[f] = float(batch._host(t_)[0])
        size[f] = len(test) if w is None else float(w[test].sum())
    mse = press / size[:, None]
    mean = mse.mean(axis=0)
    se = mse.std(axis=0, ddof=1) / np.sqrt(F)
    best = int(np.argmin(mean))
    chosen = int(np.flatnonzero(mean <= mean[best] + se[best])[0]) + 1
    q2 = 1.0 - press.sum(axis=0) / total.sum()
    return Selection(chosen, k_max, "onesigma", q2.tolist(), mean.tolist(), se.tolist(), F)
