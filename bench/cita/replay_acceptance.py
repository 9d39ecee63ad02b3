"""Acceptance criterion 3: CIM(B,S,L) vs CIM(B) in the offline replay envs (tau2 retail, cfb), paired bootstrap.

For each env and seed, through the installed executables: generate the env's default tasks (cita-data
replay ENV: tau2 114 retail tasks, cfb 300 Booking tasks; data seed 0, split seed 0), fit the graph on the
train split, train CIM(B) and CIM(B,S,L) (hash embedder, offline judge, no network), run cita-eval on the
test split with the random policy beside both models, and keep the per-task rows. Then, per env, each
task's success and Tool F1 are averaged over the seeds and the difference CIM(B,S,L) − CIM(B) gets a
paired bootstrap 95% interval over tasks (10 000 resamples). Writes bench/cita/replay_ENV.json as it goes.

    nice -n 5 .venv/bin/python -P bench/cita/replay_acceptance.py [--envs tau2,cfb] [--seeds 0,1,2]
        [--synthetic 2000] [--epochs 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from methodkit.tools.cita.episodes import paired_bootstrap

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # run with -P: the script's folder is not on sys.path
from acceptance import fit_and_train, sh  # noqa: E402  (the BFCL acceptance's runner and training steps)


def one_seed(env: str, seed: int, args, work: str) -> tuple[dict, pd.DataFrame]:
    t0 = time.time()
    sh(
        f"cita-data replay {env} -o all.jsonl --force && cita-data replay {env} --split train -o train.jsonl --force",
        work,
    )
    fit_and_train(args, seed, work)
    out = sh(
        f"cita-eval --env {env} --data all.jsonl --model cim-b --model cim-bsl --policy random --graph graph.npz "
        f"--distractors {args.distractors} --seed {seed} --out tasks.csv -q",
        work,
    )
    result = json.loads(out)
    result["seconds"] = round(time.time() - t0, 1)
    return result, pd.read_csv(Path(work) / "tasks.csv").assign(seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--envs", default="tau2,cfb")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--synthetic", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--distractors", type=int, default=4)
    args = parser.parse_args()
    for env in args.envs.split(","):
        runs, rows = [], []
        out = HERE / f"replay_{env}.json"
        for seed in [int(s) for s in args.seeds.split(",")]:
            with tempfile.TemporaryDirectory() as work:
                result, table = one_seed(env, seed, args, work)
            runs.append(result)
            rows.append(table)
            print(json.dumps(result), flush=True)
            out.write_text(json.dumps({"args": vars(args), "env": env, "per_seed": runs}, indent=1) + "\n")
        tasks = pd.concat(rows, ignore_index=True)
        tasks["success"] = tasks["success"].astype(float)
        per_task = tasks.groupby(["run", "task_id"])[["success", "tool_f1", "call_f1"]].mean()
        b, bsl = per_task.loc["cim-b"], per_task.loc["cim-bsl"].reindex(per_task.loc["cim-b"].index)
        compare = {m: paired_bootstrap(b[m].to_numpy(), bsl[m].to_numpy()) for m in ("success", "tool_f1", "call_f1")}
        mean = {r: per_task.loc[r].mean().to_dict() for r in per_task.index.get_level_values(0).unique()}
        summary = {"args": vars(args), "env": env, "per_seed": runs, "mean": mean, "bsl_minus_b": compare}
        out.write_text(json.dumps(summary, indent=1) + "\n")
        print(json.dumps({"env": env, "mean": mean, "bsl_minus_b": compare}), flush=True)


if __name__ == "__main__":
    main()
