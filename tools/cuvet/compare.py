"""The full comparison: every method fit on training rows, judged on held-out rows.

Budgets are fractions of the per-user cost of giving everyone the costliest arm: with a
synthetic truth its true expected value on the test rows (the issue's definition, exact),
otherwise its estimate on the training rows. Value and cost are IPW estimates on the test
rows, and with a synthetic truth also the true expected value and cost and the fraction of
the oracle's incremental value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from methodkit.core.errors import UsageError
from methodkit.core.progress import ProgressCallback, silent
from methodkit.tools.cuvet import baselines, synth
from methodkit.tools.cuvet import evaluate as ev
from methodkit.tools.cuvet.data import RCT
from methodkit.tools.cuvet.model import fit
from methodkit.tools.cuvet.tree import TreeParams

METHODS = (
    "cuvet",
    "cuvet-b",
    "cuvet-lp",
    "cuvet-b-lp",
    "uniform",
    "roi-greedy",
    "lp-tlearner",
    "lp-xlearner",
    "lp-causalml-urf",
    "oracle",
)


@dataclass
class Split:
    train: RCT
    test: RCT
    test_frame: pd.DataFrame | None
    seed: int
    fold: int


def kfold(data: RCT, frame: pd.DataFrame | None, folds: int, seed: int) -> list[Split]:
    rng = np.random.default_rng(seed)
    fold_of = rng.permutation(data.n) % folds
    out = []
    for f in range(folds):
        tr, te = np.flatnonzero(fold_of != f), np.flatnonzero(fold_of == f)
        out.append(Split(data.subset(tr), data.subset(te), None if frame is None else frame.iloc[te], seed, f))
    return out


def run_split(
    split: Split,
    methods: list[str],
    budget_fracs: list[float],
    truth: dict | None = None,
    params: TreeParams | None = None,
    threads: int = 0,
    dr: bool = False,
    xp=None,
) -> list[dict]:
    """All methods at all budgets on one train/test split; dr adds doubly robust value and cost columns.

    xp (cupy) solves the per-user LPs on the GPU; everything else stays on the CPU.
    """
    if "oracle" in methods and truth is None:
        raise UsageError("method 'oracle' needs the true effects: only synthetic data has them (--truth)")
    train, test = split.train, split.test
    e = ev.propensities(test)
    probs = synth.true_probs(split.test_frame, truth) if truth is not None else None
    kappa = np.asarray(truth["arm_costs"], float) if truth is not None else None
    on_outcome = bool(truth.get("cost_on_outcome", True)) if truth is not None else True
    tl = None
    if {"lp-tlearner", "roi-greedy"} & set(methods):
        tl = baselines.TLearner(train, seed=split.seed, threads=threads)
        tl_dv, tl_dc = tl.predict(test.X)
    meta = {}
    if "lp-xlearner" in methods:
        from methodkit.tools.cuvet.meta_baselines import xlearner_estimates

        meta["lp-xlearner"] = xlearner_estimates(train, test.X, split.seed, threads)
    if "lp-causalml-urf" in methods:
        from methodkit.tools.cuvet.meta_baselines import uplift_forest_estimates

        meta["lp-causalml-urf"] = uplift_forest_estimates(train, test.X, split.seed, threads)
    dr_models = None
    if dr:
        from methodkit.tools.cuvet.doubly_robust import dr_terms, outcome_models

        dr_models = outcome_models(test, seed=split.seed, threads=threads)
        control = np.zeros((test.n, test.n_arms))
        control[:, 0] = 1.0
        dr_cost_control = dr_terms(control, test, e, *dr_models)[1]
    # the max-arm cost the budget fractions refer to: exact with a truth, else the training estimate
    max_spend = true_max_spend(probs, kappa, on_outcome) if probs is not None else fit_max_spend(train)
    rows = []
    for frac in budget_fracs:
        b = frac * max_spend
        models = {}
        for variant in ("cuvet", "cuvet-b"):
            if variant in methods or f"{variant}-lp" in methods:
                models[variant] = fit(
                    train, budget=b * train.n, use_bayes=variant == "cuvet-b", seed=split.seed, params=params
                )
        policies: dict[str, Callable[[], np.ndarray]] = {
            "cuvet": lambda models=models, b=b: models["cuvet"].policy(test.X)[1],
            "cuvet-b": lambda models=models, b=b: models["cuvet-b"].policy(test.X)[1],
            "cuvet-lp": lambda models=models, b=b: baselines.lp_policy(
                *baselines.leaf_estimates(models["cuvet"], test.X), b, xp
            ),
            "cuvet-b-lp": lambda models=models, b=b: baselines.lp_policy(
                *baselines.leaf_estimates(models["cuvet-b"], test.X), b, xp
            ),
            "uniform": lambda models=models, b=b: baselines.uniform(train, b, test.n),
            "roi-greedy": lambda models=models, b=b: baselines.roi_greedy(tl_dv, tl_dc, b),
            "lp-tlearner": lambda models=models, b=b: baselines.lp_policy(tl_dv, tl_dc, b, xp),
            "oracle": lambda models=models, b=b: baselines.oracle(probs, truth["arm_costs"], b, xp, on_outcome),
            **{m: (lambda m=m, b=b: baselines.lp_policy(*meta[m], b, xp)) for m in meta},
        }
        ref = policies["uniform"]()
        ref_point = ev.point(ref, test, e)
        true_ref = true_ctl = true_oracle = None
        if probs is not None:
            true_ctl = float(probs[:, 0].mean())
            true_oracle = float((policies["oracle"]() * probs).sum(1).mean())
        for method in methods:
            pi = policies[method]()
            pt = ev.point(pi, test, e)
            denom = ref_point["value"] - pt["value_control"]
            row = {
                "method": method,
                "seed": split.seed,
                "fold": split.fold,
                "budget_frac": frac,
                "budget": b,
                "budget_basis": "true" if probs is not None else "train",
                "n_train": train.n,
                "n_test": test.n,
                **pt,
                "feasible": bool(pt["cost"] <= b * (1 + 1e-9)),
                "uplift_pct": 100.0 * (pt["value"] - ref_point["value"]) / denom if denom else float("nan"),
            }
            if dr_models is not None:
                v_dr, c_dr = dr_terms(pi, test, e, *dr_models)
                cost_dr = float((c_dr - dr_cost_control).mean())
                row.update(
                    {"value_dr": float(v_dr.mean()), "cost_dr": cost_dr, "feasible_dr": cost_dr <= b * (1 + 1e-9)}
                )
            if probs is not None:
                tv = float((pi * probs).sum(1).mean())
                cost = baselines.true_cost(probs, kappa, on_outcome)
                tc = float((pi * cost).sum(1).mean() - cost[:, 0].mean())
                true_ref = float((ref * probs).sum(1).mean())
                row.update(
                    {
                        "true_value": tv,
                        "true_cost": tc,
                        "true_feasible": bool(tc <= b * (1 + 1e-9)),
                        "oracle_frac": (tv - true_ctl) / (true_oracle - true_ctl),
                        "true_uplift_pct": 100.0 * (tv - true_ref) / (true_ref - true_ctl),
                    }
                )
            if method in models:
                row["leaves"] = len(models[method].leaves)
                if probs is not None:  # what the best policy constant on these leaves would get
                    cells = models[method].leaf_of(test.X)
                    bound = baselines.cell_oracle(cells, probs, kappa, b, on_outcome)
                    bound = float((bound * probs).sum(1).mean())
                    row["leaf_bound"] = (bound - true_ctl) / (true_oracle - true_ctl)
            rows.append(row)
    return rows


def true_max_spend(probs: np.ndarray, kappa: np.ndarray, on_outcome: bool = True) -> float:
    """Per-user true expected incremental cost of giving everyone the costliest arm."""
    cost = baselines.true_cost(probs, kappa, on_outcome)
    return float((cost - cost[:, :1]).mean(0).max())


def fit_max_spend(train: RCT) -> float:
    from methodkit.tools.cuvet import kernels

    stats = kernels.arm_stats(np.arange(train.n, dtype=np.int64), train.t, train.y, train.z, train.n_arms)
    dc, _, _, ok = kernels.increments(stats)
    return float(dc[ok].max())


def add_aucc(table: pd.DataFrame) -> pd.DataFrame:
    """Per (method, seed, fold): the AUCC of IPW incremental value over the budget grid."""
    gain = table["value"] - table["value_control"]
    keyed = table.assign(_gain=gain)
    out = keyed.groupby(["method", "seed", "fold"], sort=False).apply(
        lambda g: ev.aucc(g["budget"], g["_gain"]), include_groups=False
    )
    return table.merge(out.rename("aucc").reset_index(), on=["method", "seed", "fold"])


def run(
    splits: list[Split],
    methods: list[str],
    budget_fracs: list[float],
    truth: dict | None = None,
    params: TreeParams | None = None,
    progress: ProgressCallback = silent,
    threads: int = 0,
    dr: bool = False,
    xp=None,
) -> pd.DataFrame:
    rows = []
    for i, split in enumerate(splits):
        progress("bench", i, len(splits))
        rows += run_split(split, methods, budget_fracs, truth, params, threads, dr, xp)
    progress("bench", len(splits), len(splits))
    return add_aucc(pd.DataFrame(rows))


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds and folds per (method, budget)."""
    cols = [
        c
        for c in ("value", "cost", "value_dr", "cost_dr", "uplift_pct", "true_uplift_pct", "oracle_frac")
        if c in table
    ]
    g = table.groupby(["method", "budget_frac"], sort=False)
    out = g[cols].mean()
    out["feasible"] = g["feasible"].mean()
    if "feasible_dr" in table:
        out["feasible_dr"] = g["feasible_dr"].mean()
    if "true_feasible" in table:
        out["true_feasible"] = g["true_feasible"].mean()
    out["runs"] = g.size()
    return out.reset_index()
