"""One-step lookahead splits (`fit --lookahead`) on the synthetic acceptance data: do they find the cohorts?

    nice -n 5 python -P bench/cuvet/lookahead.py roots > bench/cuvet/lookahead.txt
    nice -n 5 python -P bench/cuvet/lookahead.py roots --expected >> bench/cuvet/lookahead.txt
    nice -n 5 python -P bench/cuvet/lookahead.py fits --seeds 0,1,2 --fracs 0.2,0.4,0.6 >> bench/cuvet/lookahead.txt

`roots`: at the root of each seed's CUVET-B tree (500k rows, 20%; the structure half, 250k rows),
the best split gain per feature of the greedy finder, and the best two-level lookahead score over all
20 features against the best over the three true features (x0, x1, c0) only: if the true features'
score is below the noise features', no criterion of this form can pick them.
`roots --expected` does the same with every outcome replaced by its true expected value: the part of
each score that is signal (what is left for noise features is the arm-allocation noise alone).
`fits`: CUVET-B with the default greedy tree (base), with lookahead (la) and with lookahead unpruned
(la-unpr), one JSON line per (seed, budget, variant): the true share of the oracle's incremental value,
leaf_bound (the best policy constant on the leaves, from the true probabilities), leaves, true cost / B,
fit + assign CPU seconds and the leaf rules.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def _data(rows: int, seed: int, test: bool = False, expected: bool = False):
    from methodkit.tools.cuvet import synth
    from methodkit.tools.cuvet.data import CostSpec, load_rct

    truth = synth.synthetic_truth(0)
    spec = CostSpec(arm_costs=truth["arm_costs"], on_outcome=True)
    tr, _ = synth.synthetic(rows, seed, truth)
    if expected:  # each outcome replaced by its true expectation: the scores' signal part alone
        tr["conversion"] = synth.true_probs(tr, truth)[np.arange(len(tr)), tr["treatment"].to_numpy()]
    out = [load_rct(tr, "treatment", "conversion", spec), truth]
    if test:
        te, _ = synth.synthetic(rows, 1000 + seed, truth)
        out += [load_rct(te, "treatment", "conversion", spec), te]
    return out


def roots(rows: int, seeds: list[int], expected: bool = False) -> None:
    from methodkit.tools.cuvet import kernels
    from methodkit.tools.cuvet.model import fit
    from methodkit.tools.cuvet.tree import TreeParams

    for s in seeds:
        train, _ = _data(rows, s, expected=expected)
        names = train.features
        true_f = np.array([names.index(c) for c in ("x0", "x1", "c0")])
        seen = _root_scores(train, s, true_f, kernels, fit, TreeParams)
        g = seen["greedy"]
        order = np.argsort(-g)
        noise = max(g[i] for i in range(len(g)) if i not in true_f)
        print(
            f"seed {s} root greedy gain per feature (top 8): " + " ".join(f"{names[i]} {g[i]:.0f}" for i in order[:8])
        )
        print(
            f"seed {s} true features: " + " ".join(f"{names[i]} {g[i]:.0f} (rank {list(order).index(i) + 1})" for i in true_f)
            + f"; best noise feature {noise:.0f}"
        )  # fmt: skip
        (f, _, gf, sc), (tf, _, tg, tsc) = seen["look"]
        print(
            f"seed {s} lookahead: best two-level score {sc:.0f} ({names[f]}, own gain {gf:.0f}); "
            f"best over x0, x1, c0 only {tsc:.0f} ({names[true_f[tf]]}, own gain {tg:.0f})",
            flush=True,
        )


def _root_scores(train, s, true_f, kernels, fit, TreeParams) -> dict:
    """Record, at the root, the greedy gain per feature and the lookahead's best (all / true features)."""
    greedy, look = kernels.best_split, kernels.lookahead_split
    seen: dict = {}

    def per_feature(hist, n_valid, parent, *rest):
        if "greedy" not in seen:  # the first call is the root of the first round
            gains = []
            for f in range(hist.shape[0]):
                nv = np.zeros_like(n_valid)
                nv[f] = n_valid[f]
                ff, _, g = greedy(hist, nv, parent, *rest)
                gains.append(g if ff >= 0 else 0.0)
            seen["greedy"] = np.array(gains)
        return greedy(hist, n_valid, parent, *rest)

    def restricted(codes_t, idx, t, y, z, rank, hist, n_valid, *rest):
        out = look(codes_t, idx, t, y, z, rank, hist, n_valid, *rest)
        if "look" not in seen:
            sub = look(
                np.ascontiguousarray(codes_t[true_f]), idx, t, y, z, np.ascontiguousarray(rank[true_f]),
                np.ascontiguousarray(hist[true_f]), n_valid[true_f], *rest,
            )  # fmt: skip
            seen["look"] = (out, sub)
        return out

    kernels.best_split, kernels.lookahead_split = per_feature, restricted
    try:
        fit(train, budget_frac=0.2, use_bayes=True, seed=s, pruned=False, params=TreeParams(max_depth=1))
        fit(train, budget_frac=0.2, use_bayes=True, seed=s, pruned=False, params=TreeParams(2, lookahead=True))
    finally:
        kernels.best_split, kernels.lookahead_split = greedy, look
    return seen


def fits(rows: int, seeds: list[int], fracs: list[float], variants: list[str]) -> None:
    from methodkit.tools.cuvet import baselines, synth
    from methodkit.tools.cuvet.model import fit
    from methodkit.tools.cuvet.tree import TreeParams

    for s in seeds:
        train, truth, test, te = _data(rows, s, test=True)
        kappa = np.asarray(truth["arm_costs"], float)
        probs = synth.true_probs(te, truth)
        ctl = float(probs[:, 0].mean())
        for frac in fracs:
            for v in variants:
                p = TreeParams(lookahead="la" in v)
                t0 = time.process_time()
                m = fit(train, budget_frac=frac, use_bayes=True, seed=s, params=p, pruned="unpr" not in v)
                leaf, pi, _ = m.policy(test.X)
                cpu = time.process_time() - t0
                b = m.budget_per_user
                best = float((baselines.oracle(probs, kappa, b) * probs).sum(1).mean())
                share = (float((pi * probs).sum(1).mean()) - ctl) / (best - ctl)
                bound = float((baselines.cell_oracle(leaf, probs, kappa, b) * probs).sum(1).mean())
                cost = float((pi * probs * kappa).sum(1).mean())
                row = {
                    "seed": s, "frac": frac, "v": v, "share": round(share, 4),
                    "bound": round((bound - ctl) / (best - ctl), 4), "leaves": len(m.leaves), "feas": cost <= b,
                    "cost_ratio": round(cost / b, 4), "cpu": round(cpu, 1), "rules": [lf.rule for lf in m.leaves],
                }  # fmt: skip
                print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["roots", "fits"])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--fracs", default="0.2,0.4,0.6")
    parser.add_argument("--variants", default="base,la,la-unpr")
    parser.add_argument("--expected", action="store_true", help="roots: outcomes replaced by their true expectation")
    args = parser.parse_args()
    seeds = [int(v) for v in args.seeds.split(",")]
    if args.what == "roots":
        roots(args.rows, seeds, args.expected)
    else:
        fits(args.rows, seeds, [float(v) for v in args.fracs.split(",")], args.variants.split(","))


if __name__ == "__main__":
    main()
