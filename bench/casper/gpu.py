"""casper-solve on a GPU: the batched dense projection on CuPy against the CPU projector (sparse LU).

Prints `case size cpu_s gpu_s ratio` lines and the largest |mu_gpu - mu_cpu| per case; exits 1 when
they disagree (> 1e-6, or a row's status differs), 0 after printing a skip line without a CUDA device.
Runs in well under a minute on one H200.
"""

from __future__ import annotations

import sys
import time

import numpy as np

CASES = [("grid", 12, 32), ("grid", 30, 8), ("sudoku", 9, 64), ("addition", 64, 32)]


def main() -> int:
    from methodkit.core.backend import cuda_available

    if not cuda_available():
        print("gpu_casper skipped: no CUDA device (or CuPy missing)")
        return 0
    import cupy

    from methodkit.tools.casper.batched import BatchedDenseProjector
    from methodkit.tools.casper.builders import compiled
    from methodkit.tools.casper.projection import Projector

    rng = np.random.default_rng(0)
    worst, bad = 0.0, 0
    print("case size cpu_s gpu_s ratio max_abs_diff")
    for kind, size, batch in CASES:
        program = compiled(kind, size, False)
        theta = rng.random((batch, program.n))
        cpu = Projector(program)
        gpu = BatchedDenseProjector(program, cupy)
        cpu.project(theta[:1])
        gpu.project(theta[:1])  # load kernels and cuSOLVER handles before timing
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        mu_cpu, st_cpu = cpu.project(theta)
        cpu_s = time.perf_counter() - start
        start = time.perf_counter()
        mu_gpu, st_gpu = gpu.project(theta)
        cupy.cuda.Device().synchronize()
        gpu_s = time.perf_counter() - start
        ok = [s.status for s in st_cpu] == [s.status for s in st_gpu]
        rows = [i for i, s in enumerate(st_cpu) if s.status == "ok"]
        diff = float(np.max(np.abs(mu_gpu[rows] - mu_cpu[rows]))) if rows else 0.0
        worst = max(worst, diff)
        bad += (not ok) or not diff <= 1e-6  # `not <=`: a NaN difference is a disagreement too
        label = f"projection_{kind}"
        print(f"{label} {size}x{batch} {cpu_s:.4f} {gpu_s:.4f} {cpu_s / gpu_s:.2f} {diff:.2e}", flush=True)
    print(f"max_abs_diff {worst:.2e} disagreements {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
