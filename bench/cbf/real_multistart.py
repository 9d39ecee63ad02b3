"""How much the real-data phenotype split depends on which local optimum the CBF fit reaches (multi-start).

Fits experiment 1 of Piray & Daw (2024) (../shared/data/stovol-learning, when present) with more and
fewer starts (the model's fixed design of --restarts points plus --screen best points of a fixed grid) and
compares each with the most-starts fit: per-subject log-likelihood gains, how many subjects change tercile
of D = log kappa_v - log kappa_s (vol-blind = top, sto-blind = bottom), and the cross-over F and p.
Not part of `make bench` (needs data a user brings):
  OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python -P bench/cbf/real_multistart.py > bench/cbf/real_multistart.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "stovol-learning"
SETTINGS = ((1, 0), (5, 0), (5, 5), (5, 40))  # (restarts, screen); (5, 5) is cbf-fit's default


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--experiment", type=int, default=1)
    args = parser.parse_args()
    from methodkit.tools.cbf import analyze, data, fit, models

    path = Path(args.data) / f"experiment{args.experiment}" / "data.mat"
    if not path.exists():
        print(json.dumps({"skipped": f"{path} not found"}))
        return
    cohort = data.import_stovol_mat(path.read_bytes(), str(path))
    glm = analyze.lr_glm(cohort)
    tables = {}
    for restarts, screen in SETTINGS:
        cpu = time.process_time()
        tables[(restarts, screen)] = fit.run(cohort, fit.FitOptions(restarts=restarts, screen=screen)).table
        tables[(restarts, screen)].attrs["cpu"] = time.process_time() - cpu
    best = tables[SETTINGS[-1]]

    def terciles(table):
        index = models.blindness("cbf", table)
        lo, hi = np.nanquantile(index, [1 / 3, 2 / 3])
        return np.where(index >= hi, 1, np.where(index <= lo, -1, 0))

    ref = terciles(best)
    for key, table in tables.items():
        ph = analyze.phenotype(glm, models.blindness("cbf", table))
        gain = best["loglik"].to_numpy() - table["loglik"].to_numpy()
        print(
            json.dumps(
                {
                    "experiment": args.experiment,
                    "restarts": key[0],
                    "screen": key[1],
                    "starts": key[0] + key[1],
                    "cpu_s": round(table.attrs["cpu"], 1),
                    "interaction_F": round(ph["interaction_F"], 3),
                    "interaction_p": round(ph["interaction_p"], 4),
                    "crossover": ph["crossover"],
                    "subjects_below_best_by_0.5": int((gain > 0.5).sum()),
                    "max_loglik_gap": round(float(gain.max()), 2),
                    "tercile_changes_vs_most_starts": int((terciles(table) != ref).sum()),
                    "median_D": round(float(table["D"].median()), 3),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
