"""nte-encode on a GPU: the CuPy twin of the non-overlapping encode against the Numba CPU kernel.

Same images, same key, same counter-based noise stream: the two ciphertexts must agree to 2e-6
(float32 images, float64 noise) and the scales alpha to 1e-10 relative. Prints
`case size cpu_s gpu_s ratio` (ratio = cpu_s / gpu_s, wall seconds, CPU: Numba on all threads) and
exits 1 on any disagreement, 2 when CuPy or a CUDA device is missing. Runs in seconds on an H200.
Usage: .venv/bin/python -P bench/nte/gpu.py
"""

from __future__ import annotations

import sys
import time

import numpy as np

CASES = [  # (images, side, kernel, c_out, padding, shared): shared = the default layout (one z per image)
    (10_000, 28, 4, 8, 0, True),
    (10_000, 28, 4, 8, 0, False),
    (10_000, 28, 4, 8, 2, True),
    (10_000, 28, 4, 8, 2, False),
    (100_000, 28, 4, 8, 0, True),
    (1_000, 224, 16, 192, 0, False),  # ViT-style patchify, 3 channels below
]


def main() -> int:
    from methodkit.core.backend import cuda_available

    if not cuda_available():
        print("# no CuPy or no CUDA device", file=sys.stderr)
        return 2
    import cupy

    from methodkit.tools.nte import kernels, xp_encode
    from methodkit.tools.nte.encode import border_bases
    from methodkit.tools.nte.key import extract_key
    from methodkit.tools.nte.stem import Stem

    print(f"# device: {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    print("case size cpu_s gpu_s ratio")
    bad = 0
    for count, side, kernel, c_out, padding, shared in CASES:
        channels = 3 if side == 224 else 1
        rng = np.random.default_rng(count + side)
        stem = Stem(
            rng.normal(size=(c_out, channels, kernel, kernel)), kernel, padding, (0.5,) * channels, (0.25,) * channels
        )
        key = extract_key(stem)
        x = rng.random((count, channels, side, side)).astype(np.float32)
        bases, types = border_bases(key.basis, channels, kernel, kernel, padding, side, side)
        kernels.encode_nonoverlap_seeded(x[:2], bases, types, 3, 0, 10.0, kernel, padding, shared)  # compile
        xp_encode.encode_nonoverlap(cupy, x[:2], bases, types, 3, 0, 10.0, kernel, padding, shared)
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        cpu, cpu_alpha = kernels.encode_nonoverlap_seeded(x, bases, types, 3, 0, 10.0, kernel, padding, shared)
        cpu_s = time.perf_counter() - start
        x_gpu = cupy.asarray(x)
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        gpu, gpu_alpha = xp_encode.encode_nonoverlap(cupy, x_gpu, bases, types, 3, 0, 10.0, kernel, padding, shared)
        cupy.cuda.Device().synchronize()
        gpu_s = time.perf_counter() - start
        size = f"n={count},side={side},k={kernel},c_out={c_out},p={padding},{'shared' if shared else 'patch'}"
        print(f"encode_nonoverlap {size} {cpu_s:.4f} {gpu_s:.4f} {cpu_s / gpu_s:.2f}", flush=True)
        diff = float(np.abs(cupy.asnumpy(gpu) - cpu).max())
        alpha_diff = float(np.max(np.abs(cupy.asnumpy(gpu_alpha) / cpu_alpha - 1)))
        if not (diff <= 2e-6 and alpha_diff <= 1e-10):
            bad += 1
            print(f"# MISMATCH {size}: max |x'| diff {diff:.3e}, alpha rel diff {alpha_diff:.3e}", flush=True)
    print(f"# {len(CASES) - bad} of {len(CASES)} cases agree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
