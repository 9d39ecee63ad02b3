"""Acceptance runs of craft-finetune at laptop scale (one seed set, equal interaction budget).

    [CRAFT_MINIBATCH=512 CRAFT_LR=1e-4 CRAFT_ADV_FLOOR=0 CRAFT_CRITICAL=collision,ttc,... CRAFT_ARCH=mlp
     CRAFT_EVAL_SUITE=hwy-mini CRAFT_EVAL_EVERY=1] nice -n 5 .venv/bin/python -P bench/craft/acceptance.py \
        OUT_DIR ITERATIONS EPISODES SEEDS METHODS...

Demos from the first DEMO_ROUTES routes per family of hwy-train, BC (mlp), each method
fine-tuned on hwy-train for ITERATIONS x EPISODES, every policy evaluated greedily on hwy-test
(120 held-out routes). Writes OUT_DIR/results.jsonl (one line per run: method, seed, DS, SR,
per-family DS) and prints a table. CRAFT_ARCH picks the encoder (mlp, attn). With CRAFT_EVAL_SUITE the
policy is also evaluated greedily on that suite every CRAFT_EVAL_EVERY iterations (the stability criterion:
the DS standard deviation over the last STABILITY_WINDOW of them, in "eval_ds_std_last").
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from methodkit.core.train import TrainConfig
from methodkit.tools.craft import demos, evaluate, finetune, kernels, policy, pretrain, suites

DEMO_ROUTES = 8  # per family
MINIBATCH = int(os.environ.get("CRAFT_MINIBATCH", "512"))
LR = float(os.environ.get("CRAFT_LR", "1e-4"))
ADV_FLOOR = float(os.environ.get("CRAFT_ADV_FLOOR", "0"))
CRITICAL = tuple(os.environ.get("CRAFT_CRITICAL", ",".join(kernels.CRITICAL_NAMES.values())).split(","))
ARCH = os.environ.get("CRAFT_ARCH", "mlp")
EVAL_SUITE = os.environ.get("CRAFT_EVAL_SUITE")
EVAL_EVERY = int(os.environ.get("CRAFT_EVAL_EVERY", "1")) if EVAL_SUITE else 0
STABILITY_WINDOW = 30  # iterations (the "last 30 iterations")


def _std_last(values: list[float]) -> float | None:
    return float(np.std(values[-STABILITY_WINDOW:])) if len(values) >= 2 else None


def main(out: str, iterations: int, episodes: int, seeds: list[int], methods: list[str], arch: str = ARCH) -> None:
    torch.set_num_threads(1)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    train = suites.builtin("hwy-train")
    demo_routes = [r for f in suites.FAMILIES for r in [x for x in train if x["family"] == f][:DEMO_ROUTES]]
    test = suites.builtin("hwy-test")
    test_scenes = suites.scenes(test)
    eval_routes = suites.builtin(EVAL_SUITE) if EVAL_SUITE else None
    t0 = time.monotonic()
    arrays, counts = demos.run(demo_routes)
    print(f"demos {arrays['obs'].shape[0]} decisions {time.monotonic() - t0:.0f}s", flush=True)
    results = folder / "results.jsonl"
    for seed in seeds:
        bc, info = pretrain.run(arrays["obs"], arrays["expert_idx"], arch, TrainConfig(steps=2000, batch_size=256,
                                lr=1e-3, seed=seed, log_every=500))  # fmt: skip
        state = {k: v.clone() for k, v in bc.state_dict().items()}
        for method in methods:
            model = policy.build(arch)
            model.load_state_dict(state)
            model.eval()
            t0 = time.monotonic()
            cfg = finetune.FinetuneConfig(method=method, iterations=iterations, episodes=episodes, seed=seed,
                                          minibatch=MINIBATCH, lr=LR, adv_floor=ADV_FLOOR, critical_events=CRITICAL,
                                          eval_every=EVAL_EVERY)  # fmt: skip
            model, res = finetune.run(model, arch, train, cfg, eval_routes=eval_routes)
            ev = evaluate.run(model, test, test_scenes)["summary"]
            row = {"method": method, "arch": arch, "seed": seed, "iterations": iterations, "episodes": episodes,
                   "ds": ev["ds"], "sr": ev["sr"], "rc": ev["rc"], "minibatch": MINIBATCH, "lr": LR, "adv_floor": ADV_FLOOR, "critical": CRITICAL, "families": {k: v["ds"] for k, v in
                   ev["families"].items()}, "infractions": ev["infractions"], "bc_accuracy": info["accuracy"],
                   "train_ds_last": [h["train_ds"] for h in res.history], "seconds": time.monotonic() - t0}  # fmt: skip
            if eval_routes:
                row["eval_suite"] = EVAL_SUITE
                row["eval_ds"] = [h["eval_ds"] for h in res.history if "eval_ds" in h]
                row["eval_ds_std_last"] = _std_last(row["eval_ds"])
                row["train_ds_std_last"] = _std_last(row["train_ds_last"])
            with open(results, "a") as handle:
                handle.write(json.dumps(row) + "\n")
            fams = " ".join(f"{k}={v:.1f}" for k, v in row["families"].items())
            stab = f" std_last{STABILITY_WINDOW} eval {row['eval_ds_std_last']:.2f}" if eval_routes else ""
            print(f"{method:16s} {arch} seed {seed} DS {ev['ds']:.2f} SR {ev['sr']:.1f} {fams}{stab} "
                  f"({row['seconds']:.0f}s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], int(a[1]), int(a[2]), [int(s) for s in a[3].split(",")], a[4:])
