"""Why CUVET-B misses 0.90 of the oracle at the 20% budget: what partitions are worth, and what trees grow.

    nice -n 10 python -P bench/cuvet/partition_study.py > bench/cuvet/partition_study.txt

Same data as bench/cuvet/synthetic.py (500k train seeds 0-2, test seeds 1000-1002, truth seed 0),
budget 20%. Every "bound" is the oracle share of the best policy constant on a partition's cells,
from the true probabilities (baselines.cell_oracle): no leaf fit, pruning or leaf smoothing of that
partition can do better. Prints (1) fixed partitions of the true cohorts (seed-0 test set),
(2) grown, unpruned trees under other split criteria (plain L-gain, CUVET-B without its split
prior, a tight prior), (3) trees offered only the three true features x0, x1, c0.
"""

from __future__ import annotations

import numpy as np

ROWS = 500_000
FRAC = 0.2


def main() -> None:
    from methodkit.tools.cuvet import baselines, synth
    from methodkit.tools.cuvet import model as cuvet_model
    from methodkit.tools.cuvet.compare import fit_max_spend
    from methodkit.tools.cuvet.data import CostSpec, load_rct

    truth = synth.synthetic_truth(0)
    spec = CostSpec(arm_costs=truth["arm_costs"], on_outcome=True)
    kappa = np.asarray(truth["arm_costs"], float)

    def share(pi, p, best, ctl):
        return (float((pi * p).sum(1).mean()) - ctl) / (best - ctl)

    print("(1) partitions of the true cohorts, seed-0 test set, budget 20%: bound")
    tr, _ = synth.synthetic(ROWS, 0, truth)
    te, _ = synth.synthetic(ROWS, 1000, truth)
    p = synth.true_probs(te, truth)
    b = FRAC * fit_max_spend(load_rct(tr, "treatment", "conversion", spec))
    ctl, best = float(p[:, 0].mean()), float((baselines.oracle(p, kappa, b) * p).sum(1).mean())
    k = synth.cohort_of(te)
    parts = {"root": np.zeros(len(te), int), "x0": k // 4, "c0": k % 2, "x0,x1": k // 2, "x0,c0": (k // 4) * 2 + k % 2}
    parts["8 cohorts"] = k
    for name, cells in parts.items():
        print(f"  {name}  {share(baselines.cell_oracle(cells, p, kappa, b), p, best, ctl):.3f}", flush=True)

    print("(2, 3) grown unpruned trees at 20%: seed  variant  leaves  realized_share  bound  root_feature")
    variants = [
        ("plain L-gain", False, None, None),
        ("CUVET-B, no split prior", True, (1e6, 1e6), None),
        ("CUVET-B, tight split prior (0.3, 0.05)", True, (0.3, 0.05), None),
        ("CUVET-B, only x0 x1 c0 offered", True, None, ["x0", "x1", "c0"]),
    ]
    default_sd = cuvet_model.SPLIT_PRIOR_SD
    for seed in range(3):
        tr, _ = synth.synthetic(ROWS, seed, truth)
        te, _ = synth.synthetic(ROWS, 1000 + seed, truth)
        p = synth.true_probs(te, truth)
        ctl = float(p[:, 0].mean())
        for name, bayes, sd, cols in variants:
            keep = ["id", "treatment", "conversion", *cols] if cols else list(tr.columns)
            train = load_rct(tr[keep], "treatment", "conversion", spec)
            X = load_rct(te[keep], "treatment", "conversion", spec).X
            cuvet_model.SPLIT_PRIOR_SD = sd or default_sd
            try:
                m = cuvet_model.fit(train, budget_frac=FRAC, use_bayes=bayes, seed=seed, pruned=False)
            finally:
                cuvet_model.SPLIT_PRIOR_SD = default_sd
            b = m.budget_per_user
            best = float((baselines.oracle(p, kappa, b) * p).sum(1).mean())
            leaf, pi, _ = m.policy(X)
            bound = share(baselines.cell_oracle(leaf, p, kappa, b), p, best, ctl)
            print(
                f"  {seed}  {name}  {len(m.leaves)}  {share(pi, p, best, ctl):.3f}  {bound:.3f}"
                f"  {m.nodes[0].get('feature', '-')}",
                flush=True,
            )


if __name__ == "__main__":
    main()
