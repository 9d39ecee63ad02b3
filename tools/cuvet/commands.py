"""What cuvet-assign's verbs do between reading their inputs and writing their outputs.

The command module (cli/cuvet_assign.py) parses flags, reads files and writes results; the flag
checks that need no data, the RCT assembly from a table, the evaluation of an assignment and the
bench's splits live here, so that the library can call them the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from methodkit.core.errors import CheckFailed, DataError, UsageError
from methodkit.core.io import require_columns
from methodkit.tools.cuvet.data import RCT, CostSpec, load_rct, parse_arm_costs

if TYPE_CHECKING:
    import pandas as pd


def cost_spec(treatment, value, cost, arm_costs, cost_on_outcome) -> CostSpec:
    """Check the column and cost flags before any data is read (a bad flag fails fast on a large input)."""
    if treatment is None:
        raise UsageError("pass --treatment COL (the arm column)")
    if value is None:
        raise UsageError("pass --value COL (the outcome column)")
    return CostSpec(cost, parse_arm_costs(arm_costs), cost_on_outcome)


def check_budget(budget: float | None, budget_frac: float | None) -> None:
    if (budget is None) == (budget_frac is None):
        raise UsageError("pass exactly one of --budget B and --budget-frac f")
    if not (budget if budget is not None else budget_frac) > 0:
        raise DataError(f"the budget must be positive, got {budget if budget is not None else budget_frac}")


def rct(
    frame,
    treatment,
    value,
    spec,
    id_col,
    features=None,
    exclude=(),
    strata=None,
    categorical=(),
    numeric=(),
    levels=None,
) -> RCT:
    """The RCT of a table under the column flags (--features a comma list, --strata a column).

    `levels` (a training table's) codes the categorical features as that table did (bench --test)."""
    feats = [f for f in features.split(",") if f] if features else None
    data = load_rct(
        frame,
        treatment,
        value,
        spec,
        feats,
        id_col,
        tuple(exclude),
        categorical=tuple(categorical),
        numeric=tuple(numeric),
        levels=levels,
    )
    if strata is not None:
        require_columns(frame, [strata], "--strata")
        data.strata = frame[strata].to_numpy()[data.rows]
    return data


def fit_model(data: RCT, opts: dict, seed: int, progress):
    """fit's model from its flags (Numba loads here: only once the input is known to be good)."""
    from methodkit.tools.cuvet.model import fit
    from methodkit.tools.cuvet.tree import TreeParams

    params = TreeParams(opts["max_depth"], opts["min_leaf"], opts["min_arm"], lookahead=opts["lookahead"])
    return fit(data, budget=opts["budget"], budget_frac=opts["budget_frac"], use_bayes=opts["bayes"], seed=seed,
               params=params, honest=not opts["no_honest"], progress=progress)  # fmt: skip


def model_document(model, data: RCT, opts: dict) -> dict:
    """The model JSON: the model and the columns it was fitted on, with the rows dropped."""
    body = model.to_dict()
    body["data"] = {k: opts[c] for k, c in (("treatment", "treatment"), ("value", "value"), ("id", "id_col"))}
    body["data"]["dropped"] = data.dropped
    return body


def fit_summary(model, data: RCT, path: str) -> dict:
    """The one-line summary `fit -o FILE` prints beside the model it wrote."""
    return {
        "model": path,
        "variant": model.variant,
        "leaves": len(model.leaves),
        "lambda": model.lam,
        "budget_per_user": model.budget_per_user,
        "working_budget": model.working_budget,
        "planned_spend": sum(lf.share * lf.spend for lf in model.leaves),
        "beta_root": model.beta_root,
        "n": data.n,
        "dropped": data.dropped,
    }


def evaluate_assignment(
    frame: pd.DataFrame,
    table: pd.DataFrame,
    data: RCT,
    name: str,
    *,
    propensity: str | None,
    budget: float | None,
    deterministic: bool,
    strict: bool,
    n_boot: int,
    dr: bool,
    dr_folds: int,
    seed: int,
    threads=lambda: 1,
) -> tuple[dict, float]:
    """IPW (and with `dr` doubly robust) scores of the assignment `table` on the RCT; (result, budget per user).

    `threads` is called only when the DR outcome models are fitted (it applies -j then)."""
    from methodkit.tools.cuvet.assign import policy_from_assignment
    from methodkit.tools.cuvet.baselines import uniform
    from methodkit.tools.cuvet.evaluate import evaluate, propensities

    if propensity is not None:
        require_columns(frame, [propensity], "--propensity")
    pi, planned = policy_from_assignment(table, data, deterministic, name)
    e = propensities(data, frame[propensity].to_numpy(dtype=float)[data.rows] if propensity else None)
    per_user = budget / data.n if budget is not None else planned
    ref = uniform(data, per_user, data.n)
    result = evaluate(pi, ref, data, per_user, e=e, seed=seed, n_boot=n_boot, strict=strict).to_dict()
    if dr:
        from methodkit.tools.cuvet.doubly_robust import evaluate_dr

        result["dr"] = evaluate_dr(
            pi, ref, data, e, folds=dr_folds, seed=seed, n_boot=n_boot, threads=threads()
        ).to_dict()
    return result, per_user


def check_evaluation(result: dict, per_user: float, strict: bool, fail_below: float | None) -> None:
    """Exit 3 (CheckFailed) for --strict on an infeasible policy or an uplift under --fail-below."""
    if strict and not result["feasible"]:
        raise CheckFailed(
            f"not cost-feasible: cost upper 95% bound {result['cost_ci'][1]:.6g} > budget {per_user:.6g} per user"
        )
    if fail_below is not None and not result["uplift_pct"] >= fail_below:
        raise CheckFailed(f"uplift {result['uplift_pct']:.4g}% is below --fail-below {fail_below:g}")


def bench_choices(methods: str, budgets: str) -> tuple[list[str], list[float]]:
    """--methods and --budgets checked before the data is read."""
    from methodkit.tools.cuvet.compare import METHODS

    chosen = [m for m in methods.split(",") if m]
    unknown = [m for m in chosen if m not in METHODS]
    if unknown:
        raise UsageError(f"--methods: unknown {', '.join(unknown)} (known: {', '.join(METHODS)})")
    try:
        fracs = [float(b) for b in budgets.split(",") if b]
    except ValueError:
        raise UsageError(f"--budgets must be comma-separated fractions, got {budgets!r}") from None
    if not fracs or any(not 0 < b for b in fracs):
        raise UsageError(f"--budgets must be positive fractions, got {budgets!r}")
    return chosen, fracs


def bench_splits(data: RCT, frame, seeds: int, seed: int, folds: int, load_test=None) -> list:
    """Train/test splits of the bench: with `load_test` (a fresh (RCT, frame) of the held-out table per
    seed) one split per seed, else `folds` folds per seed."""
    from methodkit.tools.cuvet import compare

    splits = []
    for s in range(seeds):
        if load_test is not None:
            held, tframe = load_test()
            splits.append(compare.Split(data, held, tframe.iloc[held.rows], seed + s, 0))
        else:
            splits += compare.kfold(data, frame.iloc[data.rows], folds, seed + s)
    return splits
