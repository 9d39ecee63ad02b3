"""Issue 35 item 1 acceptance: the planted design (synth.planted_truth), 3 seeds, budgets 20/40/60%.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 nice -n 5 python -P bench/cuvet/planted.py > bench/cuvet/planted.txt

Seed s trains on synthetic(rows, s, planted truth) and tests on seed 1000+s. Per (seed, method,
budget): the true uplift over the budget-matched uniform mix (pct of uniform's incremental value),
the oracle share, the true cost / B (the arm costs are known, so it exceeds 1 only by the test
rows' leaf shares differing from the training rows'), and for CUVET / CUVET-B the leaves, the fitted tree's splits
and its leaf betas (truth: 0.3 where x0 <= 0, 0.9 above). Target: CUVET-B's mean uplift at 40%
>= half the oracle's.
"""

from __future__ import annotations

import sys

import pandas as pd


def main() -> None:
    from methodkit.tools.cuvet import compare, synth
    from methodkit.tools.cuvet.data import CostSpec, load_rct
    from methodkit.tools.cuvet.model import fit

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
    truth = synth.planted_truth()
    spec = CostSpec(arm_costs=truth["arm_costs"], on_outcome=False)
    fracs = [0.2, 0.4, 0.6]
    out = []
    print(f"rows {rows}; seed  method  budget  true_uplift_pct  oracle_share  true_cost/B  leaves  splits  leaf_betas")
    for s in range(3):
        tr, _ = synth.synthetic(rows, s, truth)
        te, _ = synth.synthetic(rows, 1000 + s, truth)
        train, test = (load_rct(f, "treatment", "conversion", spec) for f in (tr, te))
        res = compare.run_split(
            compare.Split(train, test, te, s, 0), ["cuvet", "cuvet-b", "uniform", "oracle"], fracs, truth
        )
        for r in res:
            extra = ""
            if r["method"] in ("cuvet", "cuvet-b"):
                m = fit(train, budget=r["budget"] * train.n, use_bayes=r["method"] == "cuvet-b", seed=s)
                splits = ",".join(nd["feature"] for nd in m.nodes if nd["leaf"] < 0) or "-"
                extra = f"  {len(m.leaves)}  {splits}  {[round(lf.beta, 2) for lf in m.leaves]}"
            print(
                f"{s}  {r['method']}  {r['budget_frac']:.1f}  {r['true_uplift_pct']:+.1f}  {r['oracle_frac']:.3f}"
                f"  {r['true_cost'] / r['budget']:.4f}{extra}",
                flush=True,
            )
        out += res
    t = pd.DataFrame(out)
    mean = t.groupby(["method", "budget_frac"], sort=False)["true_uplift_pct"].mean().unstack()
    print("\nmean true uplift over uniform (pct), 3 seeds")
    print(mean.to_string(float_format=lambda v: f"{v:+.1f}"))
    b, o = mean.loc["cuvet-b", 0.4], mean.loc["oracle", 0.4]
    print(f"CUVET-B at 40%: {b:+.1f} = {b / o:.2f} of the oracle's {o:+.1f} (target >= 0.50)")


if __name__ == "__main__":
    main()
