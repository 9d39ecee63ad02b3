"""Where CUVET-B's share of the oracle goes, and by how much its cost misses the budget.

    nice -n 5 python -P bench/cuvet/gap.py [--seeds 0,1,2] [--rows 500000] > bench/cuvet/gap.txt
    nice -n 5 python -P bench/cuvet/gap.py --thornton > bench/cuvet/gap_thornton.txt

Synthetic (the acceptance data: synthetic(rows, seed=s) to train, seed 1000+s to test, truth
seed 0, budgets 20/40/60% of the true expected cost of giving every test user the costliest
arm). Per (seed, budget), each row is the true share of the oracle's incremental value on the
test rows, its true cost / B, the share the best policy on CUVET-B's leaves gets at that same
true cost (what the partition allows at the spend the row actually made), and its share against
the oracle at the row's own true cost:
  oracle          1 (the exact LP on the true per-user probabilities)
  partition       the best policy constant on CUVET-B's leaves (the LP on the true cell means):
                  1 - partition is the partition loss
  power law       CUVET's closed-form allocation on those leaves with each leaf's power law
                  fitted (the same WLS) on its TRUE arm points, spends realized on the true
                  frontier: partition - power law is the functional-form loss
  cuvet-b at B    the fitted CUVET-B (posterior, its frontier), allocation re-solved at the full
                  B: power law - this is the estimation loss
  cuvet-b         as fitted, after the feasibility shrink to B' <= B: the margin loss
  cohorts-power-law  the power-law row on the 8 TRUE cohorts instead of CUVET-B's leaves: the
                  functional-form loss the method would pay had the tree found the cohorts
Then the feasibility account of the fitted CUVET-B: its estimated cost / B, the standard error
of that estimate (posterior sd of the policy's per-user cost), (true cost - B) / SE, the
posterior predictive P(cost <= B) it was fitted to (>= 1 - delta = 0.9), and, for a run whose
true cost exceeds B, the working budget that would have met B and the delta the chance
constraint would have needed to choose it (delta_needed).

--thornton: plain CUVET and CUVET-B on Thornton, 5-fold cross-fitting x 3 seeds at 50% of the
max-dose cost (the issue's section 5.2): per fold the IPW cost / B, its SE, (cost - B) / SE and,
for an infeasible fold, the working budget that would have made the IPW cost <= B and the delta a
CUVET-B-style chance constraint on that model's own leaves would have needed to reach it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

DELTA_FLOOR = 1e-4  # bisection resolution of the working budget fraction


def _table(model, spend) -> np.ndarray:
    from methodkit.tools.cuvet.allocate import realize

    table = np.zeros((len(model.leaves), model.n_arms))
    for k, (s, lf) in enumerate(zip(spend, model.leaves)):
        for arm, p in realize(float(s), lf.dc, lf.arms).items():
            table[k, arm] = p
    return table


def _spend_at(model, budget: float) -> np.ndarray:
    shares = np.array([lf.share for lf in model.leaves])
    return model.leaf_spends(shares, budget)[0]


def _cost_sd(model, spend) -> float:
    """Standard error of the model's own estimate of its per-user incremental cost."""
    from methodkit.tools.cuvet.allocate import realize
    from methodkit.tools.cuvet.model import cost_moments

    _, dc_var, _ = cost_moments(model.leaves)
    var = 0.0
    for k, (s, lf) in enumerate(zip(spend, model.leaves)):
        for arm, p in realize(float(s), lf.dc, lf.arms).items():
            if arm:
                var += (lf.share * p) ** 2 * dc_var[k][arm]
    return float(np.sqrt(var))


def _est_cost(model, spend) -> float:
    from methodkit.tools.cuvet import kernels
    from methodkit.tools.cuvet.allocate import realize

    total = 0.0
    for s, lf in zip(spend, model.leaves):
        dc = kernels.increments(lf.stats)[0]
        total += lf.share * sum(p * dc[a] for a, p in realize(float(s), lf.dc, lf.arms).items() if a)
    return float(total)


