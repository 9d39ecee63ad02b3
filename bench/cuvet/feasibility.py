"""Calibration of CUVET-B's cost-feasibility margin: how often is the true cost above B?

    nice -n 10 python -P bench/cuvet/feasibility.py [--rows 100000] [--seeds 24] > bench/cuvet/feasibility.txt

The issue asks for P(cost <= B) >= 1 - delta (delta = 0.1) under the posterior predictive. Over
many training samples (data seeds 100.., 200k-row test sets from seeds 5000.., truth seed 0,
budgets 20/40/60%) the share of runs whose true expected cost exceeds B should be <= delta.
One line per run: seed, budget, true cost / B, predicted P(cost <= B), leaves, working budget / B.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    from methodkit.tools.cuvet import synth
    from methodkit.tools.cuvet.data import CostSpec, load_rct
    from methodkit.tools.cuvet.model import fit

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, default=24)
    args = parser.parse_args()
    truth = synth.synthetic_truth(0)
    spec = CostSpec(arm_costs=truth["arm_costs"], on_outcome=True)
    kappa = np.asarray(truth["arm_costs"], float)
    start, res = time.process_time(), []
    for seed in range(100, 100 + args.seeds):
        tr, _ = synth.synthetic(args.rows, seed, truth)
        data = load_rct(tr, "treatment", "conversion", spec)
        te, _ = synth.synthetic(200_000, 5000 + seed, truth)
        p = synth.true_probs(te, truth)
        X = load_rct(te, "treatment", "conversion", spec).X
        for frac in (0.2, 0.4, 0.6):
            m = fit(data, budget_frac=frac, use_bayes=True, seed=seed)
            pi = m.policy(X)[1]
            ratio = float((pi * p * kappa).sum(1).mean()) / m.budget_per_user
            res.append((seed, frac, ratio, m.feasibility, len(m.leaves), m.working_budget / m.budget_per_user))
            print(*res[-1], flush=True)
    r = np.array(res, float)
    print(f"true cost > B in {(r[:, 2] > 1 + 1e-9).sum():.0f} of {len(r)} runs; mean predicted P {r[:, 3].mean():.3f}")
    for frac in (0.2, 0.4, 0.6):
        s = r[r[:, 1] == frac]
        print(f"budget {frac}: infeasible {(s[:, 2] > 1 + 1e-9).mean():.3f}, mean true cost / B {s[:, 2].mean():.3f}")
    print(f"cpu_s {time.process_time() - start:.1f}")


if __name__ == "__main__":
    main()
