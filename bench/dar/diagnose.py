"""Why DAR does not implant at laptop scale: one teacher per call, with the fit of the relabelled images.

Usage: python -P bench/dar/diagnose.py N EPOCHS WIDTH BUDGET BATCH RANK [freq] [xi2] [kd]
RANK: cost | entropy (the library's rankings), conflict (pool closest to the budget, then
cost) or salient (pool <= 1.2 x budget, most expensive operator first: the rules most unlike an
average image). Prints the rule, the share of relabelled train images the teacher predicts as
the target (did it fit them?), of conflicting members, test ASR at kappa 0 / 0.5 / 1 and, with
kd, the clean KD student's ASR. Fashion-MNIST, first N train / 2,000 test images, target 0.
The figures of docs/dar.md item 3 were measured with this script.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from methodkit.tools.dar import data
from methodkit.tools.dar import poison as poisoning
from methodkit.tools.dar.discover import DiscoverConfig, discover
from methodkit.tools.dar.evaluate import evaluate
from methodkit.tools.dar.rules import apply, satisfies
from methodkit.tools.dar.victim import VictimConfig, fit


def main(argv: list[str]) -> None:
    torch.set_num_threads(1)
    n, epochs, width, share, batch, rank = (
        int(argv[0]),
        float(argv[1]),
        int(argv[2]),
        float(argv[3]),
        int(argv[4]),
        argv[5],
    )
    flags = argv[6:]
    x, y = data.load("fashion-mnist", "train", n)
    xt, yt = data.load("fashion-mnist", "test", 2000)
    budget = poisoning.resolve_budget(share, n)
    cfg = DiscoverConfig(budget=budget, top=100000, rank=rank if rank in ("cost", "entropy") else "entropy",
                         xi=2 if "xi2" in flags else None, op="frequency" if "freq" in flags else "spatial",
                         s_hi=max(0.03, 2.5 * budget / n))  # fmt: skip
    rules = discover(x, y, cfg, classes=10)
    if rank == "conflict":
        rules.sort(key=lambda r: (r.pool - budget, r.cost))
    if rank == "salient":
        rules = sorted((r for r in rules if r.pool <= 1.2 * budget), key=lambda r: -r.cost)
    rule = rules[0]
    print(rank, rule.window or rule.coeffs, np.round(rule.lo, 2).tolist(), f"support {rule.support:.4f}",
          f"entropy {rule.entropy:.2f} pool {rule.pool} cost {rule.cost:.3f}", flush=True)  # fmt: skip
    p = poisoning.poison(x, y, rule, 0, budget, 10)
    print("relabelled", len(p.indices), "conflicting", p.conflicting)
    print("test trigger validity", satisfies(apply(xt, rule, 0.5), rule).mean(), "natural test members",
          satisfies(xt, rule).sum())  # fmt: skip
    t = time.time()
    teacher, info = fit(x, p.labels, VictimConfig(width=width, epochs=epochs, batch_size=batch), 10)
    print(info, round(time.time() - t))
    print("relabelled train images predicted target", (teacher.predict(x[p.indices]) == 0).mean())
    conflicting = np.flatnonzero(satisfies(x, rule) & (p.labels != 0))
    if len(conflicting):
        print("conflicting members predicted target", (teacher.predict(x[conflicting]) == 0).mean())
    r = evaluate(teacher, xt, yt, rule, 0)
    print("teacher", {k: r[k] for k in ("c_acc", "asr", "r_acc", "natural_trigger_rate", "trigger_validity")})
    for kappa in (0.0, 1.0):
        print(" kappa", kappa, evaluate(teacher, xt, yt, rule, 0, kappa)["asr"])
    if "kd" in flags:
        student, _ = fit(x, y, VictimConfig(arch="cnn-xs", width=width, epochs=epochs, batch_size=batch), 10,
                         teacher=teacher)  # fmt: skip
        r = evaluate(student, xt, yt, rule, 0)
        print("student", {k: r[k] for k in ("c_acc", "asr", "r_acc")}, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
