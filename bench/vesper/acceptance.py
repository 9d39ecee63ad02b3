"""VESPER headline (issue §5) with the built-in policies: 40 pairs, --robot simple, 320x240, seeds 0 1 2.

Prints one line per seed and policy and then the targets, met or missed, over all seeds:
  1. always-stop / always-continue: decision accuracy 0.50, pair accuracy 0
  2. recognize: pair accuracy <= 0.10, recognition decision accuracy >= 0.90, anticipation gap >= 0.4
  3. extrapolate: pair accuracy >= 0.65 (per deciding factor listed)
  4. obey: P1(hard) = 0, hierarchy score <= 0.5
    nice -n 5 .venv/bin/python -P bench/vesper/acceptance.py > bench/vesper/acceptance.txt
    nice -n 5 .venv/bin/python -P bench/vesper/acceptance.py 8 mujoco > bench/vesper/acceptance_mujoco.txt
    MUJOCO_GL=egl nice -n 5 .venv/bin/python -P bench/vesper/acceptance.py 40 mujoco > bench/vesper/acceptance_mujoco40.txt
(the last two: clips from the third-person MuJoCo camera, 8 and 40 pairs; the baselines read its depth, K and T).
Output goes to stdout only (one line per seed and policy, flushed as it goes), so each run's file is the redirect.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time

import numba

from methodkit.core.endpoint import parse_spec
from methodkit.tools.vesper import evaluate, score, taxonomy
from methodkit.tools.vesper import generate as g

PAIRS = int(sys.argv[1]) if len(sys.argv) > 1 else 40
RENDERER = sys.argv[2] if len(sys.argv) > 2 else "2d"
SEEDS = (0, 1, 2)


def main():
    numba.set_num_threads(1)
    tax = taxonomy.load()
    results = {}
    t0 = time.perf_counter()
    for seed in SEEDS:
        with tempfile.TemporaryDirectory() as tmp:
            folder = f"{tmp}/bench"
            gen = g.generate(g.GenerateConfig(pairs=PAIRS, seed=seed, renderer=RENDERER), folder, tax)
            print(f"seed {seed} ({RENDERER} renderer, {time.perf_counter() - t0:.0f} s so far): {gen.pairs} pairs, {gen.items} items ({gen.recognition} recognition), "
                  f"rejections {json.dumps(gen.rejections)}, failed recipes {gen.failed_recipes}", flush=True)
            items, f = evaluate.load_bench(folder)
            for b in evaluate.BASELINES:
                res = score.score(evaluate.run(items, f, parse_spec(b, evaluate.BASELINES), seed=seed), n_boot=500,
                                  seed=seed)  # fmt: skip
                results[(seed, b)] = res
                by = {k: round(v["pair_accuracy"], 3) for k, v in res["by"]["factor"].items()}
                print(f"  {b:16s} dec {res['decision_accuracy']:.3f}  pair {res['pair_accuracy']:.3f} "
                      f"CI {res['ci95']['pair_accuracy']}  recog {res['recognition_accuracy']}  "
                      f"gap {res['anticipation_gap']}  P1 {res['P1']}  hier {res['hierarchy_score']}  "
                      f"pair/factor {by}", flush=True)  # fmt: skip
    secs = time.perf_counter() - t0

    def every(pol, fn):
        return all(fn(results[(s, pol)]) for s in SEEDS)

    checks = [
        ("always-stop dec=0.50 pair=0", every("always-stop", lambda r: r["decision_accuracy"] == 0.5 and r["pair_accuracy"] == 0)),
        ("always-continue dec=0.50 pair=0", every("always-continue", lambda r: r["decision_accuracy"] == 0.5 and r["pair_accuracy"] == 0)),
        ("recognize pair<=0.10", every("recognize", lambda r: r["pair_accuracy"] <= 0.10)),
        ("recognize recognition dec>=0.90", every("recognize", lambda r: (r["recognition_accuracy"] or 0) >= 0.90)),
        ("recognize gap>=0.4", every("recognize", lambda r: (r["anticipation_gap"] or 0) >= 0.4)),
        ("extrapolate pair>=0.65", every("extrapolate", lambda r: r["pair_accuracy"] >= 0.65)),
        ("obey P1(hard)=0", every("obey", lambda r: r["P1"]["hard"] == 0)),
        ("obey hierarchy<=0.5", every("obey", lambda r: r["hierarchy_score"] <= 0.5)),
        ("generation+scoring <= 900 s", secs <= 900),
    ]  # fmt: skip
    print(f"total seconds (3 seeds, generation + all policies + bootstrap): {secs:.0f}")
    for name, ok in checks:
        print(f"{'MET   ' if ok else 'MISSED'} {name}")


if __name__ == "__main__":
    main()
