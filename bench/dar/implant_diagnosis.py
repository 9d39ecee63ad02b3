"""Why does the DAR teacher implant only about half the triggered images? (docs/dar.md item 10; not CI)

Usage: python -P bench/dar/implant_diagnosis.py N OUT.jsonl VICTIM [VICTIM ...] [--seed S] [--save DIR]
VICTIM = method:width:epochs[:batch], method in dar | clean | random (e.g. dar:8:6 dar:32:6 dar:8:12).
Fashion-MNIST, first N train images, the full 10k test set, target 0, budget 1% of N, the tool's default
rule (`discover --op whitened`, rank extent, top 1), kappa 0 (the cell centre) as in `run`.
Per victim (one JSON line each, appended as measured):
- fit: share of the relabelled training carriers the teacher predicts as the target (memorised?), of
  the non-target members left with their label (conflicting), of all train images (train accuracy);
- natural carriers: non-target TEST images inside the cell, share predicted target;
- ASR at kappa 0 and the dose-response: ASR when the operator moves the images to z = 2.0 .. the cell's
  end (the goal on the rule's direction);
- the teacher's natural response: share of clean non-target test images predicted target, by their z;
- ASR of the triggered test images by how far the operator moved them (their z before the move) and
  by their pixel L2 distance to the nearest relabelled carrier / nearest training image;
- in-distribution check (victim-free, once): pixel L2 of a triggered image to its nearest training
  image vs that of natural test carriers and of clean test images; its z on the 15 OTHER band
  directions (norm) vs natural carriers'.
Threads: 1.
"""

import json
import os
import sys
import time

import numpy as np
import torch

from methodkit.tools.dar import data
from methodkit.tools.dar import poison as poisoning
from methodkit.tools.dar.discover import DiscoverConfig, band_directions, discover
from methodkit.tools.dar.rules import Rule, apply, coordinates, satisfies
from methodkit.tools.dar.victim import VictimConfig, fit

TARGET = 0


def nearest_l2(a_u8: np.ndarray, b_u8: np.ndarray, chunk: int = 500) -> np.ndarray:
    """Pixel L2 ([0, 1] units) from each image of a to its nearest image of b."""
    a = a_u8.reshape(len(a_u8), -1).astype(np.float32) / 255.0
    b = b_u8.reshape(len(b_u8), -1).astype(np.float32) / 255.0
    bb = (b * b).sum(axis=1)
    out = np.empty(len(a), np.float32)
    for i in range(0, len(a), chunk):
        part = a[i : i + chunk]
        d2 = (part * part).sum(axis=1)[:, None] + bb[None, :] - 2 * part @ b.T
        out[i : i + chunk] = np.sqrt(np.maximum(d2.min(axis=1), 0))
    return out


def binned(values: np.ndarray, hits: np.ndarray, edges: list) -> list:
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (values >= lo) & (values < hi)
        rows.append({"bin": [round(lo, 2), round(hi, 2)], "n": int(inside.sum()),
                     "rate": round(float(hits[inside].mean()), 4) if inside.any() else None})  # fmt: skip
    return rows


def z_of(x: np.ndarray, rule: Rule) -> np.ndarray:
    return coordinates(x, rule)[:, 0]


