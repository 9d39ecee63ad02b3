"""Optional baselines from the field's libraries, turned into a policy by the same LP.

- lp-xlearner: econml's XLearner (Kuenzel et al. 2019) with LightGBM stage models, one CATE
  per arm against control.
- lp-causalml-urf: causalml's UpliftRandomForestClassifier (multi-treatment, KL divergence
  criterion; Rzepakowski and Jaroszewicz 2012) for a 0/1 value.

Both estimate the value uplift tau_t(x). The cost side follows the data's cost: deterministic
arm costs are known; cost paid on the outcome is kappa_t (mu_0 + tau_t) - kappa_0 mu_0 with
mu_0(x) a LightGBM model of the value in the control arm; a cost column gets its own
X-learner (both baselines; causalml's forest is a classifier). Each needs its extra:
pip install 'methodkit[cuvet]'.
"""

from __future__ import annotations

import numpy as np

from methodkit.core.errors import MissingExtraError, UsageError
from methodkit.tools.cuvet.baselines import LGBM_PARAMS
from methodkit.tools.cuvet.data import RCT

MISSING = -1e9
URF_PARAMS = {"n_estimators": 20, "max_depth": 5, "min_samples_leaf": 100, "min_samples_treatment": 20}


def _lgbm(seed: int, threads: int, classifier: bool = False):
    import lightgbm as lgb

    params = {**LGBM_PARAMS, "random_state": seed, "n_jobs": threads or None}
    return lgb.LGBMClassifier(**params) if classifier else lgb.LGBMRegressor(**params)


def _no_nan(X: np.ndarray) -> np.ndarray:
    """Missing features as a value below every real one (tree learners then split them off)."""
    return np.nan_to_num(X, nan=MISSING)


def _binary(y: np.ndarray) -> bool:
    return bool(np.isin(np.unique(y), [0.0, 1.0]).all())


def _xlearner_tau(train: RCT, target: np.ndarray, X: np.ndarray, seed: int, threads: int) -> np.ndarray:
    """(n, K+1) X-learner CATE of `target` for every arm against control (column 0 = 0)."""
    try:
        from econml.metalearners import XLearner
    except ImportError:
        raise MissingExtraError("econml", "cuvet") from None
    from sklearn.dummy import DummyClassifier

    est = XLearner(
        models=_lgbm(seed, threads),
        cate_models=_lgbm(seed, threads),
        propensity_model=DummyClassifier(strategy="prior"),  # an RCT: the arm shares are the propensities
    )
    est.fit(target, train.t, X=_no_nan(train.X))  # econml refuses NaN; the sentinel keeps missing apart
    tau = np.zeros((len(X), train.n_arms))
    for a in range(1, train.n_arms):
        tau[:, a] = est.effect(_no_nan(X), T0=0, T1=a)
    return tau


def _control_value(train: RCT, X: np.ndarray, seed: int, threads: int) -> np.ndarray:
    rows = train.t == 0
    if _binary(train.y):
        return _lgbm(seed, threads, classifier=True).fit(train.X[rows], train.y[rows]).predict_proba(X)[:, 1]
    return _lgbm(seed, threads).fit(train.X[rows], train.y[rows]).predict(X)


def _incremental_cost(train: RCT, X: np.ndarray, tau_v: np.ndarray, seed: int, threads: int) -> np.ndarray:
    spec = train.cost
    if spec.column is not None:
        return _xlearner_tau(train, train.z, X, seed, threads)
    kappa = np.asarray(spec.arm_costs, float)[None, :]
    if not spec.on_outcome:
        return np.repeat(kappa - kappa[:, :1], len(X), axis=0)
    mu0 = _control_value(train, X, seed, threads)[:, None]
    return kappa * (mu0 + tau_v) - kappa[:, :1] * mu0


def xlearner_estimates(train: RCT, X: np.ndarray, seed: int = 0, threads: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(dv, dc): incremental value and cost per user and arm from econml's X-learner."""
    dv = _xlearner_tau(train, train.y, X, seed, threads)
    return dv, _incremental_cost(train, X, dv, seed, threads)


def uplift_forest_estimates(
    train: RCT, X: np.ndarray, seed: int = 0, threads: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(dv, dc) from causalml's multi-treatment uplift random forest (KL criterion); the value must be 0/1."""
    if not _binary(train.y):
        raise UsageError("lp-causalml-urf needs a 0/1 value (causalml's uplift forest is a classifier)")
    try:
        from causalml.inference.tree import UpliftRandomForestClassifier
    except ImportError:
        raise MissingExtraError("causalml", "cuvet") from None
    forest = UpliftRandomForestClassifier(
        control_name="0",
        evaluationFunction="KL",
        random_state=seed,
        n_jobs=threads or -1,
        **URF_PARAMS,
    )
    labels = train.t.astype(str)
    forest.fit(_no_nan(train.X), treatment=labels, y=train.y.astype(int))
    pred = forest.predict(_no_nan(X))  # (n, K): uplift of each treatment vs control
    order = [int(c) for c in forest.classes_[1:]] if hasattr(forest, "classes_") else list(range(1, train.n_arms))
    dv = np.zeros((len(X), train.n_arms))
    for j, arm in enumerate(order):
        dv[:, arm] = pred[:, j]
    return dv, _incremental_cost(train, X, dv, seed, threads)
