"""casper-solve hot loops vs references (cvxpylayers, entmax, networkx, brute force), same run.

Prints `case size ours_s ref_s ratio` (CPU seconds of this process, ratio = ref_s / ours_s) plus the
largest |difference|, and the projection case's wall seconds on a last line.
`python bench/casper/bench.py --batch 32` (the default, the issue's batch); `--quick` uses a 12x12 grid
and a batch of 4 for the projection case instead of 30x30.
"""

from __future__ import annotations

import sys

from methodkit.tools.casper.bench import run


def main() -> int:
    batch = int(sys.argv[sys.argv.index("--batch") + 1]) if "--batch" in sys.argv else 32
    result = run(quick="--quick" in sys.argv, batch=batch, seed=0)
    print(f"{'case':<16} {'size':<10} {'ours_s':>12} {'ref_s':>12} {'ratio':>9} {'max_abs_diff':>13}")
    for row in result.rows:
        ref = "-" if row["ref_s"] is None else f"{row['ref_s']:.6f}"
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.1f}"
        diff = "-" if row["max_abs_diff"] is None else f"{row['max_abs_diff']:.1e}"
        print(f"{row['case']:<16} {row['size']:<10} {row['ours_s']:>12.6f} {ref:>12} {ratio:>9} {diff:>13}")
    for row in result.rows:
        if "ours_wall_s" in row:
            ref_wall = "-" if row["ref_wall_s"] is None else f"{row['ref_wall_s']:.3f} s"
            print(
                f"# {row['case']} batch {row.get('batch', batch)}: wall ours {row['ours_wall_s']:.3f} s, "
                f"reference {ref_wall}; reference layer build {row.get('ref_build_s', float('nan')):.2f} s CPU"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
