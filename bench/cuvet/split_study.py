"""Why no split survived honest pruning, measured on the planted design (synth.planted_truth), 40% budget.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 nice -n 5 python -P bench/cuvet/split_study.py > bench/cuvet/split_study.txt

(1) Per training size and seed: at the root of the structure half (CUVET-B's split prior), the
best split gain of the planted variable x0 and the largest over the 19 other features (the
gain's noise), and the honest pruning statistic of the true x0 split, in SE of the children's
minus the root's score on the estimation half, with the model-free arm score (the old rule)
and the power-law curve score (tree.prune scoring="curve"): a split is kept above PRUNE_Z.
(2) The null design (every cohort the same curve, 100k rows, 20 seeds): how often a fitted
CUVET-B tree keeps any split, per scoring and margin (the false-split control).
(3) Pruned CUVET-B trees on the planted design, per scoring / margin / min_leaf: leaves, root
feature, leaf betas (truth 0.3 for x0 <= 0, 0.9 above) and the true uplift over uniform vs
the oracle's (test seed 1000 + s).
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

FRAC = 0.4


def root_statistics(train, seed: int, prune_statistic) -> tuple[float, float, str, dict]:
    from methodkit.tools.cuvet import kernels, model
    from methodkit.tools.cuvet import tree as T
    from methodkit.tools.cuvet.binning import N_BINS, fit_binner

    m = model.fit(train, budget_frac=FRAC, use_bayes=True, seed=seed, pruned=False)
    perm = np.random.default_rng(seed).permutation(train.n)  # the split model.fit makes
    struct, est = np.sort(perm[: train.n // 2]), np.sort(perm[train.n // 2 :])
    t, y, z = train.t, train.y, train.z
    cat = [f in train.levels for f in train.features]
    binner = fit_binner(train.X[struct], cat, t[struct], y[struct], z[struct])
    codes = binner.codes(train.X)
    root = kernels.arm_stats(struct.astype(np.int64), t, y, z, train.n_arms)
    a0, b0, _, _ = kernels.fit_power_law(root, 1.0, np.zeros(2), np.zeros((2, 2)))
    mu = np.array([np.log(a0), b0])
    prec = np.diag([1.0 / model.SPLIT_PRIOR_SD[0] ** 2, 1.0 / model.SPLIT_PRIOR_SD[1] ** 2])
    hist = kernels.node_histogram(codes, struct.astype(np.int64), t, y, z, N_BINS, train.n_arms)
    gains = np.full(len(train.features), -np.inf)
    for j in range(len(train.features)):
        nv = np.zeros(len(train.features), dtype=np.int64)
        nv[j] = binner.n_valid()[j]
        f, _, g = kernels.best_split(hist, nv, root, m.lam, 2000, 50, m.beta_root, mu, prec)
        if f >= 0:
            gains[j] = g
    i0 = train.features.index("x0")
    gains_noise = np.delete(gains, i0)
    noise_name = [f for f in train.features if f != "x0"][int(np.argmax(gains_noise))]
    left = train.X[:, i0] <= 0
    two = T.Tree([T.Node(0, len(struct), left=1, right=2), T.Node(1, 0, leaf=0), T.Node(1, 0, leaf=1)])

    def stats(rows, fn):
        return [fn(rows[left[rows] == side].astype(np.int64), t, y, z, train.n_arms) for side in (True, False)]

    args = (stats(struct, kernels.arm_stats), stats(est, kernels.arm_stats), m.lam, m.beta_root, mu, prec)
    zs = {s: prune_statistic(two, *args, stats(est, kernels.arm_cross), scoring=s) for s in ("arms", "curve")}
    return float(gains[i0]), float(gains_noise.max()), noise_name, zs


def main() -> None:
    from methodkit.tools.cuvet import compare, synth
    from methodkit.tools.cuvet import tree as T
    from methodkit.tools.cuvet.data import CostSpec, load_rct
    from methodkit.tools.cuvet.model import fit

    sizes = [int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "200000,500000").split(",")]
    truth = synth.planted_truth()
    spec = CostSpec(arm_costs=truth["arm_costs"], on_outcome=False)
    print("(1) rows  seed  gain_x0  max_other_gain (feature)  z_x0_arms  z_x0_curve", flush=True)
    cases = []
    for n in sizes:
        for s in range(3):
            tr, _ = synth.synthetic(n, s, truth)
            te, _ = synth.synthetic(n, 1000 + s, truth)
            train, test = (load_rct(f, "treatment", "conversion", spec) for f in (tr, te))
            cases.append((n, s, train, test, te))
            g0, gn, name, zs = root_statistics(train, s, T.prune_statistic)
            print(f"  {n}  {s}  {g0:.1f}  {gn:.1f} ({name})  {zs['arms']:.2f}  {zs['curve']:.2f}", flush=True)

    configs = [("arms", 1.64, 2000), ("curve", 1.64, 2000), ("curve", 1.0, 2000), ("arms", 0.0, 2000)]
    null = synth.planted_truth()
    null["alpha"], null["beta"] = [null["alpha"][1]] * 4, [0.5] * 4
    print("(2) null design, 100k rows x 20 seeds: scoring  z  fits_with_a_split", flush=True)
    null_fits = []
    for s in range(20):
        tr, _ = synth.synthetic(100_000, 500 + s, null)
        null_fits.append(load_rct(tr, "treatment", "conversion", spec))
    for scoring, z, ml in configs:
        kept = 0
        for s, train in enumerate(null_fits):
            params = T.TreeParams(min_leaf=ml, prune_scoring=scoring, prune_z=z)
            kept += len(fit(train, budget_frac=FRAC, use_bayes=True, seed=s, params=params).leaves) > 1
        print(f"  {scoring}  {z}  {kept}/20", flush=True)

    print("(3) rows  seed  scoring  z  min_leaf  leaves  root  leaf_betas  cuvet_b_uplift  oracle_uplift", flush=True)
    for n, s, train, test, te in cases:
        split = compare.Split(train, test, te, s, 0)
        for scoring, z, ml in [*configs, ("curve", 1.64, 500)]:
            params = T.TreeParams(min_leaf=ml, prune_scoring=scoring, prune_z=z)
            rows = pd.DataFrame(
                compare.run_split(split, ["cuvet-b", "uniform", "oracle"], [FRAC], truth, params=params)
            ).set_index("method")
            mm = fit(train, budget=rows.loc["cuvet-b", "budget"] * train.n, use_bayes=True, seed=s, params=params)
            print(
                f"  {n}  {s}  {scoring}  {z}  {ml}  {len(mm.leaves)}  {mm.nodes[0].get('feature', '-')}"
                f"  {[round(lf.beta, 2) for lf in mm.leaves]}  {rows.loc['cuvet-b', 'true_uplift_pct']:+.1f}"
                f"  {rows.loc['oracle', 'true_uplift_pct']:+.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