def _meet_budget(model, budget: float, cost_of) -> tuple[float, float]:
    """Largest working fraction w <= 1 whose policy's cost_of(table) <= budget, and the model's P(cost <= B) there."""
    from methodkit.tools.cuvet.model import feasibility_of

    lo, hi = 0.0, 1.0
    while hi - lo > DELTA_FLOOR:
        mid = 0.5 * (lo + hi)
        if cost_of(_table(model, _spend_at(model, mid * budget))) <= budget:
            lo = mid
        else:
            hi = mid
    n_pop = sum(lf.n for lf in model.leaves)
    return lo, feasibility_of(model.leaves, _spend_at(model, lo * budget), budget, model.seed, n_pop)


def _true_curves(leaf, counts, probs, kappa, budget):
    """CUVET's closed form on the cells `leaf` with power laws fitted on their true cell-mean points.

    counts (cells x arms) are the rows behind each point: they set the WLS weights as in a fit.
    """
    from methodkit.tools.cuvet import kernels
    from methodkit.tools.cuvet.allocate import allocate, realize
    from methodkit.tools.cuvet.model import leaf_from_stats

    n_leaves = len(counts)
    size = np.bincount(leaf, minlength=n_leaves).astype(float)
    q = np.column_stack([np.bincount(leaf, weights=probs[:, a], minlength=n_leaves) for a in range(probs.shape[1])])
    q /= np.maximum(size, 1.0)[:, None]

    def stats(counts, qk):  # noise-free arm statistics of a 0/1 value with cost kappa on conversion
        return np.column_stack([counts, counts * qk, counts * qk, counts * kappa * qk, counts * kappa**2 * qk])

    root = stats(np.sum(counts, axis=0), (q * size[:, None]).sum(0) / size.sum())
    a0, b0, _, npts = kernels.fit_power_law(root, 1.0, np.zeros(2), np.zeros((2, 2)))
    beta_root = float(b0) if npts >= 2 else 1.0
    leaves = [leaf_from_stats(stats(c, qk), beta_root, 1) for c, qk in zip(counts, q)]
    shares = size / size.sum()
    alloc = allocate(
        shares, [lf.alpha for lf in leaves], [lf.beta for lf in leaves], [lf.smax for lf in leaves], budget
    )
    table = np.zeros((n_leaves, probs.shape[1]))
    for k, (s, lf) in enumerate(zip(alloc.spend, leaves)):
        for arm, p in realize(float(s), lf.dc, lf.arms).items():
            table[k, arm] = p
    return table[leaf]


def synthetic(seeds: list[int], rows: int) -> None:
    print("seed  budget  row  share  true_cost/B  partition_at_own_cost  share_at_own_cost  leaves")
    account = []
    for s in seeds:
        account += _one_seed(s, rows)
    print("\nfeasibility account of CUVET-B (true cost vs B; SE = posterior sd of its estimated cost)")
    _print_rows(account)


