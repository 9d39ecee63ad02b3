"""NB vs CV-permutation-Q2: the sample-size saving over fresh seeds, read several ways (issue 37 item 8).

Runs `pls-test power` for each design (K, Q2 definition) and seed on one n grid (Toeplitz 0.5, p = 50,
5 active, SNR 0.3, J = 50, F = 5, B = 200, 200 replications per n and seed), keeps every curve under
bench/pls/designs/seeds/, and prints per design:
  - n80 per seed and pooled over seeds (curve = all replications of all seeds), by the tool's rule (first
    crossing, linear interpolation between grid points) and by a probit fit of power on log n per method
    (binomial GLM: one monotone curve through all points, so one noisy point cannot move it);
  - the saving 1 - n_NB / n_CV at power .5, .8 and .9 (probit), and n_CV / n_NB - 1 ("CV needs x% more").
Seeds 1-4 were not looked at before this script was written; bench/pls/designs/*.csv (seed 0) were.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 nice -n 5 python -P bench/pls/power_seeds.py [--seeds 1,2,3,4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
OUT = HERE / "designs" / "seeds"
BIN = Path(sys.executable).parent
SIZES = "40,60,80,100,120,140,160,180,200"
DESIGNS = {"k2-train": (2, "train"), "k2-fold": (2, "fold"), "k3-train": (3, "train"), "k3-fold": (3, "fold")}


def run(name: str, seed: int, reps: int) -> pd.DataFrame:
    path = OUT / f"{name}-s{seed}.csv"
    if not path.exists():
        k, center = DESIGNS[name]
        cmd = [str(BIN / "pls-test"), "power", "--geometry", "toeplitz0.5", "-n", SIZES, "--reps", str(reps),
               "--perms", "200", "-k", str(k), "--q2-center", center, "--seed", str(seed), "-j", "1", "-q",
               "-o", str(path)]
        subprocess.run(cmd, check=True)
        print(f"# ran {name} seed {seed}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    return pd.read_csv(path).assign(seed=seed)


def first_crossing(df: pd.DataFrame, target: float = 0.8) -> float | None:
    pts = sorted(zip(df["n"], df["rejected"] / df["reps"]))
    for (n0, p0), (n1, p1) in zip(pts, pts[1:]):
        if p0 < target <= p1:
            return n0 + (target - p0) * (n1 - n0) / (p1 - p0)
    return float(pts[0][0]) if pts and pts[0][1] >= target else None


def probit_n(df: pd.DataFrame, levels=(0.5, 0.8, 0.9)) -> dict:
    import statsmodels.api as sm
    from scipy.stats import norm

    x = sm.add_constant(np.log(df["n"].to_numpy(float)))
    endog = np.column_stack([df["rejected"], df["reps"] - df["rejected"]])
    fit = sm.GLM(endog, x, family=sm.families.Binomial(sm.families.links.Probit())).fit()
    a, b = fit.params
    return {lv: float(np.exp((norm.ppf(lv) - a) / b)) for lv in levels}


def pooled(frames: list[pd.DataFrame]) -> pd.DataFrame:
    df = pd.concat(frames).groupby(["method", "n"], as_index=False)[["rejected", "reps"]].sum()
    return df


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="1,2,3,4")
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--designs", default=",".join(DESIGNS))
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    print(f"# Toeplitz 0.5, p = 50, 5 active, SNR 0.3, J = 50, F = 5, B = 200, -n {SIZES}, "
          f"{args.reps} reps per n and seed, seeds {args.seeds}")
    for name in args.designs.split(","):
        frames = [run(name, s, args.reps) for s in seeds]
        rows = {}
        for method in ("nb", "cvq2-perm"):
            per_seed = [first_crossing(f[f.method == method]) for f in frames]
            pool = pooled([f[f.method == method] for f in frames])
            rows[method] = {
                "n80_first_crossing_per_seed": [None if v is None else round(v, 1) for v in per_seed],
                "n80_first_crossing_pooled": first_crossing(pool),
                "probit": probit_n(pool),
                "power_pooled": dict(zip(pool["n"].tolist(), (pool["rejected"] / pool["reps"]).round(3).tolist())),
            }
        nb, cv = rows["nb"], rows["cvq2-perm"]
        saving = {f"{lv:g}": round(1 - nb["probit"][lv] / cv["probit"][lv], 3) for lv in nb["probit"]}
        more = {f"{lv:g}": round(cv["probit"][lv] / nb["probit"][lv] - 1, 3) for lv in nb["probit"]}
        per_seed_saving = [
            None if a is None or b is None else round(1 - a / b, 3)
            for a, b in zip(nb["n80_first_crossing_per_seed"], cv["n80_first_crossing_per_seed"])
        ]
        fc = (nb["n80_first_crossing_pooled"], cv["n80_first_crossing_pooled"])
        print(json.dumps({
            "design": name,
            "k": DESIGNS[name][0],
            "q2_center": DESIGNS[name][1],
            "seeds": seeds,
            "n80_first_crossing_per_seed": {"nb": nb["n80_first_crossing_per_seed"],
                                            "cvq2": cv["n80_first_crossing_per_seed"]},
            "saving_first_crossing_per_seed": per_seed_saving,
            "n80_first_crossing_pooled": {"nb": fc[0], "cvq2": fc[1]},
            "saving_first_crossing_pooled": None if None in fc else round(1 - fc[0] / fc[1], 3),
            "n_probit_pooled": {"nb": {f"{k:g}": round(v, 1) for k, v in nb["probit"].items()},
                                "cvq2": {f"{k:g}": round(v, 1) for k, v in cv["probit"].items()}},
            "saving_probit_pooled (1 - n_nb/n_cv)": saving,
            "cv_needs_more_probit_pooled (n_cv/n_nb - 1)": more,
            "power_pooled": {"nb": nb["power_pooled"], "cvq2": cv["power_pooled"]},
        }), flush=True)


if __name__ == "__main__":
    main()
