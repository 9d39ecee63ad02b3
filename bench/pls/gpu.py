"""pls-test on a GPU: the CuPy twins (--device cuda) against the Numba CPU path, same data, same seeds.

Prints `case size cpu_s gpu_s ratio` (ratio = cpu_s / gpu_s) and exits 1 when any GPU result
disagrees with the CPU one (statistic beyond 1e-8, or a permutation p-value by more than one
count in B+1; NB-asymptotic p relative 1e-6), 2 when CuPy or a CUDA device is missing.
Self-contained: simulated designs only (no data download). Runs in well under a minute on an H200.
Usage: .venv/bin/python -P bench/pls/gpu.py
"""

from __future__ import annotations

import sys
import time

import numpy as np

CASES = [
    # name, n, p, K, options (method, splits J, perms B, folds F)
    ("nb_fused", 215, 100, 3, dict(method="nb", splits=50)),  # Tecator shape: NB's all-splits pass
    ("nb_fused", 4000, 1000, 5, dict(method="nb", splits=50)),
    ("nb_fused_weighted", 215, 100, 3, dict(method="nb", splits=50)),  # --weights through the same pass
    ("nbperm_k1_gemm", 215, 100, 1, dict(method="nb-perm", splits=50, perms=1000)),
    ("nbperm_k3", 215, 100, 3, dict(method="nb-perm", splits=50, perms=1000)),
    ("nbperm_k3", 1000, 500, 3, dict(method="nb-perm", splits=20, perms=1000)),
    ("cvq2perm_k3", 215, 100, 3, dict(method="cvq2-perm", perms=1000, folds=5)),
    ("cvq2perm_k3", 2000, 1000, 3, dict(method="cvq2-perm", perms=1000, folds=5)),
]


def main() -> int:
    from methodkit.core.backend import cuda_available

    if not cuda_available():
        print("# no CuPy or no CUDA device", file=sys.stderr)
        return 2
    import cupy

    from methodkit.tools.pls import api
    from methodkit.tools.pls.data import from_arrays, with_weights
    from methodkit.tools.pls.simulate import simulate

    print(f"# device: {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}; CPU: Numba + BLAS, all threads")
    print("case size cpu_s gpu_s ratio")
    small = from_arrays(*simulate("toeplitz0.5", 60, 12, snr=0.5, rng=np.random.default_rng(0)), "warm")
    for device in ("cpu", "cuda"):  # compile the Numba kernels and the CuPy kernels outside the timings
        for method in ("nb", "nb-perm", "cvq2-perm"):
            for K in (1, 3):
                api.run(small, [K], api.Options(method=method, force_nb=True, splits=4, perms=9, device=device))
    bad = 0
    for name, n, p, K, opts in CASES:
        X, y = simulate("toeplitz0.5", n, p, snr=0.3, rng=np.random.default_rng(n + p))
        d = from_arrays(X, y, "sim")
        if name.endswith("_weighted"):
            d = with_weights(d, np.random.default_rng(n).uniform(0.5, 2.0, n), "w")
        options = dict(force_nb=True, seed=7, **opts)
        start = time.perf_counter()
        cpu = api.run(d, [K], api.Options(**options))[0]
        cpu_s = time.perf_counter() - start
        start = time.perf_counter()
        gpu = api.run(d, [K], api.Options(**options, device="cuda"))[0]
        cupy.cuda.Device().synchronize()
        gpu_s = time.perf_counter() - start
        size = f"n={n},p={p},K={K},J={opts.get('splits', '-')},B={opts.get('perms', '-')}"
        print(f"{name} {size} {cpu_s:.4f} {gpu_s:.4f} {cpu_s / gpu_s:.2f}", flush=True)
        B = opts.get("perms")
        stat_ok = abs(cpu.statistic - gpu.statistic) <= 1e-8
        if B is None:
            p_ok = abs(cpu.pvalue - gpu.pvalue) <= 1e-6 * max(cpu.pvalue, 1e-300) + 1e-300
        else:
            p_ok = abs(cpu.pvalue - gpu.pvalue) <= 1.0 / (B + 1) + 1e-12
        if not (stat_ok and p_ok):
            bad += 1
            print(
                f"# MISMATCH {name} {size}: statistic cpu {cpu.statistic!r} gpu {gpu.statistic!r}; "
                f"p cpu {cpu.pvalue!r} gpu {gpu.pvalue!r}",
                flush=True,
            )
    print(f"# {len(CASES) - bad} of {len(CASES)} cases agree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
