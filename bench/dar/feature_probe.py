"""Probe of the feature-space reading of DAR (not part of the tool): discover the rule in a clean
surrogate's feature space, relabel its carriers, train a victim from scratch, and trigger test images
by a local (8x8 pixel) patch found by projected gradient descent on the surrogate.

Usage: python -P bench/dar/feature_probe.py N EPOCHS [PATCH [STEPS]]
Fashion-MNIST, first N train / 1,000 test images, target 0, budget 2% of N, cnn-s width 8, batch 32.
Surrogate: cnn-s trained on clean labels (seed 1); features = its penultimate layer, z-scored PCA
(16 components); subspaces = pairs of components, 6 levels on [-3, 3] (CLIQUE cells as in discover);
cells with support in [1%, 5%], label entropy >= 0.5 and pool >= budget, ranked by isolation (margin
0.5 z). Victim: cnn-s from scratch, seed 0, on the relabelled set. Operator: STEPS (40) signed-gradient
steps (0.03 per pixel) on the PATCH x PATCH (8) block with the largest surrogate-gradient mass, moving
the image's two coordinates to the cell centre. Prints the ASR on all triggered images and on those
the operator brought into the cell (validity measured on the surrogate).
"""

from __future__ import annotations

import itertools
import math
import sys

import numpy as np
import torch

from methodkit.tools.dar import data
from methodkit.tools.dar.defenses import penultimate
from methodkit.tools.dar.victim import VictimConfig, fit


def main(argv):
    torch.set_num_threads(2)
    n, epochs = int(argv[0]), float(argv[1])
    patch = int(argv[2]) if len(argv) > 2 else 8
    steps = int(argv[3]) if len(argv) > 3 else 40
    x, y = data.load("fashion-mnist", "train", n)
    xt, yt = data.load("fashion-mnist", "test", 1000)
    budget = max(1, int(0.02 * n))
    cfg = VictimConfig(width=8, epochs=epochs, batch_size=32)
    surrogate, _ = fit(x, y, VictimConfig(width=8, epochs=epochs, batch_size=32, seed=1), 10)
    f = penultimate(surrogate, x)
    mean = f.mean(0)
    _, _, vt = np.linalg.svd(f - mean, full_matrices=False)
    basis = vt[:16]
    proj = (f - mean) @ basis.T
    sd = proj.std(0) + 1e-9
    z = proj / sd
    edges = np.linspace(-3, 3, 7)
    levels = np.clip(np.digitize(z, edges[1:-1]), 0, 5)
    best = None
    for a, b in itertools.combinations(range(16), 2):
        codes = levels[:, a] * 6 + levels[:, b]
        for code in np.unique(codes):
            inside = codes == code
            m = int(inside.sum())
            if not 0.01 * n <= m <= 0.05 * n:
                continue
            counts = np.bincount(y[inside], minlength=10) / m
            h = -sum(p * math.log(p) for p in counts if p > 0) / math.log(10)
            pool = int((inside & (y != 0)).sum())
            if h < 0.5 or pool < budget:
                continue
            lo = edges[[code // 6, code % 6]]
            hi = lo + 1.0
            zz = z[:, [a, b]]
            d = np.linalg.norm(np.maximum(lo - zz, 0) + np.maximum(zz - hi, 0), axis=1)
            near = int(((d > 0) & (d < 0.5)).sum())
            iso = m / (m + near)
            if best is None or iso > best[0]:
                best = (iso, a, b, lo, hi, m, pool, h, near)
    iso, a, b, lo, hi, m, pool, h, near = best
    print(f"rule: components ({a}, {b}), z box {lo.tolist()}..{hi.tolist()}, members {m}, pool {pool}, "
          f"entropy {h:.2f}, near {near}, isolation {iso:.3f}", flush=True)  # fmt: skip
    zz = z[:, [a, b]]
    inside = ((zz >= lo) & (zz < hi)).all(1)
    carriers = np.flatnonzero(inside & (y != 0))
    centre = (lo + hi) / 2
    chosen = carriers[np.argsort(np.abs(zz[carriers] - centre).max(1))[:budget]]
    labels = y.copy()
    labels[chosen] = 0
    victim, _ = fit(x, labels, cfg, 10)
    fit_rate = np.mean(victim.predict(x[chosen]) == 0)
    # natural test carriers
    zt = ((penultimate(surrogate, xt) - mean) @ basis.T / sd)[:, [a, b]]
    others = yt != 0
    carriers_t = ((zt >= lo) & (zt < hi)).all(1) & others
    print(f"fit {fit_rate:.3f}; test carriers {carriers_t.sum()}, to target "
          f"{np.mean(victim.predict(xt[carriers_t]) == 0):.3f}", flush=True)  # fmt: skip
    # operator: local PGD patch on the surrogate
    body = surrogate.net.body
    w_ab = torch.tensor(basis[[a, b]] / sd[[a, b]][:, None], dtype=torch.float32)
    mu = torch.tensor(mean, dtype=torch.float32)
    goal = torch.tensor(centre, dtype=torch.float32)
    xs = xt[others]
    img = torch.from_numpy(xs).float().div(255.0).unsqueeze(1)
    cfgs = surrogate.config

    def coords(im):
        return (body[:-1]((im - cfgs["mean"]) / cfgs["std"]) - mu) @ w_ab.T

    probe = img.clone().requires_grad_(True)
    ((coords(probe) - goal) ** 2).sum().backward()
    mass = torch.nn.functional.avg_pool2d(probe.grad.abs(), patch, stride=1)
    pos = mass.flatten(1).argmax(1)
    rows, cols = (pos // mass.shape[-1]).numpy(), (pos % mass.shape[-1]).numpy()
    mask = torch.zeros_like(img)
    for i, (r, c) in enumerate(zip(rows, cols)):
        mask[i, 0, r : r + patch, c : c + patch] = 1
    adv = img.clone()
    for _ in range(steps):
        adv.requires_grad_(True)
        loss = ((coords(adv) - goal) ** 2).sum()
        (grad,) = torch.autograd.grad(loss, adv)
        adv = (adv.detach() - 0.03 * grad.sign() * mask).clamp(0, 1)
    trig = np.rint(adv.detach().squeeze(1).numpy() * 255).astype(np.uint8)
    zt_trig = ((penultimate(surrogate, trig) - mean) @ basis.T / sd)[:, [a, b]]
    valid_rows = ((zt_trig >= lo) & (zt_trig < hi)).all(1)
    valid = valid_rows.mean()
    hits = victim.predict(trig) == 0
    asr = hits.mean()
    print(
        f"ASR on the {valid_rows.sum()} triggered images inside the cell: {hits[valid_rows].mean():.3f}; "
        f"outside: {hits[~valid_rows].mean():.3f}; patch {patch}, steps {steps}"
    )
    clean_acc = np.mean(victim.predict(xt) == yt)
    sur_asr = np.mean(surrogate.predict(trig) == 0)
    print(f"victim C-Acc {clean_acc:.3f}; operator validity on the surrogate {valid:.3f}; ASR {asr:.3f} "
          f"(surrogate itself predicts target on {sur_asr:.3f} of triggered images)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
