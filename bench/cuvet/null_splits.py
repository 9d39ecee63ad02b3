"""False-split control: how often a fitted tree keeps any split where there is no heterogeneity.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 nice -n 5 python -P bench/cuvet/null_splits.py 3000,20000 > bench/cuvet/null_splits.txt

The planted design with one curve for everyone (alpha of cohort 1, beta 0.5), 20 data seeds x
{CUVET, CUVET-B} per size, 40% budget, arm costs fixed or paid on conversion; per pruning score
(tree.prune: the raw arm means, the power-law curve, auto = the lower-variance of the two), the
number of the 40 fits that keep a split.
"""

from __future__ import annotations

import sys


def main() -> None:
    from methodkit.tools.cuvet import synth
    from methodkit.tools.cuvet import tree as T
    from methodkit.tools.cuvet.data import CostSpec, load_rct
    from methodkit.tools.cuvet.model import fit

    null = synth.planted_truth()
    null["alpha"], null["beta"] = [null["alpha"][1]] * 4, [0.5] * 4
    for n in [int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "3000,20000").split(",")]:
        for on_outcome in (False, True):
            spec = CostSpec(arm_costs=null["arm_costs"], on_outcome=on_outcome)
            kept = {}
            for scoring in ("arms", "curve", "auto"):
                kept[scoring] = 0
                for s in range(20):
                    frame, _ = synth.synthetic(n, 700 + s, null)
                    data = load_rct(frame, "treatment", "conversion", spec)
                    for bayes in (False, True):
                        params = T.TreeParams(prune_scoring=scoring)
                        kept[scoring] += (
                            len(fit(data, budget_frac=0.4, use_bayes=bayes, seed=s, params=params).leaves) > 1
                        )
            cost = "cost_on_outcome" if on_outcome else "fixed"
            print(n, cost, {k: f"{v}/40" for k, v in kept.items()}, flush=True)


if __name__ == "__main__":
    main()
