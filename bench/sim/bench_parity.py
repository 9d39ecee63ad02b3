"""Parity with highway-env 1.12.1 on all-IDM 3-lane traffic: mean speed and lane-change rate over 200 episodes.

Episode k starts from highway-fast-v0 reset(seed=k) (3 lanes, 20 vehicles + the ego made an
IDM driver), copied into this simulator; both run 30 s at 5 Hz (highway_env_backend.
traffic_statistics). Prints `case size ours ref rel_diff` and the largest position difference
between the two simulators over every frame and vehicle. The issue's gate: within 5%.

    nice .venv/bin/python -P bench/sim/bench_parity.py [EPISODES]
"""

from __future__ import annotations

import sys
import time

from methodkit.core.sim.highway import highway_env_backend as hwb


def main() -> None:
    episodes = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    c0, w0 = time.process_time(), time.perf_counter()
    stats = hwb.traffic_statistics(episodes)
    print("case size ours ref rel_diff")
    for key in ("mean_speed", "lane_change_rate"):
        ours, ref = stats["ours"][key], stats["highway_env"][key]
        print(f"{key} {episodes}ep {ours:.6g} {ref:.6g} {abs(ours - ref) / abs(ref):.2e}")
    print(f"# max position difference over all frames and vehicles: {stats['max_position_diff_m']:.3e} m")
    print(f"# {time.process_time() - c0:.0f} CPU s, {time.perf_counter() - w0:.0f} wall s")


if __name__ == "__main__":
    main()
