"""Decode weights on trained digit sums (issue 36 item 5): how many near-certain digits does each rewrite?

    python -P bench/casper/decode_weights.py SEED [N_DIGITS] [N_SUMS] [THRESHOLD]

Trains the MNIST-add digit net as the acceptance run does (sum-only supervision, seed SEED), draws
N_SUMS (20) sums of N_DIGITS (1024) digits, projects each with Casper and decodes with
`--decode-weights linear` (w = 1 - mu) and `log` (w = -log mu), both on the projection's mu and on the
raw probabilities (no layer). A digit is near-certain when the predictor's top probability is
>= THRESHOLD (0.99); it is rewritten when the decoded digit differs from that top digit. One JSON
line per (input, weighting): near-certain digits, rewrites, of which to the true digit (corrections)
and away from it (damage), and the sums' validity, exact match and digit accuracy.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def main(seed: int, n_digits: int = 1024, n_sums: int = 20, threshold: float = 0.99) -> None:
    import torch

    from methodkit.tools.casper import tasks
    from methodkit.tools.casper.builders import compiled
    from methodkit.tools.casper.decode import Decoder
    from methodkit.tools.casper.projection import Projector

    torch.set_num_threads(1)
    add1 = tasks.generate("mnist-add", size=0, digits=1, n=0, n_test=200, seed=seed)
    model = tasks.train("mnist-add", "casper", add1, epochs=6, batch_size=16, lr=5e-3, seed=seed).model.eval()
    data = tasks.generate("mnist-add", size=0, digits=n_digits, n=0, n_test=n_sums, seed=seed)
    program = compiled("addition", n_digits, False)
    projector = Projector(program)
    decoders = {w: Decoder(program, weighting=w) for w in ("linear", "log")}
    images = data["pool_images"]
    stats = {(src, w): dict.fromkeys(("near_certain", "rewrites", "corrections", "damage", "valid",
                                      "exact_sum", "digits_right"), 0)
             for src in ("mu", "probabilities") for w in decoders}  # fmt: skip
    for i in range(n_sums):
        with torch.no_grad():
            pa = torch.softmax(model["digit"](torch.as_tensor(images[data["test_a_img"][i]])), -1)
            pb = torch.softmax(model["digit"](torch.as_tensor(images[data["test_b_img"][i]])), -1)
            ps = torch.softmax(model["sum"](pa, pb), -1).numpy()
        ps = np.concatenate([ps, np.full((1, 10), 0.1)])
        pa, pb = pa.numpy(), pb.numpy()
        theta = tasks.addition_theta(program, pa[None], pb[None], ps[None])
        mu, states = projector.project(theta)
        probs = np.r_[pa, pb]
        top, certain = probs.argmax(1), probs.max(1) >= threshold
        truth = np.r_[data["test_a"][i], data["test_b"][i]]
        for src, point in (("mu", mu[0]), ("probabilities", theta[0])):
            for w, decoder in decoders.items():
                a, b, s = tasks.read_addition(program, decoder.decode(point).y, n_digits)
                got = np.r_[a, b]
                rewritten = certain & (got != top)
                row = stats[(src, w)]
                row["near_certain"] += int(certain.sum())
                row["rewrites"] += int(rewritten.sum())
                row["corrections"] += int((rewritten & (got == truth)).sum())
                row["damage"] += int((rewritten & (top == truth)).sum())
                value = lambda d: sum(int(x) * 10**k for k, x in enumerate(d))  # noqa: E731
                row["valid"] += int(value(a) + value(b) == value(s))
                row["exact_sum"] += int(np.array_equal(s, data["test_s"][i]))
                row["digits_right"] += int((got == truth).sum())
    for (src, w), row in stats.items():
        print(json.dumps({"seed": seed, "digits": n_digits, "sums": n_sums, "threshold": threshold,
                          "decoded_from": src, "weights": w, **row,
                          "digit_accuracy": row["digits_right"] / (2 * n_digits * n_sums)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    args = sys.argv[1:]
    main(int(args[0]), *(int(a) for a in args[1:3]), *(float(a) for a in args[3:4]))
