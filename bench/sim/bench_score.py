"""PDM scorer benchmark: the Numba kernel (core.sim.highway.score.score_prepared) against the NumPy-vectorised
reference of the same function (score_plans_ref), on the same stress scenes, in the same run.

Scenes are score.random_inputs (3 lanes, traffic all around the ego, plans that weave, brake and leave the
road). Cases: 4 s plans at 10 Hz (NAVSIM's sampling, 41 states) and at 5 Hz (the simulator's, 21 states).
Both sides run on ONE thread (numba.set_num_threads(1), BLAS limited by threadpoolctl); times are CPU
seconds (process time), best of 3, inputs prepared outside the timing. A last column gives the largest
difference between the two over every sub-score: the reference is used at 1e-9.
Prints `case size ours_s ref_s ratio max_abs_diff`.

    nice .venv/bin/python -P bench/sim/bench_score.py
"""

from __future__ import annotations

import time

import numba
import numpy as np
from threadpoolctl import threadpool_limits

from methodkit.core.sim.highway import score


def best(fn, repeat=3):
    times, out = [], None
    for _ in range(repeat):
        start = time.process_time()
        out = fn()
        times.append(time.process_time() - start)
    return min(times), out


CASES = [
    # name, scenes, plans, agents, states, dt
    ("pdms_10hz", 64, 16, 16, 41, 0.1),
    ("pdms_10hz", 256, 16, 16, 41, 0.1),
    ("pdms_5hz", 256, 16, 16, 21, 0.2),
]


def main() -> None:
    numba.set_num_threads(1)
    warm = score.random_inputs(1, 2, 2, 3)
    score.score_prepared(warm)  # compile outside the timing
    print("case size ours_s ref_s ratio max_abs_diff")
    with threadpool_limits(1):
        for name, n, p, k, t1, dt in CASES:
            x = score.random_inputs(0, n, p, k, t1, dt)
            ours_s, ours = best(lambda x=x: score.score_prepared(x))
            ref_s, ref = best(lambda x=x: score.score_plans_ref(x), repeat=1 if n >= 256 else 3)
            diff = max(float(np.max(np.abs(getattr(ours, m) - getattr(ref, m)))) for m in score.METRICS)
            size = f"{n}x{p}x{k}x{t1}"
            print(f"{name} {size} {ours_s:.4f} {ref_s:.4f} {ref_s / ours_s:.1f} {diff:.1e}")


if __name__ == "__main__":
    main()
