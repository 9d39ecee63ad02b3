"""The victim: LightGBM trained with fixed parameters, its metrics, and its trees as arrays."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import RunFailure, UsageError

# LightGBM's own defaults (100 trees, 31 leaves, lr 0.1), made reproducible.
DEFAULT_PARAMS = {
    "objective": "binary",
    "num_leaves": 31,
    "learning_rate": 0.1,
    "deterministic": True,
    "force_col_wise": True,
    "verbose": -1,
}
_ROUND_KEYS = ("num_boost_round", "n_estimators", "num_iterations", "num_iteration", "num_tree", "num_trees")


@dataclass
class Victim:
    """How the victim trains: parameters, number of rounds, threads and seed."""

    params: dict = field(default_factory=lambda: dict(DEFAULT_PARAMS))
    rounds: int = 100
    threads: int = 1
    seed: int = 0

    @classmethod
    def from_json(cls, text: str | None, threads: int = 1, seed: int = 0) -> Victim:
        """Defaults updated by a --lgb-params JSON object."""
        params = dict(DEFAULT_PARAMS)
        rounds = 100
        if text:
            try:
                extra = json.loads(text)
            except json.JSONDecodeError as exc:
                raise UsageError(f"--lgb-params: invalid JSON ({exc.msg})") from None
            if not isinstance(extra, dict):
                raise UsageError("--lgb-params must be a JSON object, e.g. '{\"num_leaves\": 15}'")
            for key in _ROUND_KEYS:
                if key in extra:
                    rounds = int(extra.pop(key))
            if rounds < 1:
                raise UsageError("--lgb-params: the number of trees must be at least 1")
            objective = extra.get("objective", "binary")
            if objective != "binary":
                raise UsageError(f"--lgb-params: only the binary objective is supported, not {objective!r}")
            params.update(extra)
            _check_params(params, extra)
        return cls(params=params, rounds=rounds, threads=threads, seed=seed)

    def full_params(self) -> dict:
        return {**self.params, "num_threads": self.threads, "seed": self.seed}

    @property
    def learning_rate(self) -> float:
        return float(self.params.get("learning_rate", self.params.get("eta", 0.1)))

    @property
    def lambda_l2(self) -> float:
        for key in ("lambda_l2", "reg_lambda", "lambda"):
            if key in self.params:
                return float(self.params[key])
        return 0.0

    def fit(self, X: np.ndarray, y: np.ndarray, cat_idx: list[int], reference=None):
        """Train from scratch: bins recomputed from X, as a real victim would, unless `reference`
        (a constructed lgb.Dataset, see `bins`) lends its bin boundaries (--fast-bins)."""
        import lightgbm as lgb

        params = self.full_params()
        try:
            data = lgb.Dataset(
                X,
                label=y,
                categorical_feature=cat_idx or "auto",
                params=params,
                reference=reference,
                free_raw_data=True,
            )
            return lgb.train(params, data, num_boost_round=self.rounds)
        except lgb.basic.LightGBMError as exc:
            raise RunFailure(f"LightGBM failed: {str(exc).strip().splitlines()[0]}") from None

    def bins(self, X: np.ndarray, y: np.ndarray, cat_idx: list[int]):
        """A constructed lgb.Dataset whose bin boundaries later fits reuse (--fast-bins)."""
        import lightgbm as lgb

        params = self.full_params()
        try:
            data = lgb.Dataset(X, label=y, categorical_feature=cat_idx or "auto", params=params, free_raw_data=False)
            return data.construct()
        except lgb.basic.LightGBMError as exc:
            raise RunFailure(f"LightGBM failed: {str(exc).strip().splitlines()[0]}") from None

    def describe(self) -> dict:
        import lightgbm as lgb

        return {"params": self.full_params(), "rounds": self.rounds, "lightgbm": lgb.__version__}


def metrics(booster, X: np.ndarray, y: np.ndarray) -> dict:
    """F1 of the positive class, accuracy and mean logloss at threshold 0.5."""
    p = booster.predict(X)
    return scores(p, y)


def scores(p: np.ndarray, y: np.ndarray) -> dict:
    pred = p >= 0.5
    truth = y >= 0.5
    tp = float(np.sum(pred & truth))
    fp = float(np.sum(pred & ~truth))
    fn = float(np.sum(~pred & truth))
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn > 0 else 0.0
    q = np.clip(p, 1e-15, 1 - 1e-15)
    logloss = float(-np.mean(truth * np.log(q) + (~truth) * np.log(1 - q)))
    return {"f1": f1, "acc": float(np.mean(pred == truth)), "logloss": logloss}


# ---------------------------------------------------------------- trees as arrays


@dataclass
class Trees:
    """Leaf values (T, max_leaves) with the initial score b0 taken out of tree 0, and the splits."""

    leaf_values: np.ndarray
    n_leaves: np.ndarray
    b0: float
    learning_rate: float
    splits: list[tuple[int, float, float]]  # (feature, threshold, gain) of every numerical split


def initial_score(y: np.ndarray, params: dict) -> float:
    """LightGBM's boost_from_average for binary logloss: logit of the mean label (0 when switched off)."""
    if not params.get("boost_from_average", True):
        return 0.0
    mean = float(np.clip(np.mean(y), 1e-15, 1 - 1e-15))
    return float(np.log(mean / (1.0 - mean)))


