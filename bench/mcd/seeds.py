"""Gathers the acceptance runs of several seeds (acceptance.py work folders) into one table and the C1-C4
summary with the mean and the spread (sample sd, and min..max) over seeds.

    nice python -P bench/mcd/seeds.py WORKDIR [WORKDIR ...]

Every `s{seed}-{kd}-{student}-{kd|mcd}` run with an eval file in a WORKDIR is read (nothing is run);
rows already in bench/mcd/acceptance.csv for other seeds are kept. Writes bench/mcd/acceptance.csv and
bench/mcd/acceptance.json (the summary of acceptance.py over all seeds, plus `seeds` and `spread`) and
bench/mcd/seeds.md (per run: mean +- sample sd over seeds of the eval figures).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

_spec = importlib.util.spec_from_file_location("acceptance", Path(__file__).with_name("acceptance.py"))
acc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(acc)  # run with -P: the script's folder is not on sys.path
NAME = re.compile(r"s(\d+)-(\w+)-(d\d+)-(kd|mcd)$")


def read_runs(work: Path) -> list[dict]:
    rows = []
    for ev in sorted(work.glob("s*-*.eval.json")):
        m = NAME.match(ev.name[: -len(".eval.json")])
        if not m or not (work / m.group(0) / "run.json").exists():
            continue
        seed, kd, size, kind = m.groups()
        run = json.loads((work / m.group(0) / "run.json").read_text())
        metrics = json.loads(ev.read_text())["models"][0]
        rows.append({"seed": int(seed), "kd": kd, "student": size, "mcd": run["lam_path"] if kind == "mcd" else 0.0,
                     **metrics, "train_seconds": run["seconds"], "steps": run["steps"],
                     "mcd_batches": run["mcd_batches"], "fallbacks": run["kd_only_fallbacks"]})  # fmt: skip
    return rows


def spread(per_seed: list[dict]) -> dict:
    out = {}
    for key in ("gain_instr_em", "gain_math_em", "pathway_ot_drop_pct"):
        for run in per_seed[0][key]:
            vals = [s[key][run] for s in per_seed if run in s[key]]
            sd = float(np.std(vals, ddof=1)) if len(vals) > 1 else None
            out[f"{key}/{run}"] = {"mean": float(np.mean(vals)), "sd": sd, "min": min(vals), "max": max(vals), "n": len(vals)}
    ratios = [s["step_time_ratio_mcd_over_kd"] for s in per_seed]
    out["step_time_ratio_mcd_over_kd"] = {"mean": float(np.mean(ratios)), "min": min(ratios), "max": max(ratios)}
    return out


FIGURES = {"val_ce": 3, "teacher_agreement": 3, "instr_em": 1, "math_em": 1, "pathway_ot": 3, "mlp_bound": 1}


def markdown(frame: pd.DataFrame) -> str:
    head = "| run | seeds | " + " | ".join(FIGURES) + " | bound violations |"
    lines = [head, "|---|---:|" + "---:|" * (len(FIGURES) + 1)]
    for (kd, size, lam), g in frame.groupby(["kd", "student", "mcd"], sort=False):
        cells = [f"{g[c].mean():.{d}f} +- {g[c].std(ddof=1):.{d}f}" for c, d in FIGURES.items()]
        viol = f"{int(g.bound_violations.sum())} / {int(g.bound_checked.sum())}"
        lines.append(f"| {kd}-{size}-{'mcd' if lam else 'kd'} | {len(g)} | " + " | ".join(cells) + f" | {viol} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("work", nargs="+")
    args = parser.parse_args()
    new = pd.DataFrame([r for w in args.work for r in read_runs(Path(w))])
    old = pd.read_csv(acc.HERE / "acceptance.csv")
    frame = pd.concat([old[~old.seed.isin(new.seed.unique())], new], ignore_index=True)
    frame = frame.sort_values(["seed", "kd", "student", "mcd"], ascending=[True, True, False, True])
    frame.to_csv(acc.HERE / "acceptance.csv", index=False)
    summary = acc.summarise(frame)
    per_seed = [acc.summarise(frame[frame.seed == s]) for s in sorted(frame.seed.unique())]
    summary["seeds"] = sorted(int(s) for s in frame.seed.unique())
    summary["spread"] = spread(per_seed)
    (acc.HERE / "acceptance.json").write_text(json.dumps(summary, indent=1) + "\n")
    (acc.HERE / "seeds.md").write_text(markdown(frame))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
