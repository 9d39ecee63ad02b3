"""autoscale-mix acceptance runs (issue 27, laptop scale; not part of `make bench`: tens of minutes).

    .venv/bin/python -P bench/autoscale/acceptance.py [--seeds 0,1,2] [--out bench/autoscale/acceptance.jsonl]

Per seed, through the installed executable (one thread):
  autoscale-mix pools  -o S/pools --real R --synth N --val V --test T --seed s
  autoscale-mix embed  S/pools --seed s
  autoscale-mix run    S/pools -o S/M --method M --budget B --rounds 5 --clusters 16 --steps 1000 --seed s [--run-args]
for M in autoscale, vanilla, domain-cls, real-only, knn-real, and vanilla at 4 B (the data-efficiency
check); --real-rare sets the share of each rare type in the real train pool (the scene bias), --methods
the method@budget list, --work a folder that keeps S/pools and the runs. One JSON line per (seed, method) is
appended to --out; the summary table is printed at the end.
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


def one_seed(seed: int, work: Path, out, real_rare: float, methods, run_args=()) -> None:
    pools = work / f"s{seed}" / "pools"
    t0 = time.monotonic()
    spec = work / f"spec{seed}.json"
    spec.write_text(json.dumps({**SIZES, "seed": seed, "real_rare": real_rare}))
    pools_json = json.loads(sh(["autoscale-mix", "pools", str(spec), "-o", str(pools)]))
    pools_json["real_rare"] = real_rare
    t_pools = time.monotonic() - t0
    emb_json = json.loads(sh(["autoscale-mix", "embed", str(pools), "--seed", str(seed), "--clusters", "16"]))
    t_embed = time.monotonic() - t0 - t_pools
    out.write(json.dumps({"seed": seed, "verb": "pools", "seconds": t_pools, **pools_json}) + "\n")
    emb_json.pop("clusters", None)
    emb_json["real_rare"] = real_rare
    out.write(json.dumps({"seed": seed, "verb": "embed", "seconds": t_embed, **emb_json}) + "\n")
    out.flush()
    for method, budget in methods:
        t1 = time.monotonic()
        run_dir = work / f"s{seed}" / f"{method}-{budget}"
        res = json.loads(sh(["autoscale-mix", "run", str(pools), "-o", str(run_dir), "--method", method,
                             "--budget", str(budget), *LOOP, "--seed", str(seed), *run_args]))  # fmt: skip
        res["seconds"] = time.monotonic() - t1
        res["real_rare"] = real_rare
        res["run_args"] = " ".join(run_args)
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
        key = f"real_rare={r.get('real_rare', 0.02)}  {r['method']}@{r['budget']} {r.get('run_args', '')}".strip()
        table.setdefault(key, []).append((r["seed"], r["test"]["pdms"]))
    print("config  method  seeds  test_pdms_mean  per_seed(seed:pdms)")
    for key, vals in sorted(table.items()):
        per = " ".join(f"{s}:{v:.2f}" for s, v in sorted(vals))
        print(f"{key}  {len(vals)}  {np.mean([v for _, v in vals]):.2f}  {per}")
    for r in (r for r in rows if r["verb"] == "embed"):
        print(
            f"embed real_rare={r.get('real_rare', 0.02)} seed {r['seed']}: purity {r['purity']:.3f}  "
            f"PCA(32) {r['purity_pca']:.3f}  raw {r['purity_raw']:.3f}"
        )
    for r in (r for r in runs if r["method"] == "autoscale"):
        m = r["mechanism"]
        last = m.get("last_round", {})
        print(
            f"mechanism real_rare={r.get('real_rare', 0.02)} seed {r['seed']} (best round {r['best_round']}): "
            f"reckless clusters {m['reckless_clusters']} w*K best {m['reckless_cluster_weight_max_times_k']} "
            f"last {last.get('reckless_cluster_weight_max_times_k')}; rare clusters {m['rare_clusters']} "
            f"weight ratio best {m['rare_weight_ratio']} last {last.get('rare_weight_ratio')}; reckless share "
            f"selected best {m['reckless_share_selected']:.3f} last {last.get('reckless_share_selected')}"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", default=str(Path(__file__).with_name("acceptance.jsonl")))
    ap.add_argument("--summary-only", action="store_true")
    ap.add_argument("--real-rare", type=float, default=0.02, help="share of each rare type in the real train pool")
    ap.add_argument("--run-args", default="", help="extra `run` options, e.g. '--eval closed-loop'")
    ap.add_argument("--methods", default=",".join(f"{m}@{b}" for m, b in METHODS), help="method@budget,...")
    ap.add_argument("--work", help="keep the pools and run folders here (default: a temporary folder)")
    args = ap.parse_args()
    out_path = Path(args.out)
    if not args.summary_only:
        tmp = tempfile.TemporaryDirectory(prefix="autoscale-acc-") if args.work is None else None
        work = tmp.name if tmp else args.work
        with open(out_path, "a") as out:
            for seed in [int(s) for s in args.seeds.split(",")]:
                methods = [(m.split("@")[0], int(m.split("@")[1])) for m in args.methods.split(",")]
                one_seed(seed, Path(work), out, args.real_rare, methods, args.run_args.split())
        if tmp:
            tmp.cleanup()
    summary(out_path)


if __name__ == "__main__":
    main()
