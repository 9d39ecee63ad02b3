"""dar: dense-cell counting, Numba kernel vs sliding_window_view + np.unique per window (same run).

Prints `case size ours_s ref_s ratio` and checks that both give the same dense-cell set.
Usage: python bench/dar/bench.py [N]   (N Fashion-MNIST train images, default 60000)
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from methodkit.tools.dar import data, kernels


def reference(x, w, xi, lo, hi):
    n, h, wd = x.shape
    win = np.lib.stride_tricks.sliding_window_view(x, (w, w), axis=(1, 2))
    powers = xi ** np.arange(w * w - 1, -1, -1)
    out = set()
    for r in range(h - w + 1):
        for c in range(wd - w + 1):
            codes = ((win[:, r, c].reshape(n, -1).astype(np.int64) * xi) // 256) @ powers
            values, counts = np.unique(codes, return_counts=True)
            out |= {(r, c, int(v), int(k)) for v, k in zip(values, counts) if lo <= k <= hi}
    return out


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 60000
    x, _ = data.load("fashion-mnist", "train", n)
    lo, hi = math.ceil(0.005 * len(x)), math.floor(0.03 * len(x))
    kernels.window_codes_count(x[:50], 3, 4, 1, 50)  # compile outside the timing
    t = time.perf_counter()
    ours = kernels.window_codes_count(x, 3, 4, lo, hi)
    ours_s = time.perf_counter() - t
    t = time.perf_counter()
    ref = reference(x, 3, 4, lo, hi)
    ref_s = time.perf_counter() - t
    same = {tuple(map(int, row)) for row in ours} == ref
    print("case size ours_s ref_s ratio")
    print(f"dense_cells_w3_xi4 {len(x)} {ours_s:.3f} {ref_s:.3f} {ref_s / ours_s:.1f}  identical={same}")


if __name__ == "__main__":
    main()