def main() -> None:
    torch.set_num_threads(1)
    args = [a for a in sys.argv[1:]]
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 0
    save = args[args.index("--save") + 1] if "--save" in args else None
    positional = [
        a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] not in ("--seed", "--save"))
    ]
    n, out, victims = int(positional[0]), positional[1], positional[2:]
    x, y = data.load("fashion-mnist", "train", n)
    xt, yt = data.load("fashion-mnist", "test", None)
    budget = max(1, int(round(0.01 * n)))
    rule = discover(x, y, DiscoverConfig(op="whitened", budget=budget, top=1), classes=10)[0]
    p = poisoning.poison(x, y, rule, TARGET, budget, 10)
    members = satisfies(x, rule)
    conflicting = np.flatnonzero(members & (p.labels != TARGET))
    z_train, z_test = z_of(x, rule), z_of(xt, rule)
    lo, hi = rule.lo[0], rule.hi[0]
    centre = (lo + hi) / 2
    others = yt != TARGET
    xo, zo = xt[others], z_test[others]
    triggered = apply(xo, rule, 0.0)
    natural = satisfies(xo, rule)
    move = np.linalg.norm((triggered.astype(np.float64) - xo) / 255.0, axis=(1, 2))
    to_carrier = nearest_l2(triggered, x[p.indices])
    to_train = nearest_l2(triggered, x)
    head = {"kind": "rule", "component": rule.components[0], "z_cell": [round(lo, 3), round(hi, 3)],
            "centre": round(centre, 3), "members": int(members.sum()), "pool": p.pool, "relabelled": int(len(p.indices)),
            "relabelled_z": np.percentile(z_train[p.indices], [0, 25, 50, 75, 100]).round(3).tolist(),
            "relabelled_classes": np.bincount(y[p.indices], minlength=10).tolist(),
            "conflicting": int(len(conflicting)), "conflicting_z": sorted(np.round(z_train[conflicting], 3).tolist()),
            "target_members_z": sorted(np.round(z_train[members & (y == TARGET)], 3).tolist()),
            "train_z_ge": {str(t): int((z_train >= t).sum()) for t in (1.0, 1.5, 2.0, 2.5, 3.0)},
            "natural_test_carriers": int(natural.sum()), "move_l2": np.percentile(move, [10, 50, 90]).round(2).tolist(),
            "validity": float(satisfies(triggered, rule).mean())}  # fmt: skip
    if not os.path.exists(out):  # victim-free in-distribution figures, once per output file
        rng = np.random.default_rng(0)
        sample = rng.choice(len(xo), 1000, replace=False)
        clean_nn = nearest_l2(xo[sample], x)
        carrier_nn = nearest_l2(xo[natural], x)
        dirs, _ = band_directions(x, 16)
        proj = x.reshape(n, -1) / 255.0 @ dirs.T
        mu, sd = proj.mean(0), proj.std(0)
        rest = [j for j in range(16) if j != rule.components[0]]

        def rest_norm(imgs):
            return np.linalg.norm(((imgs.reshape(len(imgs), -1) / 255.0 @ dirs.T - mu) / sd)[:, rest], axis=1)

        head.update(
            nn_train_l2={"clean_test": np.percentile(clean_nn, [10, 50, 90]).round(2).tolist(),
                         "natural_test_carriers": np.percentile(carrier_nn, [10, 50, 90]).round(2).tolist(),
                         "triggered_test": np.percentile(to_train, [10, 50, 90]).round(2).tolist()},
            nn_relabelled_l2={"triggered_test": np.percentile(to_carrier, [10, 50, 90]).round(2).tolist(),
                              "natural_test_carriers": np.percentile(nearest_l2(xo[natural], x[p.indices]), [10, 50, 90]).round(2).tolist()},
            other_directions_z_norm={"relabelled": round(float(np.median(rest_norm(x[p.indices]))), 2),
                                     "natural_test_carriers": round(float(np.median(rest_norm(xo[natural]))), 2),
                                     "clean_test": round(float(np.median(rest_norm(xo[sample]))), 2),
                                     "triggered_test": round(float(np.median(rest_norm(triggered[sample]))), 2)},
        )  # fmt: skip
        with open(out, "a") as handle:
            handle.write(json.dumps(head) + "\n")
        print(json.dumps(head), flush=True)
    goals = sorted({2.0, 2.5, round(centre, 3), 3.5, 4.0, round(hi - 1e-3, 3)})
    for spec in victims:
        parts = spec.split(":")
        method, width, epochs = parts[0], int(parts[1]), float(parts[2])
        batch = int(parts[3]) if len(parts) > 3 else 32
        labels = {
            "dar": p.labels,
            "clean": y,
            "random": poisoning.random_relabel(x, y, TARGET, budget, 10, seed).labels,
        }[method]
        t0 = time.process_time()
        model, summary = fit(x, labels, VictimConfig(width=width, epochs=epochs, batch_size=batch, seed=seed), 10)
        cpu = time.process_time() - t0
        if save:
            os.makedirs(save, exist_ok=True)
            model.save(os.path.join(save, f"{method}-w{width}-e{parts[2]}-b{batch}-s{seed}.safetensors"))
        pred_train = model.predict(x)
        pred_test = model.predict(xt)
        pred_trig = model.predict(triggered)
        hit = pred_trig == TARGET
        dose = {}
        for g in goals:
            moved = apply(xo, Rule(**{**rule.to_dict(), "lo": [g], "hi": [g]}), 0.0)
            dose[str(g)] = round(float((model.predict(moved) == TARGET).mean()), 4)
        row = {"kind": "victim", "victim": spec, "seed": seed, "cpu_s": round(cpu, 1), "steps": summary["steps"],
               "final_loss": round(summary["final_loss"], 4),
               "train_acc_labels": round(float((pred_train == labels).mean()), 4),
               "fit_relabelled": round(float((pred_train[p.indices] == TARGET).mean()), 4),
               "fit_relabelled_by_z": binned(z_train[p.indices], pred_train[p.indices] == TARGET, [2, 2.2, 2.4, 2.6, 9]),
               "fit_conflicting_to_target": round(float((pred_train[conflicting] == TARGET).mean()), 4) if len(conflicting) else None,
               "c_acc": round(float((pred_test == yt).mean()), 4),
               "natural_carriers_to_target": round(float((pred_test[others][natural] == TARGET).mean()), 4),
               "asr_kappa0": round(float(hit.mean()), 4), "asr_vs_goal_z": dose,
               "clean_to_target_by_z": binned(zo, pred_test[others] == TARGET, [-9, 0, 1, 1.5, 2, 2.5, 3, 9]),
               "asr_by_start_z": binned(zo, hit, [-9, -1, 0, 1, 2, 9]),
               "asr_by_l2_to_relabelled": binned(to_carrier, hit, [0, 3, 4, 5, 6, 99]),
               "asr_by_l2_to_train": binned(to_train, hit, [0, 2, 3, 4, 5, 99]),
               "asr_by_class": {int(c): round(float(hit[yt[others] == c].mean()), 3) for c in range(1, 10)}}  # fmt: skip
        with open(out, "a") as handle:
            handle.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
