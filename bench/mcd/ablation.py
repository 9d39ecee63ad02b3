"""Ablation of the pathway matching: fused Gromov-Wasserstein (`distill --fgw ALPHA`) instead of entropic OT.

    nice python -P bench/mcd/ablation.py WORKDIR [--runs 0:fkl:d16] [--alpha 0.5] [--steps 150]

WORKDIR is an acceptance.py work folder (its data, teacher and transcoders are reused); each run is the
acceptance's MCD run with --fgw added, at the same settings, then scored by the same eval (whose pathway
OT cost stays the entropic one, so the rows compare with acceptance.csv). Rows go to bench/mcd/ablation.csv.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pandas as pd

_spec = importlib.util.spec_from_file_location("acceptance", Path(__file__).with_name("acceptance.py"))
acc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(acc)  # the acceptance's data, teacher and run steps (run with -P: no script dir on sys.path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("work")
    parser.add_argument("--runs", default="0:fkl:d16", help="SEED:KD:STUDENT,... ")
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--mcd", type=float, default=0.1)
    args = parser.parse_args()
    work = Path(args.work)
    acc.prepare(work, 1500, 800)
    rows = []
    for spec in args.runs.split(","):
        seed, kd, size = spec.split(":")
        row = acc.one_run(work, int(seed), kd, size, args.mcd, args.steps, ["--fgw", args.alpha], f"-fgw{args.alpha:g}")
        rows.append({**row, "path_ot_solver": f"fgw alpha={args.alpha:g}"})
        pd.DataFrame(rows).to_csv(acc.HERE / "ablation.csv", index=False)
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