def parse_trees(booster, y_train: np.ndarray, params: dict) -> Trees:
    """Read leaf values and splits from dump_model(), as tree_influence's LightGBM parser does."""
    dump = booster.dump_model()
    infos = dump["tree_info"]
    n_leaves = np.array([int(info["num_leaves"]) for info in infos], dtype=np.int64)
    values = np.zeros((len(infos), max(int(n_leaves.max()), 1)))
    splits: list[tuple[int, float, float]] = []
    for t, info in enumerate(infos):
        stack = [info["tree_structure"]]
        while stack:
            node = stack.pop()
            if "split_index" in node:
                if node.get("decision_type") == "<=":
                    splits.append((int(node["split_feature"]), float(node["threshold"]), float(node["split_gain"])))
                stack += [node["left_child"], node["right_child"]]
            else:
                values[t, int(node.get("leaf_index", 0))] = float(node["leaf_value"])
    b0 = initial_score(y_train, params)
    values[0, : n_leaves[0]] -= b0
    lr = float(params.get("learning_rate", 0.1))
    return Trees(values, n_leaves, b0, lr, splits)


def leaf_indices(booster, X: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(booster.predict(X, pred_leaf=True).astype(np.int64).reshape(len(X), -1))


def _check_params(params: dict, extra: dict) -> None:
    """Refuse a bad --lgb-params value before any work, naming the parameter (LightGBM's own message
    says neither which key nor that it came from the command line). A one-round fit on a tiny table
    with the full set, then each user key alone to find the culprit; LightGBM's [Fatal] line is muted."""
    import os
    import sys

    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 2)), np.arange(40) % 2

    def fails(trial: dict) -> str | None:
        try:
            lgb.train(trial, lgb.Dataset(X, label=y, params=trial), num_boost_round=1)
        except (lgb.basic.LightGBMError, ValueError, TypeError) as exc:
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return text.split(" at /")[0]  # LightGBM's source location says nothing to a user
        return None

    # LightGBM writes its [Fatal] line straight to the stderr descriptor: silence it while we probe
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        if fails({**params, "verbose": -1}) is None:
            return
        for key, value in extra.items():
            message = fails({**DEFAULT_PARAMS, key: value, "verbose": -1})
            if message is not None:
                raise UsageError(f"--lgb-params: bad value {value!r} for '{key}' (LightGBM: {message})")
        raise UsageError(f"--lgb-params: LightGBM refuses this combination ({fails(params)})")
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
