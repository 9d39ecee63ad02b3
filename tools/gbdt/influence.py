"""Which train rows to poison: BoostIn influence on the attacker's validation loss (issue §2.1).

BoostIn (Brophy, Hammoudeh & Lowd, JMLR 2023) is TracIn for boosted trees: the
derivative of each leaf value with respect to a train row's weight, times the
validation gradient routed to that leaf, summed over boosting rounds. Summing the
per-validation-row scores first gives the same total in O(T (n + m)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.tools.gbdt import kernels
from methodkit.tools.gbdt.victim import Trees, leaf_indices

LAMBDA_FLOOR = 1e-3  # tree_influence floors LightGBM's lambda_l2 (0 by default) at this value
SELECTIONS = ("boostin", "loss", "random")


def boostin(L_tr, L_v, trees: Trees, y_tr, y_v, lam: float) -> np.ndarray:
    """Aggregated BoostIn score of every train row (positive = the row lowers validation loss)."""
    return kernels.boostin_aggregate(
        np.ascontiguousarray(L_tr, dtype=np.int64),
        np.ascontiguousarray(L_v, dtype=np.int64),
        np.ascontiguousarray(trees.leaf_values, dtype=np.float64),
        np.ascontiguousarray(y_tr, dtype=np.float64),
        np.ascontiguousarray(y_v, dtype=np.float64),
        float(trees.learning_rate),
        max(float(lam), LAMBDA_FLOOR),
        float(trees.b0),
    )


# ---------------------------------------------------------------- NumPy references (tests, bench)


def _staged_gradients(L, trees: Trees, y):
    """g, h of every row before each round: (n, T) each."""
    n, T = L.shape
    F = np.full(n, trees.b0)
    g = np.empty((n, T))
    h = np.empty((n, T))
    for t in range(T):
        p = 1.0 / (1.0 + np.exp(-F))
        g[:, t] = p - y
        h[:, t] = p * (1.0 - p)
        F = F + trees.leaf_values[t, L[:, t]]
    return g, h


def leaf_derivatives(L_tr, trees: Trees, y_tr, lam: float) -> np.ndarray:
    """tree_influence's BoostIn._compute_leaf_derivatives, transcribed: lr (g + v h) / (H_leaf + lam)."""
    lam = max(float(lam), LAMBDA_FLOOR)
    g, h = _staged_gradients(L_tr, trees, y_tr)
    n, T = L_tr.shape
    out = np.zeros((n, T))
    for t in range(T):
        values = trees.leaf_values[t]
        for leaf in range(int(trees.n_leaves[t])):
            docs = np.flatnonzero(L_tr[:, t] == leaf)
            if docs.size:
                out[docs, t] = (g[docs, t] + values[leaf] * h[docs, t]) / (h[docs, t].sum() + lam) * trees.learning_rate
    return out


def boostin_per_instance(L_tr, L_v, trees: Trees, y_tr, y_v, lam: float) -> np.ndarray:
    """tree_influence's BoostIn.get_local_influence loop, (n, m): one validation row at a time."""
    dvs = leaf_derivatives(L_tr, trees, y_tr, lam)
    gv, _ = _staged_gradients(L_v, trees, y_v)
    out = np.empty((L_tr.shape[0], L_v.shape[0]))
    for j in range(L_v.shape[0]):
        mask = L_tr == L_v[j]
        out[:, j] = np.sum(dvs * mask * gv[j], axis=1)
    return out


def boostin_numpy(L_tr, L_v, trees: Trees, y_tr, y_v, lam: float) -> np.ndarray:
    """The aggregated score in vectorised NumPy (bincount per round)."""
    lam = max(float(lam), LAMBDA_FLOOR)
    n, T = L_tr.shape
    F_tr = np.full(n, trees.b0)
    F_v = np.full(L_v.shape[0], trees.b0)
    width = trees.leaf_values.shape[1]
    out = np.zeros(n)
    for t in range(T):
        p = 1.0 / (1.0 + np.exp(-F_tr))
        g, h = p - y_tr, p * (1.0 - p)
        H = np.bincount(L_tr[:, t], h, minlength=width)
        Gv = np.bincount(L_v[:, t], 1.0 / (1.0 + np.exp(-F_v)) - y_v, minlength=width)
        values = trees.leaf_values[t]
        leaf = L_tr[:, t]
        out += Gv[leaf] * trees.learning_rate * (g + values[leaf] * h) / (H[leaf] + lam)
        F_tr += values[leaf]
        F_v += values[L_v[:, t]]
    return out


# ---------------------------------------------------------------- candidate selection


@dataclass
class Influence:
    scores: np.ndarray  # one per train row
    method: str


def score_rows(method: str, booster, trees: Trees, X_tr, y_tr, X_v, y_v, lam: float, rng) -> Influence:
    """Scores where larger = better candidate: BoostIn, minus the training loss, or uniform noise."""
    if method == "boostin":
        L_tr, L_v = leaf_indices(booster, X_tr), leaf_indices(booster, X_v)
        return Influence(boostin(L_tr, L_v, trees, y_tr, y_v, lam), method)
    if method == "loss":
        p = np.clip(booster.predict(X_tr), 1e-15, 1 - 1e-15)
        loss = -(y_tr * np.log(p) + (1 - y_tr) * np.log(1 - p))
        return Influence(-loss, method)
    if method == "random":
        return Influence(rng.random(len(y_tr)), method)
    raise ValueError(f"unknown selection {method!r}")


def select(scores: np.ndarray, eligible: np.ndarray, budget: int) -> np.ndarray:
    """Positions of the `budget` eligible rows with the largest scores (ties by position)."""
    positions = np.flatnonzero(eligible)
    order = np.lexsort((positions, -scores[positions]))
    return np.sort(positions[order[:budget]])
