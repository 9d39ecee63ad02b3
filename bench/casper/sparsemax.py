"""Per-group sparsemax against entmax (torch), 64 x 256 groups of 10 (issue 36 item 3), CPU seconds.

python -P bench/casper/sparsemax.py [REPEATS] prints `case size ours_s ref_s ratio max_abs_diff` once
per repeat (each the best of 3 calls, as `casper-solve bench` times it).
"""

from __future__ import annotations

import sys

import numpy as np

from methodkit.tools.casper.bench import bench_sparsemax

print("case  size  ours_s  ref_s  ratio  max_abs_diff")
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    row = bench_sparsemax(np.random.default_rng(0))
    print(f"{row['case']}  {row['size']}  {row['ours_s']:.4f}  {row['ref_s']:.4f}  {row['ratio']:.2f}  {row['max_abs_diff']:.1e}")