def _one_seed(s: int, rows: int) -> list[dict]:
    from methodkit.tools.cuvet import baselines, compare, synth
    from methodkit.tools.cuvet.data import CostSpec, load_rct
    from methodkit.tools.cuvet.model import fit

    truth = synth.synthetic_truth(0)
    kappa = np.asarray(truth["arm_costs"], float)
    spec = CostSpec(arm_costs=truth["arm_costs"], on_outcome=True)
    train = load_rct(synth.synthetic(rows, s, truth)[0], "treatment", "conversion", spec)
    te_frame, _ = synth.synthetic(rows, 1000 + s, truth)
    test = load_rct(te_frame, "treatment", "conversion", spec)
    probs = synth.true_probs(te_frame, truth)
    ctl = float(probs[:, 0].mean())
    max_spend = compare.true_max_spend(probs, kappa)
    cohort = synth.cohort_of(te_frame)
    cohort_counts = np.zeros((8, len(kappa)))
    np.add.at(cohort_counts, (cohort, test.t), 1.0)

    def value(pi):
        return float((pi * probs).sum(1).mean()) - ctl

    def cost(pi):
        return float((pi * probs * kappa).sum(1).mean())

    def oracle_value(b):
        return value(baselines.oracle(probs, kappa, b))

    account = []
    for frac in (0.2, 0.4, 0.6):
        b = frac * max_spend
        best = oracle_value(b)
        model = fit(train, budget=b * train.n, use_bayes=True, seed=s)
        leaf = model.leaf_of(test.X)
        fitted = np.array([lf.spend for lf in model.leaves])
        policies = {
            "oracle": baselines.oracle(probs, kappa, b),
            "partition": baselines.cell_oracle(leaf, probs, kappa, b),
            "power-law": _true_curves(leaf, [lf.stats[:, 0] for lf in model.leaves], probs, kappa, b),
            "cuvet-b-at-B": _table(model, _spend_at(model, b))[leaf],
            "cuvet-b": _table(model, fitted)[leaf],
            "cohorts-power-law": _true_curves(cohort, cohort_counts, probs, kappa, b),
        }
        for name, pi in policies.items():
            v, c = value(pi), cost(pi)
            own = v / oracle_value(c) if c > 0 else float("nan")
            cells = cohort if name.startswith("cohorts") else leaf
            bound_own = value(baselines.cell_oracle(cells, probs, kappa, c)) / best
            print(
                f"{s}  {frac:.1f}  {name}  {v / best:.4f}  {c / b:.4f}  {bound_own:.4f}  {own:.4f}  {len(model.leaves)}",
                flush=True,
            )
        true_c = cost(policies["cuvet-b"])
        sd = _cost_sd(model, fitted)
        row = {
            "seed": s,
            "budget": frac,
            "est_cost/B": _est_cost(model, fitted) / b,
            "true_cost/B": true_c / b,
            "se/B": sd / b,
            "excess_se": (true_c - b) / sd,
            "working/B": model.working_budget / b,
            "P(cost<=B)": model.feasibility,
        }
        if true_c > b:
            w, p = _meet_budget(model, b, lambda table, leaf=leaf: cost(table[leaf]))
            row.update({"needed_working/B": w, "delta_needed": 1 - p})
        account.append(row)
    return account


def thornton() -> None:
    from methodkit.tools.cuvet import compare, synth
    from methodkit.tools.cuvet import evaluate as ev
    from methodkit.tools.cuvet.data import CostSpec, load_rct
    from methodkit.tools.cuvet.model import fit

    frame, side = synth.thornton()
    data = load_rct(frame, "arm", "got", CostSpec(column="tinc"), exclude=("tinc",))
    rows = []
    for seed in range(3):
        for split in compare.kfold(data, frame.iloc[data.rows], 5, seed):
            e = ev.propensities(split.test)
            for variant in ("cuvet", "cuvet-b"):
                model = fit(split.train, budget_frac=0.5, use_bayes=variant == "cuvet-b", seed=seed)
                b = model.budget_per_user
                leaf = model.leaf_of(split.test.X)
                pt = ev.point(_table(model, [lf.spend for lf in model.leaves])[leaf], split.test, e)
                row = {
                    "variant": variant,
                    "seed": seed,
                    "fold": split.fold,
                    "ipw_cost/B": pt["cost"] / b,
                    "se/B": pt["cost_se"] / b,
                    "excess_se": (pt["cost"] - b) / pt["cost_se"],
                }
                if pt["cost"] > b:
                    w, p = _meet_budget(
                        model, b, lambda table, leaf=leaf, test=split.test, e=e: ev.point(table[leaf], test, e)["cost"]
                    )
                    row.update({"needed_working/B": w, "delta_needed": 1 - p})
                rows.append(row)
    _print_rows(rows)
    for variant in ("cuvet", "cuvet-b"):
        mine = [r for r in rows if r["variant"] == variant]
        need = sorted((r["delta_needed"] for r in mine if "delta_needed" in r), reverse=True)
        feasible = sum("delta_needed" not in r for r in mine)
        print(
            f"{variant}: IPW-feasible {feasible}/{len(mine)}; delta a chance constraint would need to fix the k-th "
            f"easiest infeasible fold: {', '.join(f'{d:.3f}' for d in need)}"
        )


def _print_rows(rows: list[dict]) -> None:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    print("  ".join(keys))
    for r in rows:
        print("  ".join(_fmt(r.get(k)) for k in keys), flush=True)


def _fmt(v) -> str:
    if v is None:
        return "."
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0", help="comma-separated data seeds")
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--thornton", action="store_true")
    args = parser.parse_args()
    start = time.process_time()
    if args.thornton:
        thornton()
    else:
        synthetic([int(s) for s in args.seeds.split(",")], args.rows)
    print(f"\ncpu_s {time.process_time() - start:.1f}")


if __name__ == "__main__":
    main()
