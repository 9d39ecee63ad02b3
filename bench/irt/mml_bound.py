"""MML discriminations at the bound of their box: corr(a, truth) under the old box (a up to e^4 = 55),
the default a_max = 5, --prior weak, and python mirt's 2PL (61 nodes, its box a in [0.1, 5]).

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 RAYON_NUM_THREADS=1 nice -n 5 python -P bench/irt/mml_bound.py \
        200 2000 0,1,2 25 500 0,1,2 > bench/irt/mml_bound.txt

Arguments: (N J SEEDS) triples; each seed is an `irt-sim draw --profile mmlu -N N -J J --seed SEED`
matrix. Prints one row per fit: the fit's CPU seconds, corr(a, truth), corr(b, truth) and the number of
items whose a ends within 0.1% of its upper bound.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from methodkit.tools.irt import estimators
from methodkit.tools.irt.simulate import DrawSpec, draw

OLD_BOX = float(np.exp(4.0))


def _row(N, J, seed, label, a, b, truth, a_max, cpu):
    r_a, r_b = np.corrcoef(a, truth.a)[0, 1], np.corrcoef(b, truth.b)[0, 1]
    at = int((a >= 0.999 * a_max).sum())
    print(f"{N:>4} {J:>5} {seed:>4}  {label:<8} {r_a:7.3f} {r_b:7.3f} {at:>9} {a.max():7.2f} {cpu:7.2f}", flush=True)


def main(argv: list[str]) -> None:
    print("   N     J seed  fit       corr_a  corr_b  at_upper   max_a   cpu_s")
    for k in range(0, len(argv), 3):
        N, J, seeds = int(argv[k]), int(argv[k + 1]), [int(s) for s in argv[k + 2].split(",")]
        for seed in seeds:
            truth = draw(DrawSpec(n_models=N, n_items=J), seed)
            for label, options in (
                ("old-box", {"a_max": OLD_BOX}),
                ("default", {}),
                ("weak", {"prior": "weak"}),
            ):
                settings = estimators.make_settings("mml", **options)
                start = time.process_time()
                fit = estimators.run(truth, "2pl", "mml", settings)
                cpu = time.process_time() - start
                _row(N, J, seed, label, fit.estimate.a, fit.estimate.b, truth, settings.a_max, cpu)
            try:
                import mirt
            except ImportError:
                print(f"{N:>4} {J:>5} {seed:>4}  mirt     (python mirt not installed)")
                continue
            start = time.process_time()
            ref = mirt.fit_mirt(
                truth.Y.astype(np.int32), model="2PL", n_quadpts=61, tol=1e-4, compute_standard_errors=False
            )
            cpu = time.process_time() - start
            a, b = (np.asarray(v, float).ravel() for v in (ref.model.discrimination, ref.model.difficulty))
            _row(N, J, seed, "mirt", a, b, truth, 5.0, cpu)


if __name__ == "__main__":
    main(sys.argv[1:])
