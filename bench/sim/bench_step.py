"""Batched stepping against highway-env 1.12.1 on the matched configuration, and the thread scaling.

Matched configuration (the issue's): highway-fast-v0, 3 lanes, 20 vehicles besides the ego,
5 Hz simulation, 1 Hz policy. One env-step = one policy decision = 5 simulation frames plus
an observation. highway-env: env.step(IDLE) (its Kinematics observation, reward, collision
checks of the ego). Ours: the same traffic in B environments (cruise-dense family at
highway-env's density 1), the ego holding lane and speed (vocab.KEEP), 5 frames, observe()
(ego + 8 nearest). Times are CPU seconds per env-step (process time; the machine is shared,
so wall time is printed beside it); ours is total / (B x steps).
Prints `case size ours_s ref_s ratio`, then the scaling table (B = 1, 64, 256, 1024; 1 and 2 threads).

    nice .venv/bin/python -P bench/sim/bench_step.py
"""

from __future__ import annotations

import time

import numba
import numpy as np

from methodkit.core.sim.highway import highway_env_backend as hwb
from methodkit.core.sim.highway import simulate, vocab

STEPS = 30  # env-steps per measurement (30 s episodes, highway-fast's duration)


def highway_env_cost(episodes: int = 3) -> tuple[float, float]:
    cpu = wall = 0.0
    n = 0
    for seed in range(episodes):
        env = hwb.make_matched_env(3, 20, seed)
        idle = 1  # DiscreteMetaAction: 0 LANE_LEFT, 1 IDLE, 2 LANE_RIGHT, 3 FASTER, 4 SLOWER
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(STEPS):
            _, _, terminated, truncated, _ = env.step(idle)
            n += 1
            if terminated or truncated:
                break
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
        env.close()
    return cpu / n, wall / n


def ours_cost(b: int, threads: int, parallel: bool | None = None) -> tuple[float, float]:
    numba.set_num_threads(threads)
    state = hwb.matched_batch(b)
    sim = simulate.Sim(state)
    keep = np.full(b, vocab.KEEP)
    env = np.arange(b)
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(STEPS):
        vocab.apply(state, keep, env)
        sim.frames(5, parallel=parallel)
        sim.observe()
    cpu = time.process_time() - c0
    wall = time.perf_counter() - w0
    return cpu / (b * STEPS), wall / (b * STEPS)


def main() -> None:
    ours_cost(2, 1)  # compile outside the timing
    ours_cost(64, 1, parallel=True)
    ref_cpu, ref_wall = highway_env_cost()
    print("case size ours_s ref_s ratio")
    rows = []
    for b in (1, 64, 256, 1024):
        for threads in (1, 2):
            cpu, wall = ours_cost(b, threads)
            rows.append((b, threads, cpu, wall))
            if threads == 1:
                print(f"env_step_1thread B={b} {cpu:.3e} {ref_cpu:.3e} {ref_cpu / cpu:.0f}")
    print(f"# highway-env: {1 / ref_cpu:.1f} env-steps per CPU second ({1 / ref_wall:.1f} per wall second)")
    print("# scaling: B threads cpu_s_per_env_step wall_s_per_env_step env_steps_per_wall_s")
    for b, threads, cpu, wall in rows:
        print(f"# {b} {threads} {cpu:.3e} {wall:.3e} {1 / wall:.0f}")


if __name__ == "__main__":
    main()
