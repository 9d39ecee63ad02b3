"""Counterfactual group: 16 candidate plans x 4 s rolled out from one state, against highway-env's deepcopy + step.

highway-env (the matched highway-fast-v0: 3 lanes, 20 vehicles, 5 Hz simulation, 1 Hz
policy): for each of 16 candidates, copy.deepcopy(env) then 4 env.step(action) (its 5
meta-actions cycled). Ours: state.take([b] * 16) (the snapshot: array copies), the 16
candidates of the vocabulary applied, 20 frames (4 s) stepped together. CPU seconds per
group (process time; wall beside it), best of 5 for ours, mean of 3 for highway-env.
Prints `case size ours_s ref_s ratio`.

    nice .venv/bin/python -P bench/sim/bench_counterfactual.py
"""

from __future__ import annotations

import copy
import time

import numba
import numpy as np

from methodkit.core.sim.highway import highway_env_backend as hwb
from methodkit.core.sim.highway import simulate, vocab

G = 16


def highway_env_group(env) -> None:
    for c in range(G):
        e = copy.deepcopy(env)
        for _ in range(4):
            e.step(c % 5)


def ours_group(state) -> None:
    group = state.take(np.zeros(G, dtype=np.int64))
    vocab.apply(group, np.arange(G))
    simulate.Sim(group).frames(20)


def timed(fn, repeat):
    cpu, wall = [], []
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return cpu, wall


def main() -> None:
    numba.set_num_threads(1)
    state = hwb.matched_batch(1)
    simulate.Sim(state).frames(5)
    ours_group(state)  # compile
    cpu, wall = timed(lambda: ours_group(state), 5)
    ours_cpu, ours_wall = min(cpu), min(wall)
    env = hwb.make_matched_env(3, 20, 0)
    env.step(1)
    cpu, wall = timed(lambda: highway_env_group(env), 3)
    ref_cpu, ref_wall = float(np.mean(cpu)), float(np.mean(wall))
    print("case size ours_s ref_s ratio")
    print(f"counterfactual_group_cpu 16x4s {ours_cpu:.3e} {ref_cpu:.3e} {ref_cpu / ours_cpu:.0f}")
    print(f"counterfactual_group_wall 16x4s {ours_wall:.3e} {ref_wall:.3e} {ref_wall / ours_wall:.0f}")


if __name__ == "__main__":
    main()
