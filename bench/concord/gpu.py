"""concord-plan on a GPU: the CuPy twin of the per-stage aggregation against the Numba kernel.

Prints `case size cpu_s gpu_s ratio` (ratio = cpu_s / gpu_s; gpu_s includes the host<->device
copies) and exits 1 if a GPU result disagrees with the CPU one:
- aggregate_*: kernels.stage_aggregate (Numba, all cores) vs aggregate_xp with CuPy on random
  candidates x units tables; values must agree to rtol 1e-12 (a GPU may fuse a*b+c into an FMA,
  so bitwise equality is not expected).
- plan_*: a cold full search with --device cpu vs --device cuda; candidate and feasible counts
  equal, top-1 step equal to rtol 1e-9, and the GPU's top-1 is one of the CPU's best (ties may
  break differently when the last bit differs).
Needs CuPy and a CUDA device; runs in well under a minute on one H200.
"""

from __future__ import annotations

import sys
import time

import numpy as np


def line(case, size, cpu, gpu):
    print(f"{case:<28} {size:>8} {cpu:>10.4g} {gpu:>10.4g} {cpu / gpu:>8.2f}", flush=True)


def random_instance(rng, size, units):
    from methodkit.tools.concord import kernels

    arrays = [rng.uniform(0, s, (size, units)) for s in (0.02, 1e8, 1e8, 1.0, 1e-3)]
    p2p = rng.uniform(0, 1e-3, size)
    pp = rng.choice([1, 2, 4, 8, 16, 32], size).astype(np.int64)
    vpp = rng.choice([1, 2, 4], size).astype(np.int64)
    micro = rng.choice([32, 64, 256], size).astype(np.int64)
    bounds = np.zeros((size, int((pp * vpp).max()) + 1), dtype=np.int64)
    kernels.uniform_partition(units, pp, vpp, bounds)
    return arrays, p2p, pp, vpp, micro, bounds


def check_aggregate(rng, size, units) -> bool:
    import cupy

    from methodkit.tools.concord import aggregate_xp, kernels

    arrays, p2p, pp, vpp, micro, bounds = random_instance(rng, size, units)
    n_stages = int(pp.max())
    ref = [np.zeros((size, n_stages)) for _ in range(4)]
    t0 = time.perf_counter()
    kernels.stage_aggregate(*arrays, p2p, pp, vpp, micro, bounds, *ref)
    cpu = time.perf_counter() - t0
    t0 = time.perf_counter()
    moved = [cupy.asarray(a) for a in (*arrays, p2p, pp, vpp, micro, bounds)]
    outs = [cupy.asnumpy(o) for o in aggregate_xp.stage_aggregate(cupy, *moved, n_stages)]
    cupy.cuda.Device().synchronize()
    gpu = time.perf_counter() - t0
    line(f"aggregate_{units}u", size, cpu, gpu)
    ok = True
    for name, a, b in zip(("time", "memory", "dp", "optimizer"), ref, outs):
        if not np.allclose(a, b, rtol=1e-12, atol=0.0):
            print(f"# MISMATCH aggregate {name}: max rel {np.max(np.abs(a - b) / np.maximum(np.abs(a), 1e-300))}")
            ok = False
    return ok


def check_plan(fixture: str) -> bool:
    from methodkit.tools.concord import spec
    from methodkit.tools.concord.fixtures import fixture_docs
    from methodkit.tools.concord.search import plan

    m, c, s = fixture_docs(fixture)
    model, cluster, space = spec.load_model(m), spec.load_cluster(c), spec.load_space(s)
    t0 = time.perf_counter()
    cpu = plan(model, cluster, space, mode="cold", top_k=5, explain=False, device="cpu")
    cpu_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    gpu = plan(model, cluster, space, mode="cold", top_k=5, explain=False, device="cuda")
    gpu_s = time.perf_counter() - t0
    line(f"plan_{fixture.split('-h1')[0].split('-a1')[0]}", cpu.candidates, cpu_s, gpu_s)
    ok = cpu.candidates == gpu.candidates and cpu.feasible == gpu.feasible
    best_cpu, best_gpu = cpu.best["step_s"], gpu.best["step_s"]
    ok &= abs(best_gpu - best_cpu) <= 1e-9 * best_cpu
    # the GPU's winner must be one of the CPU's winners (equal to rounding)
    ok &= bool(cpu.scored.step[gpu.best["index"]] <= best_cpu * (1 + 1e-9))
    if not ok:
        print(
            f"# MISMATCH plan {fixture}: cpu {cpu.best['sigma']} {best_cpu!r} vs gpu {gpu.best['sigma']} {best_gpu!r}"
        )
    return ok


def main() -> int:
    from methodkit.core.backend import cuda_available

    if not cuda_available():
        print("# no CUDA device or no CuPy: nothing to compare", file=sys.stderr)
        return 1
    rng = np.random.default_rng(0)
    print(f"{'case':<28} {'size':>8} {'cpu_s':>10} {'gpu_s':>10} {'ratio':>8}")
    random_instance(rng, 64, 8)  # compile the Numba kernels outside the timings
    ok = check_aggregate(rng, 256, 16)  # warm-up for CuPy's kernels too
    ok &= check_aggregate(rng, 65536, 130)
    ok &= check_plan("deepseek-v3-like-h100-4096")  # the 4096-card case (sweep space)
    print("# OK: GPU agrees with CPU" if ok else "# FAILED: GPU disagrees with CPU")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
