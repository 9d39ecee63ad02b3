"""Claim 4, scalability: CPU time, wall time and peak memory of every estimator against J at N = 200.

Usage: nice -n 10 python bench/irt/scaling.py [J ...] [--cpu-limit SEC] [--csv PATH]
Default J in {500, 2000, 14042} (MMLU profile; 14042 = all of MMLU), N = 200, one thread per fit
(`-j 1`: CPU seconds are the measure on a shared machine), MCMC 2 x (500 + 500), a 120 CPU-second
budget per fit (status timeout = infeasible at that budget; n_iter = how far it got). `--probe`: MCMC,
VI and PSN run a few iterations and the CPU seconds of the full fit are projected from their CPU per
iteration (fit_cpu = CPU inside the fit, without the process start; PSN: upper bound at 50 epochs). Prints one line per fit, then the log-log
slope of CPU seconds on J per estimator over the fits that finished.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile


def main() -> int:
    from methodkit.tools.irt import scaling

    p = argparse.ArgumentParser()
    p.add_argument("sizes", nargs="*", type=int, default=[500, 2000, 14042])
    p.add_argument("--n-models", type=int, default=200)
    p.add_argument("--cpu-limit", type=float, default=120.0)
    p.add_argument("--methods", default="mml,mcmc,vi,psn")
    p.add_argument("--csv", default=None)
    p.add_argument("--probe", action="store_true", help="few-iteration runs of MCMC/VI/PSN, projected to a full fit")
    args = p.parse_args()
    print(
        f"{'estimator':<6} {'N':>4} {'J':>6} {'status':<8} {'cpu_s':>8} {'wall_s':>8} {'rss_mb':>8} {'n_iter':>6} {'fit_cpu':>8} {'proj_cpu':>9}"
    )

    def show(r):
        rss = f"{r.peak_rss_mb:8.0f}" if r.peak_rss_mb is not None else f"{'-':>8}"
        print(
            f"{r.estimator:<6} {r.n_models:>4} {r.n_items:>6} {r.status:<8} {r.cpu_s:8.1f} {r.wall_s:8.1f} "
            f"{rss} {r.n_iter if r.n_iter is not None else '-':>6} {r.fit_cpu_seconds or 0:8.1f} "
            f"{r.projected_cpu_s if r.projected_cpu_s is not None else '-':>9}",
            flush=True,
        )

    with tempfile.TemporaryDirectory(prefix="irt-scaling-") as work:
        rows = scaling.run_study(
            args.sizes,
            args.methods.split(","),
            n_models=args.n_models,
            cpu_limit=args.cpu_limit,
            probe=args.probe,
            workdir=work,
            callback=show,
        )
    for est, slope in scaling.slopes(rows).items():
        print(
            f"slope {est}: "
            + ("-" if slope is None else f"{slope:.2f}")
            + " (log CPU s in the fit, or projected, on log J)"
        )
    if args.csv:
        with open(args.csv, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(scaling.to_dicts(rows)[0]))
            writer.writeheader()
            writer.writerows(scaling.to_dicts(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
