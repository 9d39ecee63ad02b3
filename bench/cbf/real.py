"""cbf acceptance on the real N = 643 data (Piray & Daw 2024), only when ../shared/data/stovol-learning exists.

Per experiment: the model-neutral learning-rate GLM (all subjects), the ambiguity -> RT regression with
the unfitted default grid (mu = .5, kappa = 2, as the issue's prototype), and a CBF fit of the first
--subjects subjects with the phenotype cross-over test and RT regression on the fitted ambiguity.
Prints one JSON line per experiment. Not part of `make bench` (needs data a user brings): python -P bench/cbf/real.py --subjects 16
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "stovol-learning"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subjects", type=int, default=20, help="subjects fitted per experiment (0 = all)")
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--params-dir", default=None, help="write each experiment's fitted params CSV here")
    parser.add_argument("--experiments", default="1,2", help="which experiments, e.g. 2 (run them in parallel)")
    args = parser.parse_args()
    from methodkit.tools.cbf import analyze, data, fit, grid, signals
    from methodkit.tools.cbf.forward import FilterOptions

    for exp in [int(e) for e in args.experiments.split(",")]:
        path = Path(args.data) / f"experiment{exp}" / "data.mat"
        if not path.exists():
            print(json.dumps({"experiment": exp, "skipped": f"{path} not found"}))
            continue
        cohort = data.import_stovol_mat(path.read_bytes(), str(path))
        S = cohort.n_subjects
        default = {
            "mu_v": np.full(S, 0.5),
            "kappa_v": np.full(S, 2.0),
            "mu_s": np.full(S, 0.5),
            "kappa_s": np.full(S, 2.0),
        }
        sig = signals.model_signals(cohort, "cbf", default, grid=grid.GridSpec(), fopts=FilterOptions())
        flat = pd.DataFrame({"subject": cohort.subjects, "model": "cbf", **default})
        base = analyze.run(cohort, flat, sig.arrays["ambiguity"]).summary
        out = {"experiment": exp, "n": S, "glm": base["glm"], "rt_default_grid": base["rt"]}
        n = S if args.subjects <= 0 else min(args.subjects, S)
        sub = cohort.subset(np.arange(n))
        start, cpu = time.perf_counter(), time.process_time()
        table = fit.run(sub, fit.FitOptions(restarts=args.restarts)).table
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        if args.params_dir:
            table.to_csv(Path(args.params_dir) / f"cbf_real_exp{exp}_params.csv", index=False)
        values = {k: table[k].to_numpy() for k in ("mu_v", "kappa_v", "mu_s", "kappa_s")}
        amb = signals.model_signals(sub, "cbf", values, grid=grid.GridSpec(), fopts=FilterOptions()).arrays["ambiguity"]
        fitted = analyze.run(sub, table, amb).summary
        out.update(
            {
                "fitted_n": n,
                "fit_seconds": round(seconds, 1),
                "fit_cpu_seconds": round(cpu, 1),
                "converged": int(table["converged"].sum()),
                "median_D": float(table["D"].median()),
                "phenotype": fitted["phenotype"],
                "rt_fitted": fitted["rt"],
            }
        )
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
