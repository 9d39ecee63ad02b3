"""The headline at laptop scale: static baselines vs the COW reader, per generation seed.

For each seed: generate a benchmark (and a disjoint training bench for the prior baselines),
run COW perceive and oracle, evaluate random / majority / text-prior / heuristic2d / cow-reader,
score them, and McNemar heuristic2d vs cow-reader(perceive). Prints one table row per seed and
baseline and writes bench/causal_spatial/acceptance.txt.

    nice -n 5 .venv/bin/python -P bench/causal_spatial/acceptance.py --seeds 0,1,2 --per-task 40 --size 224
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
HERE = Path(__file__).resolve().parent


def sh(*args: str) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    out = subprocess.run([str(BIN / args[0]), *args[1:]], check=True, capture_output=True, text=True, env=env)
    return out.stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--per-task", type=int, default=40)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--out", default=str(HERE / "acceptance.txt"))
    a = ap.parse_args()
    lines = [f"# per-task {a.per_task} (half per level), {a.size}px, EGL (Mesa llvmpipe), train bench seed+1000, --gl none",
             "seed  model  scene  accuracy  ci95  collision  compatibility  occlusion  trajectory  L1  L2  seconds"]
    print(lines[0], flush=True)
    for seed in [int(s) for s in a.seeds.split(",")]:
        with tempfile.TemporaryDirectory(prefix="cs-accept-") as tmp:
            t = Path(tmp)
            t0 = time.time()
            sh("causal-spatial", "generate", "--per-task", str(a.per_task), "--size", str(a.size), "--seed", str(seed),
               "-o", str(t / "bench"), "-q")
            t_gen = time.time() - t0
            sh("causal-spatial", "generate", "--gl", "none", "--per-task", str(a.per_task), "--seed", str(seed + 1000),
               "-o", str(t / "train"), "-q")
            t0 = time.time()
            sh("cow-simulate", "--bench", str(t / "bench"), "-o", str(t / "cow"), "--no-video", "-q")
            t_cow = time.time() - t0
            sh("cow-simulate", "--bench", str(t / "bench"), "--scene", "oracle", "--frames", "2", "--no-video",
               "-o", str(t / "oracle"), "-q")
            runs = [("random", None, []), ("majority", None, ["--train", str(t / "train")]),
                    ("text-prior", None, ["--train", str(t / "train")]), ("heuristic2d", None, []),
                    ("cow-reader", "perceive", ["--cow", str(t / "cow")]),
                    ("cow-reader", "oracle", ["--cow", str(t / "oracle")])]
            preds = {}
            for model, scene, extra in runs:
                path = t / f"{model}-{scene}.jsonl"
                sh("causal-spatial", "eval", "--bench", str(t / "bench"), "--model", model, *extra, "-o", str(path),
                   "-q", "--seed", str(seed))
                preds[(model, scene)] = path
                r = json.loads(sh("causal-spatial", "score", str(path)))
                pl = r["per_task_level"]
                l1 = sum(v["accuracy"] * v["n"] for k, v in pl.items() if k.endswith("L1")) / sum(
                    v["n"] for k, v in pl.items() if k.endswith("L1"))
                l2 = sum(v["accuracy"] * v["n"] for k, v in pl.items() if k.endswith("L2")) / sum(
                    v["n"] for k, v in pl.items() if k.endswith("L2"))
                pt = r["per_task"]
                row = (f"{seed}  {model}  {scene or '-'}  {r['accuracy']:.3f}  [{r['accuracy_ci95'][0]:.3f},"
                       f"{r['accuracy_ci95'][1]:.3f}]  {pt['collision']:.3f}  {pt['compatibility']:.3f}  "
                       f"{pt['occlusion']:.3f}  {pt['trajectory']:.3f}  {l1:.3f}  {l2:.3f}  -")
                lines.append(row)
                print(row, flush=True)
            p = json.loads(sh("causal-spatial", "score", str(preds[("cow-reader", "perceive")]), "--paired",
                              str(preds[("heuristic2d", None)]), str(preds[("cow-reader", "perceive")])))["paired"]
            meta = json.loads((t / "bench" / "meta.json").read_text())
            row = (f"{seed}  mcnemar heuristic2d vs cow-reader(perceive): n={p['n']} b_right_a_wrong={p['b_right_a_wrong']}"
                   f" a_right_b_wrong={p['a_right_b_wrong']} p={p['p_value']:.3g}; generate {t_gen:.0f}s, cow {t_cow:.0f}s;"
                   f" prefilter agreement {meta['prefilter']['agree_with_mujoco']:.3f} of {meta['prefilter']['layouts']}")
            lines.append(row)
            print(row, flush=True)
    Path(a.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
