"""nte headline at CPU scale (issue section 5), reduced to fit a laptop run: Fashion-MNIST.

Trains the zoo (authorized pcnn-p4c8; unauthorized: other seeds of it, pcnn-p4c16, pcnn-p7c24,
cnn3c16, mlp), encodes the test images at PSNR 30/20/15/10, and prints accuracy drops, the
white-noise control, the best filter attack and the Wiener attack. Sizes via environment:
NTE_TRAIN (default 20000), NTE_TEST (2000), NTE_EPOCHS (3), NTE_SEEDS (0,1,2).
"""

from __future__ import annotations

import os
import time

from methodkit.tools.nte import attacks, data
from methodkit.tools.nte.encode import encode
from methodkit.tools.nte.evaluate import evaluate
from methodkit.tools.nte.key import extract_key
from methodkit.tools.nte.models import ModelConfig
from methodkit.tools.nte.zoo import fit

TRAIN = int(os.environ.get("NTE_TRAIN", 20000))
TEST = int(os.environ.get("NTE_TEST", 2000))
EPOCHS = int(os.environ.get("NTE_EPOCHS", 3))
SEEDS = [int(s) for s in os.environ.get("NTE_SEEDS", "0,1,2").split(",")]
OTHERS = ["pcnn-p4c16", "pcnn-p7c24", "cnn3c16", "mlp"]


def main():
    start = time.time()
    x, y = data.from_dataset("fashion-mnist:train", TRAIN)
    xt, yt = data.from_dataset("fashion-mnist:test", TEST)
    public, _ = data.from_dataset("fashion-mnist:train", 5000)
    models = {}
    for seed in SEEDS:
        models[f"pcnn-p4c8-s{seed}"] = fit(ModelConfig("pcnn-p4c8", seed), x, y, epochs=EPOCHS)
    for arch in OTHERS:
        models[f"{arch}-s{SEEDS[0]}"] = fit(ModelConfig(arch, SEEDS[0]), x, y, epochs=EPOCHS)
    print(f"# trained {len(models)} models on {TRAIN} images x {EPOCHS} epochs in {time.time() - start:.0f} s")
    print("psnr  model  role  clean_acc  nte_acc  drop  agreement  max_dlogit")
    for auth_seed in SEEDS[:1]:
        auth = f"pcnn-p4c8-s{auth_seed}"
        stem = models[auth].stem_spec()
        key = extract_key(stem)
        for psnr in (30.0, 20.0, 15.0, 10.0):
            cipher = encode(xt, key, psnr, seed=0, w_pixel=stem.pixel_matrix())
            rows = evaluate(
                models, {auth}, xt, yt, {"nte": {"x": cipher.view, "patches": None, "certificate": cipher.certificate}}
            )
            for r in rows:
                print(
                    f"{psnr:g}  {r.model}  {r.role}  {r.clean_accuracy:.4f}  {r.accuracy:.4f}  {r.drop:.4f}  {r.agreement:.4f}  {r.max_abs_dlogit:.2e}"
                )
            if psnr == 10.0:
                control = encode(xt, key, psnr, seed=0, noise="gaussian")
                c_rows = evaluate({auth: models[auth]}, {auth}, xt, yt, {"g": {"x": control.view, "patches": None}})
                print(f"# control gaussian 10 dB: authorized drop {c_rows[0].drop:.4f}")
                filters = {"blur:1": attacks.blur(cipher.view, 1.0), "median:3": attacks.median(cipher.view, 3),
                           "jpeg:75": attacks.jpeg(cipher.view, 75), "wiener": attacks.wiener(cipher.view, public, 4, 4)}  # fmt: skip
                others = {k: m for k, m in models.items() if k != auth}
                for name, restored in filters.items():
                    a_rows = evaluate(others, set(), xt, yt, {name: {"x": restored, "patches": None}})
                    drops = ", ".join(f"{r.model}={r.drop:.3f}" for r in a_rows)
                    print(f"# attack {name} at 10 dB, unauthorized drops: {drops}")
    print(f"# total {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
