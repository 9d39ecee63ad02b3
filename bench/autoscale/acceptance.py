"""autoscale-mix acceptance runs (issue 27, laptop scale; not part of `make bench`: tens of minutes).

    .venv/bin/python -P bench/autoscale/acceptance.py [--seeds 0,1,2] [--out bench/autoscale/acceptance.jsonl]

Per seed, through the installed executable (one thread):
  autoscale-mix pools  -o S/pools --real R --synth N --val V --test T --seed s
  autoscale-mix embed  S/pools --seed s
  autoscale-mix run    S/pools -o S/M --method M --budget B --rounds 5 --clusters 16 --steps 1000 --seed s
for M in autoscale, vanilla, domain-cls, real-only, knn-real, and vanilla at 4 B (the data-efficiency
check). One JSON line per (seed, method) goes to --out; the summary table is printed at the end.
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

BIN = Path(sys.executable).parent
SIZES = {"real": 800, "synth": 6000, "val": 300, "test": 1000}
BUDGET = 800
LOOP = ["--rounds", "5", "--clusters", "16", "--steps", "1000"]
METHODS = [("autoscale", BUDGET), ("vanilla", BUDGET), ("domain-cls", BUDGET), ("real-only", BUDGET),
           ("knn-real", BUDGET), ("vanilla", 4 * BUDGET)]  # fmt: skip


def sh(args: list[str]) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    proc = subprocess.run([str(BIN / args[0]), *args[1:], "-j", "1", "-q"], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr.strip()[-400:]}")
    return proc.stdout.strip().splitlines()[-1]


def one_seed(seed: int, work: Path, out) -> None:
    pools = work / f"s{seed}" / "pools"
    t0 = time.monotonic()
    sizes = [f"--{k}={v}" for k, v in SIZES.items()]
    pools_json = json.loads(sh(["autoscale-mix", "pools", "-o", str(pools), *sizes, "--seed", str(seed)]))
    t_pools = time.monotonic() - t0
    emb_json = json.loads(sh(["autoscale-mix", "embed", str(pools), "--seed", str(seed), "--clusters", "16"]))
    t_embed = time.monotonic() - t0 - t_pools
    out.write(json.dumps({"seed": seed, "verb": "pools", "seconds": t_pools, **pools_json}) + "\n")
    emb_json.pop("clusters", None)
    out.write(json.dumps({"seed": seed, "verb": "embed", "seconds": t_embed, **emb_json}) + "\n")
    out.flush()
    for method, budget in METHODS:
        t1 = time.monotonic()
        run_dir = work / f"s{seed}" / f"{method}-{budget}"
        res = json.loads(sh(["autoscale-mix", "run", str(pools), "-o", str(run_dir), "--method", method,
                             "--budget", str(budget), *LOOP, "--seed", str(seed)]))  # fmt: skip
        res["seconds"] = time.monotonic() - t1
        out.write(json.dumps({"verb": "run", **res}) + "\n")
        out.flush()
        print(f"seed {seed} {method}@{budget}: test PDMS {res['test']['pdms']:.2f} ({res['seconds']:.0f} s)",
              flush=True)  # fmt: skip


def summary(path: Path) -> None:
    import numpy as np

    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    runs = [r for r in rows if r["verb"] == "run"]
    table: dict = {}
    for r in runs:
        table.setdefault(f"{r['method']}@{r['budget']}", []).append(r["test"]["pdms"])
    print("method  seeds  test_pdms_mean  per_seed")
    for key, vals in table.items():
        print(f"{key}  {len(vals)}  {np.mean(vals):.2f}  {' '.join(f'{v:.2f}' for v in vals)}")
    emb = [r for r in rows if r["verb"] == "embed"]
    for r in emb:
        print(
            f"embed seed {r['seed']}: purity {r['purity']:.3f}  PCA(32) {r['purity_pca']:.3f}  raw {r['purity_raw']:.3f}"
        )
    for r in runs:
        if r["method"] == "autoscale":
            m = r["mechanism"]
            print(f"mechanism seed {r['seed']}: reckless clusters {m['reckless_clusters']} max w*K "
                  f"{m['reckless_cluster_weight_max_times_k']}; rare clusters {m['rare_clusters']} weight ratio "
                  f"{m['rare_weight_ratio']}; reckless share selected {m['reckless_share_selected']:.3f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", default=str(Path(__file__).with_name("acceptance.jsonl")))
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args()
    out_path = Path(args.out)
    if not args.summary_only:
        with tempfile.TemporaryDirectory(prefix="autoscale-acc-") as work, open(out_path, "a") as out:
            for seed in [int(s) for s in args.seeds.split(",")]:
                one_seed(seed, Path(work), out)
    summary(out_path)


if __name__ == "__main__":
    main()
