"""Doubly robust (DR, AIPW) policy value and cost on RCT data, with cross-fitted outcome models.

V_DR(pi) = (1/n) sum_i [ sum_t pi(t|x_i) mu_t(x_i) + pi(T_i|x_i) (Y_i - mu_{T_i}(x_i)) / e(T_i) ].
mu_t is a LightGBM model of the value in arm t fitted on the other folds (cross-fitting, so a
row's own outcome never enters its prediction); the cost uses the same form with nu_t: the
known kappa_t for deterministic arm costs, kappa_t mu_t for cost paid on the outcome, and a
LightGBM model of the cost column otherwise. With known propensities the estimator is
unbiased whatever mu is; a good mu removes the variance the covariates explain, which IPW
keeps. CIs: bootstrap of the per-row DR terms (the nuisance models are held fixed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.core.rng import chunk_seeds
from methodkit.tools.cuvet import kernels
from methodkit.tools.cuvet.data import RCT

FOLDS = 5
LGBM_PARAMS = {"n_estimators": 100, "learning_rate": 0.05, "num_leaves": 15, "min_child_samples": 50, "verbose": -1}


@dataclass
class DRValue:
    value: float
    cost: float  # incremental over control
    value_control: float
    value_ref: float
    cost_ref: float
    uplift_pct: float
    value_se: float
    cost_se: float
    value_ci: tuple[float, float]
    cost_ci: tuple[float, float]
    folds: int

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def outcome_models(data: RCT, folds: int = FOLDS, seed: int = 0, threads: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Cross-fitted (mu, nu): (n, K+1) predicted value and cost of every row under every arm."""
    import lightgbm as lgb

    n, k = data.n, data.n_arms
    fold = np.random.default_rng(seed).permutation(n) % folds
    binary = bool(np.isin(np.unique(data.y), [0.0, 1.0]).all())
    cost_model = data.cost.column is not None
    mu = np.zeros((n, k))
    nu = np.zeros((n, k))
    params = {**LGBM_PARAMS, "random_state": seed, "n_jobs": threads or None}
    for f in range(folds):
        test = fold == f
        for a in range(k):
            train = (~test) & (data.t == a)
            mu[test, a] = _fit_predict(lgb, params, binary, data.X[train], data.y[train], data.X[test])
            if cost_model:
                nu[test, a] = _fit_predict(lgb, params, False, data.X[train], data.z[train], data.X[test])
    if not cost_model:
        kappa = np.asarray(data.cost.arm_costs, float)[None, :]
        nu = kappa * mu if data.cost.on_outcome else np.repeat(kappa, n, axis=0)
    return mu, nu


def _fit_predict(lgb, params, binary, X, y, X_new) -> np.ndarray:
    if len(y) == 0:
        return np.zeros(len(X_new))
    if len(np.unique(y)) == 1:  # LightGBM refuses a constant target; its prediction is that constant
        return np.full(len(X_new), float(y[0]))
    if binary:
        return lgb.LGBMClassifier(**params).fit(X, y).predict_proba(X_new)[:, 1]
    return lgb.LGBMRegressor(**params).fit(X, y).predict(X_new)


def dr_terms(pi: np.ndarray, data: RCT, e: np.ndarray, mu: np.ndarray, nu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row DR terms of value and cost for the policy pi (n, K+1); their means are the estimates."""
    rows = np.arange(data.n)
    w = pi[rows, data.t] / e
    value = (pi * mu).sum(1) + w * (data.y - mu[rows, data.t])
    cost = (pi * nu).sum(1) + w * (data.z - nu[rows, data.t])
    return value, cost


def evaluate_dr(
    pi: np.ndarray,
    pi_ref: np.ndarray,
    data: RCT,
    e: np.ndarray,
    *,
    models: tuple[np.ndarray, np.ndarray] | None = None,
    folds: int = FOLDS,
    seed: int = 0,
    n_boot: int = 200,
    threads: int = 0,
) -> DRValue:
    """DR value and incremental cost of pi, of the reference and of all-control, with bootstrap CIs."""
    mu, nu = models if models is not None else outcome_models(data, folds, seed, threads)
    ctl = np.zeros_like(pi)
    ctl[:, 0] = 1.0
    v, c = dr_terms(pi, data, e, mu, nu)
    vr, cr = dr_terms(pi_ref, data, e, mu, nu)
    v0, c0 = dr_terms(ctl, data, e, mu, nu)
    terms = np.ascontiguousarray(np.column_stack([v, c - c0, vr, cr - c0, v0]))
    seeds = (chunk_seeds(seed, n_boot) % np.uint64(2**31)).astype(np.int64)
    reps = kernels.bootstrap_means(terms, seeds)
    mean = terms.mean(0)
    denom = mean[2] - mean[4]
    return DRValue(
        float(mean[0]),
        float(mean[1]),
        float(mean[4]),
        float(mean[2]),
        float(mean[3]),
        100.0 * (mean[0] - mean[2]) / denom if denom != 0 else float("nan"),
        float(terms[:, 0].std(ddof=1) / np.sqrt(data.n)),
        float(terms[:, 1].std(ddof=1) / np.sqrt(data.n)),
        _ci(reps[:, 0]),
        _ci(reps[:, 1]),
        folds,
    )


def _ci(x: np.ndarray) -> tuple[float, float]:
    return float(np.quantile(x, 0.025)), float(np.quantile(x, 0.975))
