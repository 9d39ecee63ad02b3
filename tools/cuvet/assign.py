"""Turning a fitted model into per-user assignments, and assignments back into a policy."""

from __future__ import annotations

import numpy as np
import pandas as pd

from methodkit.core.errors import DataError
from methodkit.tools.cuvet.data import encode_features
from methodkit.tools.cuvet.model import CuvetModel


def _hash_order(ids: np.ndarray, seed: int) -> np.ndarray:
    """A seeded pseudo-random but reproducible rank of each id (independent of row order)."""
    key = f"cuvet{seed:011d}"[-16:]
    return pd.util.hash_array(np.asarray(ids).astype(str).astype(object), hash_key=key).astype(np.uint64)


def assign(
    model: CuvetModel, frame: pd.DataFrame, *, budget: float | None = None, id_col: str | None = None, seed: int = 0
) -> tuple[pd.DataFrame, dict]:
    """Per-user arm from the model: (table, summary). `budget` (total) re-solves lam for these users."""
    name = frame.attrs.get("source", "input")
    X, _ = encode_features(frame, model.features, model.levels)
    if id_col is not None:
        from methodkit.core.io import require_columns

        require_columns(frame, [id_col], "--id")
        ids = frame[id_col].to_numpy()
        dup = pd.Series(ids).duplicated().to_numpy()
        if dup.any():
            raise DataError(f"{name}: duplicate id {ids[np.flatnonzero(dup)[0]]!r} in column '{id_col}'")
    else:
        ids = np.arange(len(frame), dtype=np.int64)
    n = len(frame)
    per_user = None if budget is None else budget / n
    if per_user is not None and per_user > model.max_spend:
        per_user = model.max_spend
    leaf, pi, mixes = model.policy(X, per_user)
    arm = np.zeros(n, dtype=np.int64)
    rank = _hash_order(ids, seed)
    for k, mix in enumerate(mixes):
        rows = np.flatnonzero(leaf == k)
        arms = sorted(mix, key=lambda a: model.leaves[k].dc[model.leaves[k].arms.index(a)])
        if len(arms) == 1:
            arm[rows] = arms[0]
            continue
        cheap, dear = arms
        rows = rows[np.argsort(rank[rows], kind="stable")]
        m = int(np.floor(mix[dear] * len(rows)))
        arm[rows[:m]] = dear
        arm[rows[m:]] = cheap
    dc = np.zeros((len(model.leaves), model.n_arms))
    dv = np.zeros_like(dc)
    for k, lf in enumerate(model.leaves):
        for a, c, v in zip(lf.arms, lf.dc, lf.dv):
            dc[k, a], dv[k, a] = c, v
    table = pd.DataFrame(
        {
            "id": ids,
            "leaf": leaf,
            "arm": arm,
            "p_arm": pi[np.arange(n), arm],
            "exp_cost": (pi * dc[leaf]).sum(1),
            "exp_value": (pi * dv[leaf]).sum(1),
        }
    )
    for a in range(model.n_arms):
        table[f"pi_{a}"] = pi[:, a]
    planned = float(table["exp_cost"].sum())
    info = {
        "n": n,
        "variant": model.variant,
        "budget": (per_user if per_user is not None else model.budget_per_user) * n,
        "planned_cost": planned,
        "planned_value": float(table["exp_value"].sum()),
        "realized_cost_of_split": float(dc[leaf, arm].sum()),
        "arm_counts": np.bincount(arm, minlength=model.n_arms).tolist(),
        "leaves": len(model.leaves),
        "seed": seed,
    }
    return table, info


def policy_from_assignment(table: pd.DataFrame, data, deterministic: bool, name: str) -> tuple[np.ndarray, float]:
    """(pi (n, K+1) aligned with data's rows, planned cost per user) from an `assign` table."""
    from methodkit.core.io import require_columns

    table.attrs.setdefault("source", name)
    require_columns(table, ["id", "arm"])
    index = pd.Index(table["id"].to_numpy())
    if not index.is_unique:
        raise DataError(f"{name}: duplicate ids in the assignment")
    pos = index.get_indexer(pd.Index(data.ids))
    if (pos < 0).any():
        missing = data.ids[np.flatnonzero(pos < 0)[0]]
        raise DataError(f"{name}: no assignment for id {missing!r} of the evaluation data; pass the same --id")
    k = data.n_arms
    pi_cols = [f"pi_{a}" for a in range(k)]
    if not deterministic and all(c in table.columns for c in pi_cols):
        pi = table[pi_cols].to_numpy(float)[pos]
    else:
        arm = table["arm"].to_numpy()[pos].astype(np.int64)
        if (arm < 0).any() or (arm >= k).any():
            raise DataError(f"{name}: an assigned arm is outside 0..{k - 1}")
        pi = np.zeros((data.n, k))
        pi[np.arange(data.n), arm] = 1.0
    planned = float(table["exp_cost"].to_numpy(float)[pos].mean()) if "exp_cost" in table else float("nan")
    return pi, planned
