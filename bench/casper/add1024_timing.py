"""Per-instance inference time of Casper on MNIST-add at N=1024 digits (issue 8: decode <= 50 ms).

    python -P bench/casper/add1024_timing.py [SEED] [WEIGHTS.pt]

Trains the digit/sum predictor as the acceptance run does (sum-only, N=1, 6 epochs; or loads the
torch.save'd model dict WEIGHTS), then times each stage on 20 test sums of 1,024 digits, one
instance at a time, in CPU time (time.process_time) and wall time: the predictor, the exact
projection (5,123 rows, 32,780 variables), the hard decode (Viterbi over carries) and the
integer certificate that `project` runs before writing. One line per stage, then the total.
"""

from __future__ import annotations

import sys
import time

import numpy as np


def main(seed: int = 1, weights: str | None = None) -> None:
    import torch

    from methodkit.tools.casper import tasks
    from methodkit.tools.casper.builders import compiled
    from methodkit.tools.casper.decode import Decoder, certify
    from methodkit.tools.casper.projection import Projector

    torch.set_num_threads(1)
    if weights:
        model = torch.load(weights, weights_only=False)
    else:
        add1 = tasks.generate("mnist-add", size=0, digits=1, n=0, n_test=200, seed=seed)
        model = tasks.train("mnist-add", "casper", add1, epochs=6, batch_size=16, lr=5e-3, seed=seed).model
    n_digits = 1024
    data = tasks.generate("mnist-add", size=0, digits=n_digits, n=0, n_test=20, seed=seed)
    c0, w0 = time.process_time(), time.perf_counter()
    program = compiled("addition", n_digits, False)
    projector, decoder = Projector(program), Decoder(program)
    setup = (time.process_time() - c0, time.perf_counter() - w0)
    warm = decoder.decode(np.full(program.n, 0.5)).y  # compiled kernels and certificate tables, once per program
    certify(program, warm)
    stages = ("predict", "project", "decode", "certify")
    cpu, wall = dict.fromkeys(stages, 0.0), dict.fromkeys(stages, 0.0)
    images = data["pool_images"]
    valid = steps = 0
    count = len(data["test_a_img"])

    def lap(stage, c, w):
        cpu[stage] += time.process_time() - c
        wall[stage] += time.perf_counter() - w
        return time.process_time(), time.perf_counter()

    for i in range(count):
        c, w = time.process_time(), time.perf_counter()
        with torch.no_grad():
            pa = torch.softmax(model["digit"](torch.as_tensor(images[data["test_a_img"][i]])), -1)
            pb = torch.softmax(model["digit"](torch.as_tensor(images[data["test_b_img"][i]])), -1)
            ps = torch.softmax(model["sum"](pa, pb), -1).numpy()
        ps = np.concatenate([ps, np.full((1, 10), 0.1)])
        theta = tasks.addition_theta(program, pa.numpy()[None], pb.numpy()[None], ps[None])
        c, w = lap("predict", c, w)
        mu, states = projector.project(theta)
        steps += states[0].iterations
        c, w = lap("project", c, w)
        y = decoder.decode(mu[0]).y
        c, w = lap("decode", c, w)
        valid += certify(program, y) is None
        lap("certify", c, w)
    print(
        f"# N={n_digits}, {count} sums, seed {seed}; program {program.m} rows x {program.n} vars, "
        f"ldl={projector.gram is not None}; setup once {setup[0] * 1000:.0f} ms CPU; "
        f"Newton steps {steps / count:.1f} per sum; certified valid {valid}/{count}"
    )
    print("stage cpu_ms wall_ms")
    for stage in stages:
        print(f"{stage} {cpu[stage] / count * 1000:.2f} {wall[stage] / count * 1000:.2f}")
    layer = ("project", "decode", "certify")
    print(
        f"casper_layer {sum(cpu[s] for s in layer) / count * 1000:.2f} {sum(wall[s] for s in layer) / count * 1000:.2f}"
    )
    print(f"total {sum(cpu.values()) / count * 1000:.2f} {sum(wall.values()) / count * 1000:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1, sys.argv[2] if len(sys.argv) > 2 else None)
