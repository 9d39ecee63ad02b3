"""Benchmark irt-fit's estimators against their anchors, measured in the same run.

MML-EM vs girth twopl_mml (on a J = 200 slice: girth needs ~400 s at J = 1000) and the Rust-backed
python `mirt`; the MCMC Numba half-sweeps vs their vectorised NumPy twins; VI/PSN throughput.
Prints `case size ours_s ref_s ratio` (ratio = ref_s / ours_s) with the parameter agreement.
"""

from __future__ import annotations

import sys


def main() -> int:
    from methodkit.tools.irt import benchmark

    n_models = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    n_items = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    rows = benchmark.run(n_models, n_items, girth_items=200)
    print(f"{'case':<18} {'size':<16} {'ours_s':>9} {'ref_s':>9} {'ratio':>8}  note")
    for r in rows:
        fmt = lambda v: f"{v:9.3f}" if v is not None else f"{'-':>9}"  # noqa: E731
        ratio = f"{r['ratio']:8.1f}" if r["ratio"] is not None else f"{'-':>8}"
        print(f"{r['case']:<18} {r['size']:<16} {fmt(r['ours_s'])} {fmt(r['ref_s'])} {ratio}  {r['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
