"""Clapping-FC on a held-out regression (issue 39 item 8): which reading of FC holds within a few
percent of uncompressed training at >= 20x fewer bytes?

Task: diamonds (`methodkit-data get diamonds`, 53,940 rows), target log(price), carat depth table
x y z plus cut, color, clarity one-hot; 3 stages, 3 blocks of width 128, 300 steps, batch 64,
R = 4 (lazy sampling), default lr, sim backend, seed 0. Every case is one `clapping-train run`;
its validation RMSE, the payload and wire compression ratios and the mean tracking error
|a - m| / |a| of comm.csv (forward messages on activations, backward on gradients; at a round's
first step and over the other steps) go to one JSON line each in OUT (default
bench/clapping/fc_study.jsonl; cases already there are skipped, so a stopped study continues).

    python -P bench/clapping/fc_study.py [--out FILE] [--steps 300] [--seed 0] [--only NAME...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent

# name, algo, compressor, fc-init
CASES = [
    ("none", "none", "identity", "zero"),
    ("naive-topk1", "naive", "topk:0.01", "zero"),
    ("fu-topk1", "clapping-fu", "topk:0.01", "zero"),
    ("fc-topk1-zero", "clapping-fc", "topk:0.01", "zero"),
    ("fc-topk1-prev", "clapping-fc", "topk:0.01", "prev"),
    ("fc-topk1-mean", "clapping-fc", "topk:0.01", "mean"),
    ("fc-topk1-damp0.5", "clapping-fc", "topk:0.01", "damp:0.5"),
    ("fc-topk1-damp0.9", "clapping-fc", "topk:0.01", "damp:0.9"),
    ("naive-quant1", "naive", "quant:1", "zero"),
    ("fc-quant1-zero", "clapping-fc", "quant:1", "zero"),
    ("fc-quant1-prev", "clapping-fc", "quant:1", "prev"),
    ("fc-quant1-mean", "clapping-fc", "quant:1", "mean"),
    ("naive-tq5x2", "naive", "topk+quant:0.05:2", "zero"),
    ("fc-tq5x2-zero", "clapping-fc", "topk+quant:0.05:2", "zero"),
    ("fc-tq5x2-prev", "clapping-fc", "topk+quant:0.05:2", "prev"),
    ("fc-tq5x2-mean", "clapping-fc", "topk+quant:0.05:2", "mean"),
    ("fc-tq5x2-damp0.5", "clapping-fc", "topk+quant:0.05:2", "damp:0.5"),
    ("fc-tq5x2-damp0.9", "clapping-fc", "topk+quant:0.05:2", "damp:0.9"),
    ("naive-lowrank2", "naive", "lowrank:2", "zero"),
    ("fc-lowrank2-zero", "clapping-fc", "lowrank:2", "zero"),
    ("fc-lowrank2-prev", "clapping-fc", "lowrank:2", "prev"),
    ("fc-lowrank2-mean", "clapping-fc", "lowrank:2", "mean"),
]


def diamonds(folder: Path) -> Path:
    import numpy as np
    import pandas as pd

    raw, out = folder / "dm.csv", folder / "dml.csv"
    subprocess.run([str(BIN / "methodkit-data"), "get", "diamonds", "-o", str(raw)], check=True)
    frame = pd.read_csv(raw)
    frame["logprice"] = np.log(frame.pop("price"))
    frame.to_csv(out, index=False)
    return out


def tracking(comm_csv: Path) -> dict:
    import pandas as pd

    comm = pd.read_csv(comm_csv)
    out = {}
    for direction in ("fwd", "bwd"):
        rows = comm[comm["direction"] == direction]
        first = (rows["step"] - 1) % REUSE == 0
        out[f"err_{direction}_first"] = float(rows.loc[first, "track_err"].mean())
        out[f"err_{direction}_rest"] = float(rows.loc[~first, "track_err"].mean())
    return out


REUSE = 4


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(HERE / "fc_study.jsonl"))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="+", default=None)
    args = parser.parse_args()
    out = Path(args.out)
    done = set()
    if out.exists():
        done = {(r["case"], r["steps"], r["seed"]) for r in map(json.loads, out.read_text().splitlines()) if r}
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        data = diamonds(Path(tmp))
        for name, algo, compressor, init in CASES:
            if (args.only and name not in args.only) or (name, args.steps, args.seed) in done:
                continue
            folder = Path(tmp) / name
            cmd = [
                str(BIN / "clapping-train"), "run", str(data), "--task", "mlp-csv", "--target", "logprice",
                "--columns", "carat,cut,color,clarity,depth,table,x,y,z", "--categorical", "cut,color,clarity",
                "--stages", "3", "--blocks", "3", "--steps", str(args.steps), "--reuse", str(REUSE),
                "--algo", algo, "--compressor", compressor, "--fc-init", init, "--seed", str(args.seed),
                "--backend", "sim", "--ckpt-every", "0", "-o", str(folder), "-q",
            ]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode:
                row = {"case": name, "algo": algo, "compressor": compressor, "fc_init": init}
                row.update(steps=args.steps, seed=args.seed, error=proc.stderr.strip().splitlines()[-1][-300:])
            else:
                result = json.loads(proc.stdout)
                row = {
                    "case": name,
                    "algo": algo,
                    "compressor": compressor,
                    "fc_init": init if algo == "clapping-fc" else "",
                    "steps": args.steps,
                    "seed": args.seed,
                    "val_rmse": result["val_metric"]["rmse"],
                    "ratio": result["compression_ratio"],
                    "wire_ratio": result["exact_bytes"] / result["wire_bytes"],
                    **tracking(folder / "comm.csv"),
                }
            with open(out, "a") as handle:
                handle.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
