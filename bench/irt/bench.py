"""Benchmark irt-fit's estimators against their anchors, measured in the same run, one thread each.

MML-EM vs girth twopl_mml and the Rust-backed python `mirt` on the issue's case (2PL, N = 500,
J = 1000; girth takes minutes there: `--girth-items 200` for a slice); the MCMC Numba half-sweeps
vs their vectorised NumPy twins; VI/PSN throughput. Prints `case size ours_s ref_s ratio`
(ratio = ref_s / ours_s, CPU seconds of the process) with the parameter agreement.

    nice -n 5 python -P bench/irt/bench.py 500 1000 --only mml        # the 100x-vs-girth case
"""

from __future__ import annotations

import argparse
import os
import sys

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "RAYON_NUM_THREADS"):
    os.environ[_name] = "1"  # before NumPy, Numba and mirt start their pools


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n_models", type=int, nargs="?", default=500)
    parser.add_argument("n_items", type=int, nargs="?", default=1000)
    parser.add_argument("--girth-items", type=int, default=None, help="items for girth (0 skips; default all)")
    parser.add_argument("--only", action="append", choices=["mml", "mcmc", "vi", "psn"])
    args = parser.parse_args()

    from methodkit.tools.irt import benchmark

    rows = benchmark.run(
        args.n_models,
        args.n_items,
        girth_items=args.girth_items,
        which=tuple(args.only or ("mml", "mcmc", "vi", "psn")),
        threads=1,
    )
    print(f"{'case':<20} {'size':<16} {'ours_s':>9} {'ref_s':>9} {'ratio':>8}  note   (CPU seconds, one thread)")
    for r in rows:
        fmt = lambda v: f"{v:9.3f}" if v is not None else f"{'-':>9}"  # noqa: E731
        ratio = f"{r['ratio']:8.1f}" if r["ratio"] is not None else f"{'-':>8}"
        print(f"{r['case']:<20} {r['size']:<16} {fmt(r['ours_s'])} {fmt(r['ref_s'])} {ratio}  {r['note']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
