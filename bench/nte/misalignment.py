"""Why does pcnn-p7c24 resist NTE noise? The method's own misalignment measures per unauthorized model.

For each seed s (authorized pcnn-p4c8-s{s}, its key) and each unauthorized model of the zoo, at 10 dB
on 2,000 Fashion-MNIST test images: accuracy drop under NTE (shared and patch layouts) and under
white noise of the same PSNR; and from `spectrum.pair` on 256 clean images: noise_share (the share
of the NTE noise, cut into B's patches, that lies in row(W'_B): is B's stem aligned with the key's
null space? chance = rank / n), mc_ratio (B's stem gain on NTE noise / on white noise) and snr_mc
(B's feature noise-to-signal). Spearman(snr_mc, NTE drop) over the unauthorized CNNs, per layout.
Needs the zoo of bench/nte/effect.py (NTE_ZOO, 20k x 3 epochs); torch on one thread.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from methodkit.tools.nte import data
from methodkit.tools.nte.encode import encode
from methodkit.tools.nte.key import extract_key
from methodkit.tools.nte.spectrum import pair
from methodkit.tools.nte.zoo import accuracy, load_model

ZOO = Path(os.environ.get("NTE_ZOO", "zoo"))
SEEDS = [int(s) for s in os.environ.get("NTE_SEEDS", "0,1,2").split(",")]
ARCHS = ("pcnn-p4c16", "pcnn-p7c24", "cnn3c16", "mlp")


def main():
    torch.set_num_threads(1)
    cpu = time.process_time()
    xt, yt = data.from_dataset("fashion-mnist:test", 2000)
    print("seed  model  clean  drop_shared  drop_patch  drop_white  share_shared  share_patch  chance"
          "  mc_shared  mc_patch  snr_shared  snr_patch")  # fmt: skip
    rows = []
    for seed in SEEDS:
        auth = load_model(ZOO / f"pcnn-p4c8-s{seed}.safetensors")
        stem_a = auth.stem_spec()
        key = extract_key(stem_a)
        views = {lay: encode(xt, key, 10.0, seed=seed, layout=lay).view for lay in ("shared", "patch")}
        views["white"] = encode(xt, key, 10.0, seed=seed, noise="gaussian").view
        names = [f"pcnn-p4c8-s{s}" for s in SEEDS if s != seed] + [f"{a}-s{seed}" for a in ARCHS]
        for name in names:
            model = load_model(ZOO / f"{name}.safetensors")
            clean = accuracy(model, xt, yt)
            drops = {c: clean - accuracy(model, v, yt) for c, v in views.items()}
            spec = {
                lay: pair(
                    "a", stem_a, name, model.stem_spec(), key=key, clean=xt[:256], psnr=10.0, seed=seed, layout=lay
                )  # fmt: skip
                for lay in ("shared", "patch")
            }
            row = {"seed": seed, "model": name, "clean": clean, **{f"drop_{c}": d for c, d in drops.items()}}
            for lay, sp in spec.items():
                row |= {f"share_{lay}": sp.noise_share, f"mc_{lay}": sp.mc_ratio, f"snr_{lay}": sp.snr_mc}
            row["chance"] = spec["shared"].noise_share_chance
            rows.append(row)
            print(f"{seed}  {name}  {clean:.4f}  {drops['shared']:.4f}  {drops['patch']:.4f}  {drops['white']:.4f}"
                  f"  {row['share_shared']:.3f}  {row['share_patch']:.3f}  {row['chance']:.3f}"
                  f"  {row['mc_shared']:.3f}  {row['mc_patch']:.3f}  {row['snr_shared']:.3f}  {row['snr_patch']:.3f}",
                  flush=True)  # fmt: skip
    print("# means over seeds per group (drops in points)")
    groups = {}
    for r in rows:
        group = "other-seed" if r["model"].startswith("pcnn-p4c8") else r["model"].rsplit("-s", 1)[0]
        groups.setdefault(group, []).append(r)
    keys = ("drop_shared", "drop_patch", "drop_white", "share_shared", "chance", "mc_shared", "snr_shared",
            "snr_patch")  # fmt: skip
    for group, rs in groups.items():
        means = {k: np.mean([r[k] for r in rs]) for k in keys}
        print(f"#   {group}: " + ", ".join(
            f"{k} {100 * v:.1f}" if k.startswith("drop") else f"{k} {v:.3f}" for k, v in means.items()))  # fmt: skip
    cnns = [r for r in rows if not r["model"].startswith("mlp")]
    for lay in ("shared", "patch"):
        rho = stats.spearmanr([r[f"snr_{lay}"] for r in cnns], [r[f"drop_{lay}"] for r in cnns]).statistic
        print(f"# {lay}: Spearman(snr_mc, NTE drop at 10 dB) over {len(cnns)} unauthorized CNNs = {rho:.3f}")
    rho = stats.spearmanr([r["snr_shared"] for r in cnns], [r["drop_white"] for r in cnns]).statistic
    print(f"# Spearman(snr_mc shared, white-noise drop) = {rho:.3f}")
    print(f"# {time.process_time() - cpu:.0f} CPU-s")


if __name__ == "__main__":
    main()
