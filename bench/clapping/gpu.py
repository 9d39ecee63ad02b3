"""clapping-train's fused compress-and-update kernels on the GPU (CuPy RawKernels) against the CPU (Numba).

    python -P bench/clapping/gpu.py [--shapes 64x4096,1024x8192] [--repeat 20]

Cases: top-k 5% delta update (indices, values, updated reference), 2-bit stochastic quantise+pack+update
(codes, scales, reference) and the receiver's unpack+accumulate, all from tools/clapping/gpu_kernels.py
against core/kernels/compress.py. Prints `case size cpu_s gpu_s ratio` (best of --repeat, CPU: one
Numba thread, process CPU time; GPU: CUDA events around the kernel, data already on the device);
exits 1 if any GPU result differs from the CPU result in one bit, 2 if CuPy or a CUDA device is missing.
Then `run --device cuda` end to end (stages on the GPU, link buffers and fused kernels there, payloads
to the host; simulator): digits and charlm, cpu vs cuda wall seconds in the `run:` lines; exits 1
if the payload byte log differs or the validation loss differs by more than 1e-3 relative (cuBLAS vs CPU rounding).
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402


def _gpu_time(cupy, fn, repeat):
    fn()  # compile and warm up
    best = float("inf")
    for _ in range(repeat):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        best = min(best, cupy.cuda.get_elapsed_time(start, stop) / 1000.0)
    return best


def _shape(cupy, ck, gk, shape: str, repeat: int) -> int:
    """Check and time one shape; return the number of mismatching cases."""
    rows, d = (int(v) for v in shape.split("x"))
    failures = 0
    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, d)).astype(np.float32)
    m = (a + 0.1 * rng.standard_normal((rows, d))).astype(np.float32)
    k = max(1, int(np.ceil(0.05 * d)))
    a_gpu = cupy.asarray(a)

    # correctness on fresh copies (the timed calls below keep updating their references)
    m_cpu, m_gpu = m.copy(), cupy.asarray(m)
    idx, val = ck.delta_topk_update(a, m_cpu, k)
    g_idx, g_val = gk.delta_topk_update(a_gpu, m_gpu, k)
    same = (
        np.array_equal(cupy.asnumpy(g_idx), idx)
        and np.array_equal(cupy.asnumpy(g_val), val)
        and np.array_equal(cupy.asnumpy(m_gpu), m_cpu)
    )
    if not same:
        print(f"MISMATCH topk:0.05 {shape}", file=sys.stderr)
        failures += 1
    m_cpu, m_gpu = m.copy(), cupy.asarray(m)
    packed, scale = ck.delta_quant_pack(a, m_cpu, 2, 7, True)
    g_packed, g_scale = gk.delta_quant_pack(a_gpu, m_gpu, 2, 7, True)
    out, g_out = np.zeros_like(a), cupy.zeros_like(a_gpu)
    ck.unpack_accumulate(packed, scale, 2, d, out, True)
    gk.unpack_accumulate(g_packed, g_scale, 2, d, g_out, True)
    same = (
        np.array_equal(cupy.asnumpy(g_packed), packed)
        and np.array_equal(cupy.asnumpy(g_scale), scale)
        and np.array_equal(cupy.asnumpy(m_gpu), m_cpu)
        and np.array_equal(cupy.asnumpy(g_out), out)
    )
    if not same:
        print(f"MISMATCH quant:2 {shape}", file=sys.stderr)
        failures += 1

    from methodkit.tools.clapping.kernel_bench import _best as best_cpu_time

    m_cpu, m_gpu = m.copy(), cupy.asarray(m)
    cases = [
        ("topk:0.05", lambda: ck.delta_topk_update(a, m_cpu, k), lambda: gk.delta_topk_update(a_gpu, m_gpu, k)),
        (
            "quant:2",
            lambda: ck.delta_quant_pack(a, m_cpu, 2, 7, True),
            lambda: gk.delta_quant_pack(a_gpu, m_gpu, 2, 7, True),
        ),
        (
            "unpack:2",
            lambda: ck.unpack_accumulate(packed, scale, 2, d, out, True),
            lambda: gk.unpack_accumulate(g_packed, g_scale, 2, d, g_out, True),
        ),
    ]
    for name, cpu_fn, gpu_fn in cases:
        cpu_fn()  # Numba compile / cache load
        cpu_s = best_cpu_time(cpu_fn, repeat)
        gpu_s = _gpu_time(cupy, gpu_fn, repeat)
        print(f"{name} {shape} {cpu_s:.6f} {gpu_s:.6f} {cpu_s / gpu_s:.1f}", flush=True)
    return failures


def _runs() -> int:
    """`run` with --device cuda against --device cpu (simulator, same seed); number of disagreements."""
    import time

    import torch

    from methodkit.tools.clapping import pipeline, tasks

    torch.set_num_threads(1)
    failures = 0
    cases = [
        ("digits", tasks.digits_data(0), dict(task="digits", stages=3, steps=12, lr=0.3)),
        (
            "charlm",
            tasks.text_data(tasks.gensim_corpus_text(60_000), 64, 0),
            dict(task="charlm", stages=4, steps=12, batch=32, lr=0.1),
        ),
    ]
    for name, data, kw in cases:
        results, times = {}, {}
        for dev in ("cpu", "cuda"):
            cfg = pipeline.RunConfig(algo="clapping-fu", compressor="topk:0.05", reuse=4, device=dev, **kw)
            start = time.perf_counter()
            results[dev] = pipeline.simulate(cfg, data)
            times[dev] = time.perf_counter() - start
        cpu, gpu = results["cpu"], results["cuda"]
        close = abs(gpu.val_loss - cpu.val_loss) <= 1e-3 * abs(cpu.val_loss)
        if gpu.comm != cpu.comm or not close:
            print(f"MISMATCH run {name}: val {cpu.val_loss} vs {gpu.val_loss}", file=sys.stderr)
            failures += 1
        size = f"{kw['stages']}x{kw['steps']}"
        print(f"run:{name} {size} {times['cpu']:.3f} {times['cuda']:.3f} {times['cpu'] / times['cuda']:.1f}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="64x4096,1024x8192")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    try:
        import cupy
    except ImportError:
        print("gpu_clapping: CuPy is not installed", file=sys.stderr)
        return 2
    if cupy.cuda.runtime.getDeviceCount() < 1:
        print("gpu_clapping: no CUDA device", file=sys.stderr)
        return 2
    from methodkit.core.kernels import compress as ck
    from methodkit.tools.clapping import gpu_kernels as gk

    print("case size cpu_s gpu_s ratio")
    failures = sum(_shape(cupy, ck, gk, shape, args.repeat) for shape in args.shapes.split(","))
    failures += _runs()
    if failures:
        print(f"gpu_clapping: {failures} case(s) differ from the CPU result", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
