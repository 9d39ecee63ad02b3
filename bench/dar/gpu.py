"""dar-backdoor on a GPU: discover's CuPy dense-cell counting against the Numba kernel (identical
rows), then victim training with --device cuda against the CPU path, same data, same seed.

Trains the teacher (cnn-s, the issue's width 32) on BadNets-poisoned labels and a clean KD student
(cnn-xs) from it, on the CPU and on CUDA, and compares clean accuracy and ASR. GPU arithmetic is not
bit-identical to the CPU's (cuDNN kernels, reduction order), so the check is statistical: exits 1
when C-Acc differs by more than 3 points or the teacher's BadNets ASR by more than 5 points between
the devices, 2 when torch sees no CUDA device. Prints `case size cpu_s gpu_s ratio` (ratio =
cpu_s / gpu_s). Self-contained: Fashion-MNIST when the Debian package is installed, else the
built-in synthetic set. About 40 s on an H200 (most of it the CPU side).
Usage: .venv/bin/python -P bench/dar/gpu.py
"""

from __future__ import annotations

import sys
import time

import numpy as np


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("# torch sees no CUDA device", file=sys.stderr)
        return 2
    from methodkit.core.errors import DataError
    from methodkit.tools.dar import data
    from methodkit.tools.dar import poison as poisoning
    from methodkit.tools.dar.evaluate import evaluate
    from methodkit.tools.dar.victim import VictimConfig, fit

    torch.set_num_threads(min(8, torch.get_num_threads()))
    try:
        name = "fashion-mnist"
        x, y = data.load(name, "train", 5000)
        xt, yt = data.load(name, "test", 2000)
    except DataError:
        name = "synthetic"
        x, y = data.load(name, "train", 5000)
        xt, yt = data.load(name, "test", 2000)
    p = poisoning.dirty_label(x, y, "badnets", 0, 250, 10, seed=0)  # 5%: implants fully on both
    print(f"# device: {torch.cuda.get_device_name(0)}; data: {name} {len(x)} train / {len(xt)} test; "
          f"CPU threads {torch.get_num_threads()}")  # fmt: skip
    print("case size cpu_s gpu_s ratio")
    bad = _counting_check(x)
    fit(x[:256], y[:256], VictimConfig(width=8, epochs=1, batch_size=32, device="cuda"), 10)  # CUDA warm-up
    results = {}
    for device in ("cpu", "cuda"):
        start = time.perf_counter()
        teacher, _ = fit(p.images, p.labels, VictimConfig(width=32, epochs=3, batch_size=64, device=device), 10)
        t_teacher = time.perf_counter() - start
        start = time.perf_counter()
        student, _ = fit(x, y, VictimConfig(arch="cnn-xs", width=32, epochs=3, batch_size=64, device=device), 10,
                         teacher=teacher)  # fmt: skip
        t_student = time.perf_counter() - start
        results[device] = (evaluate(teacher, xt, yt, "badnets", 0), evaluate(student, xt, yt, "badnets", 0),
                           t_teacher, t_student)  # fmt: skip
    (tc, sc, tt_c, ts_c), (tg, sg, tt_g, ts_g) = results["cpu"], results["cuda"]
    size = f"n={len(x)},epochs=3,width=32"
    print(f"teacher_cnn-s {size} {tt_c:.2f} {tt_g:.2f} {tt_c / tt_g:.2f}")
    print(f"kd_student_cnn-xs {size} {ts_c:.2f} {ts_g:.2f} {ts_c / ts_g:.2f}")
    for stage, cpu, gpu in (("teacher", tc, tg), ("student", sc, sg)):
        print(f"# {stage}: C-Acc cpu {cpu['c_acc']:.4f} gpu {gpu['c_acc']:.4f}; "
              f"BadNets ASR cpu {cpu['asr']:.4f} gpu {gpu['asr']:.4f}")  # fmt: skip
        if abs(cpu["c_acc"] - gpu["c_acc"]) > 0.03:
            print(f"DISAGREE {stage} C-Acc", file=sys.stderr)
            bad += 1
    if abs(tc["asr"] - tg["asr"]) > 0.05:
        print("DISAGREE teacher ASR", file=sys.stderr)
        bad += 1
    return 1 if bad else 0


def _counting_check(x) -> int:
    """discover's dense-cell counting (w 3, xi 4, support 0.5-3%): CuPy path vs the Numba kernel."""
    import math

    import cupy

    from methodkit.tools.dar import kernels

    lo, hi = math.ceil(0.005 * len(x)), math.floor(0.03 * len(x))
    kernels.window_codes_count(x[:50], 3, 4, 1, 50)  # compile outside the timing
    kernels.window_codes_count_xp(cupy.asarray(x[:50]), 3, 4, 1, 50, cupy)
    start = time.perf_counter()
    ours = kernels.window_codes_count(x, 3, 4, lo, hi)
    cpu_s = time.perf_counter() - start
    start = time.perf_counter()
    gpu = kernels.window_codes_count_xp(cupy.asarray(x), 3, 4, lo, hi, cupy)
    gpu_s = time.perf_counter() - start
    print(f"dense_cells_w3_xi4 n={len(x)} {cpu_s:.3f} {gpu_s:.3f} {cpu_s / gpu_s:.2f}")
    if not np.array_equal(ours, gpu):
        print("DISAGREE dense cells (CuPy vs Numba)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
