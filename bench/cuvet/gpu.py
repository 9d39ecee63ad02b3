"""CUVET's per-user LP on the GPU (CuPy) against the CPU (Numba), with an agreement check.

    python -P bench/cuvet/gpu.py [--sizes 1000000,10000000]

The LP (max sum x v s.t. sum x c <= B, one arm mix per user) is what every personalized
method's estimates go through, and the per-user argmax over arms is the hot loop at
CUVET-policy scale (1e8 users). The CPU path is the Numba hull + weighted-selection solver
(tools/cuvet/kernels.py); the GPU path is the vectorized twin (tools/cuvet/lp.py,
solve_array) run with CuPy. Prints `case size cpu_s gpu_s ratio`; exits 1 if the objective,
the dual price or any user's arm mix disagree (ties aside: only the tie share may differ by
summation order), 2 if CuPy or a CUDA device is missing.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _problem(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray, float]:
    rng = np.random.default_rng(seed)
    c = np.column_stack([np.zeros(rows), np.sort(rng.uniform(0.1, 4, (rows, 4)), axis=1)])
    v = np.column_stack([np.zeros(rows), rng.uniform(-0.005, 0.02, (rows, 4))])  # off-hull and dominated arms too
    return v, c, 0.3 * c[:, -1].sum()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000")
    args = parser.parse_args()
    try:
        import cupy
    except ImportError:
        print("gpu_cuvet: CuPy is not installed", file=sys.stderr)
        return 2
    if cupy.cuda.runtime.getDeviceCount() < 1:
        print("gpu_cuvet: no CUDA device", file=sys.stderr)
        return 2
    from methodkit.tools.cuvet import lp

    v, c, b = _problem(2000, 0)  # compile / warm up both paths
    lp.solve(v, c, b)
    lp.solve(cupy.asarray(v), cupy.asarray(c), b, xp=cupy)
    cupy.cuda.Device().synchronize()
    print("case size cpu_s gpu_s ratio")
    failures = 0
    for rows in [int(s) for s in args.sizes.split(",") if s]:
        v, c, b = _problem(rows, 1)
        start = time.perf_counter()
        cpu = lp.solve(v, c, b)
        t_cpu = time.perf_counter() - start
        v_d, c_d = cupy.asarray(v), cupy.asarray(c)  # the data already lives on the device at scale
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        gpu = lp.solve(v_d, c_d, b, xp=cupy)
        cupy.cuda.Device().synchronize()
        t_gpu = time.perf_counter() - start
        pi = cupy.asnumpy(gpu.pi)
        diff = float(np.abs(pi - cpu.pi).max())
        ok = (
            abs(gpu.value - cpu.value) <= 1e-9 * abs(cpu.value)
            and abs(gpu.lam - cpu.lam) <= 1e-12 * max(abs(cpu.lam), 1.0)
            and diff <= 1e-6
            and gpu.cost <= b * (1 + 1e-9)
        )
        failures += not ok
        print(f"lp_{rows}x5 {rows} {t_cpu:.3f} {t_gpu:.3f} {t_cpu / t_gpu:.1f} max_pi_diff={diff:.1e} agree={ok}")
        del v_d, c_d, gpu
        cupy.get_default_memory_pool().free_all_blocks()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
