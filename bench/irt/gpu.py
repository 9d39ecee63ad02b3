"""GPU check of irt-fit: the CuPy MML E-step and the torch VI/PSN fits on CUDA against the CPU path.

Run on a machine with a CUDA device, CuPy, torch and Numba: `python bench/irt/gpu.py [SCALE]`
(SCALE, default 1, shrinks the problem sizes).
Prints `case size cpu_s gpu_s ratio` lines (ratio = cpu_s / gpu_s) and exits 1 when a GPU
result disagrees with the CPU one: the E-step posterior and log-likelihood (float64, to 1e-9),
the MML item estimates after a full fit (to 1e-5); VI and PSN draw their own random numbers on
each device, so their check is that both devices recover the generating abilities (Kendall tau).
"""

from __future__ import annotations

import sys
import time


def _timed(f, *args, sync=None, **kwargs):
    start = time.perf_counter()
    out = f(*args, **kwargs)
    if sync is not None:
        sync()
    return time.perf_counter() - start, out


def main(scale: float = 1.0) -> int:
    import cupy
    import numpy as np
    from scipy import stats

    from methodkit.tools.irt import estimators, mml
    from methodkit.tools.irt.simulate import DrawSpec, draw

    sync = cupy.cuda.Device().synchronize
    failures = []
    print(f"{'case':<14} {'size':<18} {'cpu_s':>8} {'gpu_s':>8} {'ratio':>7}  check")

    def row(case, size, cpu_s, gpu_s, check, ok):
        print(f"{case:<14} {size:<18} {cpu_s:8.3f} {gpu_s:8.3f} {cpu_s / gpu_s:7.1f}  {check} {'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(case)

    # 1. one E-step at MMLU scale: N x J x Q GEMMs
    data = draw(DrawSpec(model="2pl", profile="mmlu", n_models=int(3000 * scale), n_items=14042), 0)
    Y = data.Y
    params = mml.start_values(Y, "2pl")
    nodes = np.linspace(-6, 6, 61)
    logw = -0.5 * nodes**2
    logw -= np.log(np.exp(logw).sum())
    Yf, Mf = (Y == 1).astype(np.float64), (Y != 255).astype(np.float64)
    cpu_s, (W_cpu, ll_cpu) = _timed(mml.e_step, Yf, Mf, params, nodes, logw, 2, np.float64)
    Yg, Mg = cupy.asarray(Yf), cupy.asarray(Mf)
    mml.e_step(Yg, Mg, params, nodes, logw, 2, np.float64, cupy)  # warm-up (cuBLAS handles, kernels)
    gpu_s, (W_gpu, ll_gpu) = _timed(mml.e_step, Yg, Mg, params, nodes, logw, 2, np.float64, cupy, sync=sync)
    diff = float(np.max(np.abs(cupy.asnumpy(W_gpu) - W_cpu)))
    ok = diff < 1e-9 and abs(ll_gpu - ll_cpu) < 1e-9 * abs(ll_cpu)
    row(
        "mml_estep",
        f"N={Y.shape[0]} J={Y.shape[1]}",
        cpu_s,
        gpu_s,
        f"max|dW| {diff:.1e} dLL {abs(ll_gpu - ll_cpu):.1e}",
        ok,
    )
    del Yf, Mf, Yg, Mg, W_gpu

    # 2. a full MML fit (SQUAREM) on each device
    data = draw(DrawSpec(model="2pl", profile="mmlu", n_models=int(2000 * scale), n_items=int(2000 * scale)), 1)
    small = data.subset(slice(0, 50), slice(0, 40))
    mml.fit(small.Y, "2pl", mml.MMLSettings(accelerate="squarem"))  # Numba compilation outside the clock
    mml.fit(small.Y, "2pl", mml.MMLSettings(accelerate="squarem", device="cuda"))
    cpu_s, cpu = _timed(mml.fit, data.Y, "2pl", mml.MMLSettings(accelerate="squarem"))
    gpu_s, gpu = _timed(mml.fit, data.Y, "2pl", mml.MMLSettings(accelerate="squarem", device="cuda"), sync=sync)
    d = max(float(np.max(np.abs(gpu.a - cpu.a))), float(np.max(np.abs(gpu.b - cpu.b))))
    row(
        "mml_fit",
        f"N={data.Y.shape[0]} J={data.Y.shape[1]}",
        cpu_s,
        gpu_s,
        f"max|d(a,b)| {d:.1e} cycles {cpu.info['n_iter']}/{gpu.info['n_iter']}",
        d < 1e-5,
    )

    # 3. VI and PSN (torch) on each device: both must recover the abilities
    data = draw(DrawSpec(model="2pl", profile="mmlu", n_models=300, n_items=int(1000 * scale)), 2)
    for method, options in (("vi", {"steps": 300}), ("psn", {"epochs": 3, "positive_a": True})):
        taus, seconds = [], []
        for device in ("cpu", "cuda"):
            settings = estimators.make_settings(method, device=device, **options)
            s, fit = _timed(estimators.run, data, "2pl", method, settings, seed=0)
            seconds.append(s)
            taus.append(abs(stats.kendalltau(fit.estimate.theta, data.theta).statistic))
        ok = min(taus) > 0.8 and abs(taus[0] - taus[1]) < 0.05
        row(
            method,
            f"N={data.Y.shape[0]} J={data.Y.shape[1]}",
            seconds[0],
            seconds[1],
            f"tau cpu {taus[0]:.3f} gpu {taus[1]:.3f}",
            ok,
        )

    if failures:
        print(f"GPU disagrees with CPU: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0))
