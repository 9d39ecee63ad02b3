"""Why DAR does not implant, variant by variant: one poisoned teacher per variant, with its diagnosis.

Usage: python -P bench/dar/variants.py N EPOCHS VARIANT [VARIANT ...]
VARIANT:
  cost           the issue's ranking: cheapest operator first (3x3 window, xi 4), budget 2% of N
  cost-allpool   the same rule, every non-target member relabelled (no conflicting member left)
  iso            --rank isolation (3x3, xi 4, margin 0.5), budget 2%
  iso-xi2        --rank isolation with xi 2
  iso16          --rank isolation, 2x2 window, xi 16, margin 0.25
  coarse         --rank isolation on 4x4-pooled images, 2x2 window (an 8x8 pixel region), margin 0.25
  clean          no poisoning: sensitivity of a clean teacher to each operator (prediction flips)
Fashion-MNIST, first N train / 1,000 test images, target 0, cnn-s width 8, batch 32, seed 0.
Per variant: relabelled count, fit (share of relabelled train images the teacher predicts as the
target), conflicting members (and the share predicted target), natural test carriers of the rule
(non-target test images satisfying it) and the share predicted target, C-Acc, ASR at kappa 0/0.5/1,
and the near-duplicate count / isolation of the rule. The diagnosis in docs/dar.md (item 6) was
measured with this script (and its predecessor bench/dar/diagnose.py).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from methodkit.tools.dar import data
from methodkit.tools.dar import poison as poisoning
from methodkit.tools.dar.discover import DiscoverConfig, discover
from methodkit.tools.dar.rules import apply, badnets, satisfies
from methodkit.tools.dar.victim import VictimConfig, fit

RULES = {
    "cost": dict(),
    "cost-allpool": dict(),
    "iso": dict(rank="isolation", margin=0.5),
    "iso-xi2": dict(rank="isolation", margin=0.5, xi=2),
    "iso16": dict(rank="isolation", margin=0.25, xi=16, window=2),
    "coarse": dict(rank="isolation", margin=0.25, window=2, scale=4),
}


def main(argv: list[str]) -> None:
    torch.set_num_threads(2)
    n, epochs, variants = int(argv[0]), float(argv[1]), argv[2:]
    x, y = data.load("fashion-mnist", "train", n)
    xt, yt = data.load("fashion-mnist", "test", 1000)
    others = yt != 0
    budget = poisoning.resolve_budget(0.02, n)
    victim = VictimConfig(width=8, epochs=epochs, batch_size=32)
    for variant in variants:
        if variant == "clean":
            model, _ = fit(x, y, victim, 10)
            base = model.predict(xt[others])
            print("clean", "c_acc", round(float((model.predict(xt) == yt).mean()), 3), flush=True)
            for name in ("cost", "coarse"):
                rule = discover(x, y, DiscoverConfig(budget=budget, top=1, s_hi=0.05, cost_images=200, **RULES[name]))[
                    0
                ]
                moved = model.predict(apply(xt[others], rule, 0.5))
                print(f"  sensitivity {name}: flips {np.mean(moved != base):.3f}, to target {np.mean(moved == 0):.3f}")
            moved = model.predict(badnets(xt[others]))
            print(f"  sensitivity badnets: flips {np.mean(moved != base):.3f}, to target {np.mean(moved == 0):.3f}")
            continue
        rule = discover(x, y, DiscoverConfig(budget=budget, top=1, s_hi=0.05, cost_images=200, **RULES[variant]))[0]
        if variant == "cost-allpool":
            chosen = np.flatnonzero(satisfies(x, rule) & (y != 0))
        else:
            chosen = poisoning.poison(x, y, rule, 0, budget, 10).indices
        labels = y.copy()
        labels[chosen] = 0
        start = time.process_time()
        model, _ = fit(x, labels, victim, 10)
        conflicting = np.flatnonzero(satisfies(x, rule) & (labels != 0))
        carriers = np.flatnonzero(satisfies(xt, rule) & others)
        row = {
            "relabelled": len(chosen),
            "fit": np.mean(model.predict(x[chosen]) == 0),
            "conflicting": len(conflicting),
            "conflicting_to_target": np.mean(model.predict(x[conflicting]) == 0) if len(conflicting) else None,
            "test_carriers": len(carriers),
            "carriers_to_target": np.mean(model.predict(xt[carriers]) == 0) if len(carriers) else None,
            "c_acc": np.mean(model.predict(xt) == yt),
            **{f"asr_k{k}": np.mean(model.predict(apply(xt[others], rule, k)) == 0) for k in (0.0, 0.5, 1.0)},
            "near": rule.near,
            "isolation": rule.isolation,
        }
        print(variant, rule.window, np.round(rule.lo, 3).tolist(), f"scale {rule.scale}",
              {k: (round(float(v), 3) if v is not None else None) for k, v in row.items()},
              f"cpu {time.process_time() - start:.0f} s", flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
