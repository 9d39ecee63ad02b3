"""The baselines of the comparison: uniform, ROI-greedy, LP on a LightGBM T-learner, the oracle.

Every personalized method's per-user estimates (incremental value and cost per arm) are
turned into a policy by the same LP (lp.solve), the paper's "under LP" protocol.
"""

from __future__ import annotations

import numpy as np

from methodkit.tools.cuvet import kernels, lp
from methodkit.tools.cuvet.allocate import realize
from methodkit.tools.cuvet.data import RCT
from methodkit.tools.cuvet.model import CuvetModel, leaf_from_stats

LGBM_PARAMS = {"n_estimators": 200, "learning_rate": 0.05, "num_leaves": 31, "min_child_samples": 200, "verbose": -1}


def uniform(train: RCT, budget_per_user: float, n_test: int) -> np.ndarray:
    """The best non-personalized arm mix that meets the budget (the root frontier, realized)."""
    stats = kernels.arm_stats(np.arange(train.n, dtype=np.int64), train.t, train.y, train.z, train.n_arms)
    root = leaf_from_stats(stats, 1.0, train.n)
    mix = realize(min(budget_per_user, root.dc[-1]), root.dc, root.arms)
    pi = np.zeros((n_test, train.n_arms))
    for arm, p in mix.items():
        pi[:, arm] = p
    return pi


class TLearner:
    """LightGBM per arm for the value (a classifier when it is 0/1) and, for a cost column, the cost."""

    def __init__(self, train: RCT, seed: int = 0, threads: int = 0):
        import lightgbm as lgb

        self.n_arms = train.n_arms
        self.cost = train.cost
        binary = bool(np.isin(np.unique(train.y), [0.0, 1.0]).all())
        self.value_models, self.cost_models = [], []
        for a in range(train.n_arms):
            rows = train.t == a
            params = {**LGBM_PARAMS, "random_state": seed, "n_jobs": threads or None}
            m = lgb.LGBMClassifier(**params) if binary else lgb.LGBMRegressor(**params)
            m.fit(train.X[rows], train.y[rows])
            self.value_models.append(m)
            if train.cost.column is not None:
                mc = lgb.LGBMRegressor(**params)
                mc.fit(train.X[rows], train.z[rows])
                self.cost_models.append(mc)
        self.binary = binary

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(value, cost) per user and arm, incremental over control."""
        if self.binary:
            v = np.column_stack([m.predict_proba(X)[:, 1] for m in self.value_models])
        else:
            v = np.column_stack([m.predict(X) for m in self.value_models])
        if self.cost.column is not None:
            c = np.column_stack([m.predict(X) for m in self.cost_models])
        else:
            kappa = np.asarray(self.cost.arm_costs, float)[None, :]
            c = kappa * v if self.cost.on_outcome else np.repeat(kappa, len(X), axis=0)
        return v - v[:, :1], c - c[:, :1]


def lp_policy(dv: np.ndarray, dc: np.ndarray, budget_per_user: float, xp=None) -> np.ndarray:
    """The exact LP policy (host array); xp = cupy solves it on the GPU."""
    from methodkit.core.backend import to_numpy

    return to_numpy(lp.solve(dv, dc, budget_per_user * len(dv), xp=xp).pi)


def roi_greedy(dv: np.ndarray, dc: np.ndarray, budget_per_user: float) -> np.ndarray:
    """DRP-style: rank (user, arm) pairs by dv/dc and fill the budget greedily."""
    n, k = dv.shape
    users, arms = np.nonzero(dv[:, 1:] > 0) if k > 1 else (np.zeros(0, int), np.zeros(0, int))
    arms = arms + 1
    pair_dv, pair_dc = dv[users, arms], dc[users, arms]
    with np.errstate(divide="ignore"):
        ratio = np.where(pair_dc > 0, pair_dv / pair_dc, np.inf)
    order = np.lexsort((arms, users, -ratio))
    arm = kernels.greedy_fill(
        users[order].astype(np.int64), arms[order].astype(np.int64), pair_dc[order], budget_per_user * n, n
    )
    pi = np.zeros((n, k))
    pi[np.arange(n), arm] = 1.0
    return pi


def leaf_estimates(model: CuvetModel, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CUVET's leaf-level (dv, dc) per user and arm, for the LP; arms a leaf cannot estimate are never chosen."""
    leaf = model.leaf_of(X)
    table_v = np.full((len(model.leaves), model.n_arms), -np.inf)
    table_c = np.zeros((len(model.leaves), model.n_arms))
    for k, lf in enumerate(model.leaves):
        dc, dv, _, ok = kernels.increments(lf.stats)
        table_v[k] = np.where(ok, dv, -np.inf)
        table_v[k, 0] = 0.0
        table_c[k] = np.where(ok, dc, 0.0)
    dv = table_v[leaf]
    dv[~np.isfinite(dv)] = -1e30
    return dv, table_c[leaf]


def cell_oracle(
    cells: np.ndarray, p: np.ndarray, arm_costs, budget_per_user: float, on_outcome: bool = True
) -> np.ndarray:
    """The best policy that is constant on each cell (a tree's leaves), from the true probabilities.

    The exact LP on the cell-mean conversion probabilities: what any leaf fit and allocation
    could at best make of that partition. Its value bounds every policy constant on the cells,
    so it separates what a tree's partition allows from what its leaf estimates deliver.
    """
    cells = np.asarray(cells, dtype=np.int64)
    size = np.bincount(cells).astype(float)
    means = np.column_stack([np.bincount(cells, weights=p[:, a]) for a in range(p.shape[1])])
    means /= np.maximum(size, 1.0)[:, None]
    return oracle(means[cells], arm_costs, budget_per_user, on_outcome=on_outcome)


def true_cost(p: np.ndarray, arm_costs, on_outcome: bool = True) -> np.ndarray:
    """(n, K+1) true expected cost of every arm: kappa_t p_t paid on conversion, else kappa_t."""
    kappa = np.asarray(arm_costs, float)[None, :]
    return kappa * p if on_outcome else np.broadcast_to(kappa, p.shape)


def oracle(p: np.ndarray, arm_costs, budget_per_user: float, xp=None, on_outcome: bool = True) -> np.ndarray:
    """The exact LP on the true conversion probabilities (cost paid on conversion, or kappa_t per user)."""
    dv = p - p[:, :1]
    c = true_cost(p, arm_costs, on_outcome)
    return lp_policy(dv, c - c[:, :1], budget_per_user, xp)
