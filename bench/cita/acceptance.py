"""The issue's acceptance protocol on BFCL v4 multi_turn_base, through the installed cita-* executables.

For each seed: import the train split, fit the graph, train CIM(B) and CIM(B,S,L) (hash embedder,
offline judge, no network), then run cita-eval on the test split with the random, prior and judge
policies beside both models. Writes bench/cita/acceptance.json (every run) and prints the means.

    nice -n 5 .venv/bin/python -P bench/cita/acceptance.py [--seeds 0,1,2] [--synthetic 5000] [--epochs 30]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def sh(cmd: str, cwd: str) -> str:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMBA_NUM_THREADS": "1",
        "PATH": f"{BIN}:{os.environ['PATH']}",
    }
    return subprocess.run(cmd, shell=True, cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def fit_and_train(args, seed: int, work: str) -> None:
    """The transition graph from train.jsonl, then CIM(B) and CIM(B,S,L) on it: cim-b, cim-bsl in WORK."""
    sh("cita-sim fit train.jsonl -o graph.npz --force", work)
    common = f"--graph graph.npz --synthetic {args.synthetic} --epochs {args.epochs} --seed {seed} -q --force"
    sh(f"cita-train train.jsonl --sources B {common} -o cim-b", work)
    sh(f"cita-train train.jsonl --sources B,S,L {common} -o cim-bsl", work)


def one_seed(seed: int, args, work: str) -> dict:
    t0 = time.time()
    cat = f"--category {args.category}"
    sh(f"cita-data bfcl {cat} --split train -o train.jsonl --force", work)
    fit_and_train(args, seed, work)
    out = sh(
        f"cita-eval {cat} --model cim-b --model cim-bsl --policy random --policy prior --policy judge "
        f"--graph graph.npz --distractors {args.distractors} --seed {seed} -q",
        work,
    )
    result = json.loads(out)
    result["seconds"] = round(time.time() - t0, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--synthetic", type=int, default=5000)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--distractors", type=int, default=4)
    parser.add_argument("--category", default="multi_turn_base")
    parser.add_argument("--out", default=str(HERE / "acceptance.json"))
    args = parser.parse_args()
    runs = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        with tempfile.TemporaryDirectory() as work:
            runs.append(one_seed(seed, args, work))
        print(json.dumps(runs[-1]), flush=True)
    names = [r.get("model") or r["policy"] for r in runs[0]["runs"]]
    table = {}
    for i, name in enumerate(names):
        rows = [r["runs"][i] for r in runs]
        table[name] = {
            k: sum(x[k] for x in rows) / len(rows)
            for k in ("success", "tool_f1", "call_f1", "pair_acc", "brier")
            if rows[0].get(k) is not None
        }
    print("run        success  tool_f1  call_f1  pair_acc  brier")
    for name, m in table.items():
        print(
            f"{name:10s} {m['success']:.3f}    {m['tool_f1']:.3f}    {m['call_f1']:.3f}    "
            f"{m.get('pair_acc', float('nan')):.3f}     {m.get('brier', float('nan')):.3f}"
        )
    Path(args.out).write_text(json.dumps({"args": vars(args), "per_seed": runs, "mean": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
