"""pls-test acceptance runs of issue 3 (not part of `make bench`: minutes, not seconds).

    .venv/bin/python -P bench/pls/acceptance.py [size|power|cost|real|all] [--reps-scale X]

size   sim iid|toeplitz0.5|onefactor, y independent of X, n in {40, 100}: NB (forced past the
       gate) and NB-permutation rejection at alpha = .05 (target [0.03, 0.07])
power  Toeplitz 0.5, n in {40..120}: NB vs CV-permutation-Q2 (B=200, F=5); n80 ratio (target <= 0.9)
cost   Tecator fat K=3: wall CV-perm(B=1000, F=5) / NB(J=50) and the fit counts
real   Tecator moisture/fat/protein K=3: every method's p and the NB statistic; rotation deltas
Prints one line per figure. Seeds are fixed (0 unless said).
"""

from __future__ import annotations

import sys
import time

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from methodkit.tools.pls import api, power, sources
from methodkit.tools.pls.data import from_frame


def size(scale: float, nb_perm_B: int) -> None:
    reps = int(500 * scale)
    for geometry in ("iid", "toeplitz0.5", "onefactor"):
        opts = api.Options(splits=50, perms=nb_perm_B, alpha=0.05, seed=0, force_nb=True)
        start = time.perf_counter()
        pts = power.curves(power.Scenario(geometry, 50, null=True), [40, 100], ["nb", "nb-perm"], 2, reps, opts)
        for p in pts:
            print(f"size {geometry} n={p.n} {p.method} B={nb_perm_B if p.method == 'nb-perm' else '-'} "
                  f"reps={p.reps} rejection={p.power:.3f} se={p.se:.3f}")  # fmt: skip
        print(f"# size {geometry}: {time.perf_counter() - start:.0f} s", flush=True)


def power_curve(scale: float) -> None:
    reps = int(200 * scale)
    opts = api.Options(splits=50, perms=200, folds=5, alpha=0.05, seed=0)
    ns = [40, 60, 80, 100, 120]
    start = time.perf_counter()
    pts = power.curves(power.Scenario("toeplitz0.5", 50, 5, 0.3), ns, ["nb", "cvq2-perm"], 2, reps, opts)
    for p in sorted(pts, key=lambda p: (p.method, p.n)):
        print(f"power toeplitz0.5 n={p.n} {p.method} reps={p.reps} power={p.power:.3f} se={p.se:.3f} "
              f"fits={p.mean_fits:.0f} seconds={p.mean_seconds:.3f}")  # fmt: skip
    n_nb, n_cv = power.n_for_power(pts, "nb"), power.n_for_power(pts, "cvq2-perm")
    ratio = None if (n_nb is None or n_cv is None) else n_nb / n_cv
    print(f"power n80 nb={n_nb} cvq2-perm={n_cv} ratio={ratio}")
    wins = all(
        next(p.power for p in pts if p.method == "nb" and p.n == n)
        >= next(p.power for p in pts if p.method == "cvq2-perm" and p.n == n)
        for n in ns
    )
    print(f"power nb>=cvq2-perm at every n: {wins}; {time.perf_counter() - start:.0f} s", flush=True)


def tecator(target: str):
    frame, target, x = sources.builtin(f"builtin:tecator:{target}", None, None, None)
    return from_frame(frame, target, x_glob=x)


def cost() -> None:
    d = tecator("fat")
    api.run(d, [3], api.Options(method="cvq2-perm", perms=5))  # compile
    api.run(d, [3], api.Options(method="nb", force_nb=True))
    t0, c0 = time.perf_counter(), time.process_time()
    nb = api.run(d, [3], api.Options(method="nb", force_nb=True))[0]
    nb_s, nb_c = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    cv = api.run(d, [3], api.Options(method="cvq2-perm", perms=1000, folds=5))[0]
    cv_s, cv_c = time.perf_counter() - t0, time.process_time() - c0
    print(f"cost tecator fat K=3 nb {nb_s:.4f} s wall {nb_c:.4f} s cpu ({nb.n_fits} fits) cvq2-perm {cv_s:.3f} s wall "
          f"{cv_c:.3f} s cpu ({cv.n_fits} fits) wall_ratio={cv_s / nb_s:.1f} cpu_ratio={cv_c / nb_c:.1f} "
          f"fit_ratio={cv.n_fits / nb.n_fits:.0f} (one run each; bench/pls/bench.py has the interleaved medians)")  # fmt: skip


def real() -> None:
    for target in ("moisture", "fat", "protein"):
        d = tecator(target)
        opts = api.Options(method="all", seed=42, force_nb=True, perms=1000, rotate="varimax")
        for r in api.run(d, [3], opts):
            print(f"real tecator {target} K=3 {r.method} statistic={r.statistic:.4f} p={r.pvalue:.3g} "
                  f"rotation_delta={r.rotation_delta:.1e} fits={r.n_fits} seconds={r.seconds:.2f}")  # fmt: skip
        auto = api.run(d, [3], api.Options(seed=42))[0]
        print(f"real tecator {target} K=3 auto -> {auto.method} (gate: {auto.gate['reason']}) p={auto.pvalue:.3g}")


def main(argv: list[str]) -> None:
    numba.set_num_threads(1)
    what = argv[0] if argv else "all"
    scale = float(argv[argv.index("--reps-scale") + 1]) if "--reps-scale" in argv else 1.0
    B = int(argv[argv.index("--nb-perm-B") + 1]) if "--nb-perm-B" in argv else 200
    if what in ("real", "all"):
        real()
    if what in ("cost", "all"):
        cost()
    if what in ("power", "all"):
        power_curve(scale)
    if what in ("size", "all"):
        size(scale, B)


if __name__ == "__main__":
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with threadpool_limits(limits=1):
        main(sys.argv[1:])
    print(
        f"# acceptance {' '.join(sys.argv[1:])}: {time.process_time() - cpu0:.0f} s CPU (one thread), "
        f"{time.perf_counter() - wall0:.0f} s wall"
    )
    np.random.default_rng()
