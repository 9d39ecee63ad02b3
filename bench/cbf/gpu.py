"""cbf particle filters on a GPU: the CuPy whole-array filter (--device cuda) against the Numba CPU kernel.

The two use different random streams, so agreement is checked where the filter is deterministic (both
lesions, lambda = 0: predictions equal to 1e-9) and in distribution otherwise (per-run squared prediction
error and mean ambiguity over R runs: Welch |t| < 4). Prints `case size cpu_s gpu_s ratio` (ratio =
cpu_s / gpu_s, CPU = Numba on all threads) and exits 1 on any disagreement, 2 without CuPy/CUDA.
Self-contained (simulated task). Under a minute on an H200. Usage: .venv/bin/python -P bench/cbf/gpu.py
"""

from __future__ import annotations

import sys
import time

import numpy as np


def main() -> int:
    from methodkit.core.backend import cuda_available

    if not cuda_available():
        print("# no CuPy or no CUDA device", file=sys.stderr)
        return 2
    import cupy
    from scipy import stats

    from methodkit.tools.cbf import data
    from methodkit.tools.cbf.particles import run_particles

    print(f"# device: {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}; CPU: Numba, all threads")
    print("case size cpu_s gpu_s ratio")
    task = data.simulate_task(seed=1, within=None)
    bad = 0

    def both(model, values, S, R, P, signals=True):
        cohort = data.cohort_for_agents(task, S, seed=2)
        seeds = np.arange(S * R, dtype=np.int64).reshape(S, R) + 11
        vals = np.tile(values, (S, 1))
        res = {}
        for device in ("cpu", "cuda"):
            run_particles(
                model, cohort.outcome[:1], cohort.valid[:1], vals[:1], 64, seeds[:1, :1], 60.0, 10.0, signals, device
            )
            start = time.perf_counter()
            out, _ = run_particles(model, cohort.outcome, cohort.valid, vals, P, seeds, 60.0, 10.0, signals, device)
            cupy.cuda.Device().synchronize()
            res[device] = (out, time.perf_counter() - start)
        return cohort, res

    # deterministic limit: both lesions = the Kalman filter
    cohort, res = both("pf-beta", [0.0, 0.0, 10.0, 30.0], 4, 2, 1000)
    diff = np.nanmax(np.abs(res["cpu"][0][0] - res["cuda"][0][0]))
    ok = diff < 1e-9
    bad += not ok
    print(
        f"pf_beta_lesions_exact S=4,R=2,P=1000 {res['cpu'][1]:.3f} {res['cuda'][1]:.3f} "
        f"{res['cpu'][1] / res['cuda'][1]:.1f}  # max diff {diff:.2e} {'ok' if ok else 'DISAGREE'}"
    )
    for model, values in (("pf-beta", [0.2, 0.2, 10.0, 30.0]), ("pf-hpl", [0.3, 0.2, 0.6])):
        for S, R, P in ((1, 10, 10_000), (20, 10, 10_000)):
            cohort, res = both(model, values, S, R, P)
            (cpu, cpu_s), (gpu, gpu_s) = res["cpu"], res["cuda"]
            sse_c = ((cpu[0] - cohort.outcome[:, None]) ** 2).sum(axis=(2, 3)).ravel()
            sse_g = ((gpu[0] - cohort.outcome[:, None]) ** 2).sum(axis=(2, 3)).ravel()
            t_sse = stats.ttest_ind(sse_c, sse_g, equal_var=False).statistic
            t_amb = stats.ttest_ind(
                np.nanmean(cpu[3], axis=(2, 3)).ravel(), np.nanmean(gpu[3], axis=(2, 3)).ravel(), equal_var=False
            ).statistic
            ok = abs(t_sse) < 4 and abs(t_amb) < 4 if S * R >= 20 else abs(t_sse) < 6
            bad += not ok
            print(
                f"{model} S={S},R={R},P={P} {cpu_s:.3f} {gpu_s:.3f} {cpu_s / gpu_s:.1f}  "
                f"# t_sse {t_sse:.2f} t_amb {t_amb:.2f} {'ok' if ok else 'DISAGREE'}"
            )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
