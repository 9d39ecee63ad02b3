"""Which clean-data ranking of whitened rules predicts the backdoor a victim learns (not part of CI).

Usage: python -P bench/dar/rank_study.py N EPOCHS BUDGET OUT.jsonl [--seed S] [--only 4u,8l,...]
Fashion-MNIST, first N train / 1,000 test images, target 0, `discover --op whitened` (16 band
directions, dims 1, support [0.5%, 3%], entropy >= 0.5, pool >= budget): EVERY passing rule is poisoned
(`poison`: the budget's most central non-target members relabelled), a cnn-s teacher (width 8, batch 32)
is trained on it and a cnn-xs clean KD student (alpha 0.9) distilled from it; ASR at kappa 0 (the cell
centre). One clean teacher and one random-relabel teacher (same count) are trained once and evaluated
with each rule's operator (the issue's control). One JSON line per rule, appended as measured, with the
clean-data criteria (reach, extent, cost, component, support, entropy, pool); at the end the Spearman
correlation of each criterion with the DAR student's ASR. `--only 4u,3u,7l` measures just those rules
(component, upper/lower tail). Threads: 1 (OMP/torch).
"""

import json
import sys
import time

import torch
from scipy.stats import spearmanr

from methodkit.tools.dar import data
from methodkit.tools.dar import poison as poisoning
from methodkit.tools.dar.discover import DiscoverConfig, discover, extent, reach
from methodkit.tools.dar.evaluate import evaluate
from methodkit.tools.dar.poison import resolve_budget
from methodkit.tools.dar.victim import VictimConfig, fit


def main() -> None:
    torch.set_num_threads(1)
    n, epochs, share, out = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 0
    x, y = data.load("fashion-mnist", "train", n)
    xt, yt = data.load("fashion-mnist", "test", 1000)
    budget = resolve_budget(share, n)
    rules = discover(x, y, DiscoverConfig(op="whitened", budget=budget, top=100, kappa=0.0, rank="reach"), classes=10)
    if "--only" in sys.argv:
        wanted = sys.argv[sys.argv.index("--only") + 1].split(",")
        rules = [r for r in rules if f"{r.components[0]}{'u' if r.lo[0] >= 0 else 'l'}" in wanted]
    teacher_cfg = VictimConfig(width=8, epochs=epochs, batch_size=32, seed=seed)
    student_cfg = VictimConfig(arch="cnn-xs", width=8, epochs=epochs, batch_size=32, seed=seed)
    clean, _ = fit(x, y, teacher_cfg, 10)
    rand = poisoning.random_relabel(x, y, 0, budget, 10, seed)
    random_teacher, _ = fit(x, rand.labels, teacher_cfg, 10)
    rows = []
    for i, rule in enumerate(rules):
        t0 = time.process_time()
        p = poisoning.poison(x, y, rule, 0, budget, 10)
        teacher, _ = fit(x, p.labels, teacher_cfg, 10)
        student, _ = fit(x, y, student_cfg, 10, teacher=teacher)
        row = {"rank_reach": i, "component": rule.components[0], "tail": "upper" if rule.lo[0] >= 0 else "lower",
               "reach": reach(rule), "extent": extent(rule), "cost": rule.cost, "support": rule.support,
               "entropy": rule.entropy, "pool": rule.pool, "relabelled": int(len(p.indices))}  # fmt: skip
        for name, model in (("teacher", teacher), ("student", student), ("clean", clean), ("random", random_teacher)):
            m = evaluate(model, xt, yt, rule, 0, kappa=0.0)
            row[f"asr_{name}"] = m["asr"]
            row[f"c_acc_{name}"] = m["c_acc"]
        row["cpu_s"] = round(time.process_time() - t0, 1)
        rows.append(row)
        with open(out, "a") as handle:
            handle.write(json.dumps(row) + "\n")
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    for criterion, sign in (("reach", 1), ("extent", 1), ("cost", 1), ("component", -1), ("support", 1)):
        values = [sign * r[criterion] for r in rows]
        for stage in ("teacher", "student"):
            rho = spearmanr(values, [r[f"asr_{stage}"] for r in rows]).statistic
            print(f"spearman {criterion:9s} vs {stage} ASR: {rho:+.2f}")


if __name__ == "__main__":
    main()
