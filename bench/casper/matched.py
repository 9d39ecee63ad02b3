"""Projection speed at matched accuracy (issue 36 item 3): cvxpylayers' SCS at eps 1e-6 and 1e-9.

python -P bench/casper/matched.py [BATCH] [SIDE] prints, per reference eps, ours and the reference in CPU
seconds, their ratio and the largest |mu_ours - mu_ref|.
"""

from __future__ import annotations

import sys

import numpy as np

from methodkit.tools.casper.bench import bench_projection

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 8
side = int(sys.argv[2]) if len(sys.argv) > 2 else 30
print("ref_eps  side  batch  ours_s  ref_s  ratio  max_abs_diff")
for eps in (1e-6, 1e-9):
    row = bench_projection(side, batch, np.random.default_rng(0), ref_eps=eps)
    print(
        f"{eps:g}  {side}  {batch}  {row['ours_s']:.3f}  {row['ref_s']:.2f}  {row['ratio']:.1f}  {row['max_abs_diff']:.1e}"
    )
