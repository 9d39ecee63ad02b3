"""State memory: 1024 environments x 32 vehicle slots against the issue's 10 MB, and highway-env's per-env size.

Ours: State.nbytes (every array a step reads or writes, road tables included). highway-env:
the pickled size of one matched highway-fast-v0 env's road (vehicles, lanes, network) times
1024, a lower bound of its resident size. Prints `case size ours_bytes ref_bytes ratio`.

    nice .venv/bin/python -P bench/sim/bench_memory.py
"""

from __future__ import annotations

import pickle

from methodkit.core.sim.highway import highway_env_backend as hwb
from methodkit.core.sim.highway import scenarios
from methodkit.core.sim.highway.state import pack

LIMIT = 10 * 2**20


def main() -> None:
    scenes, _, _ = scenarios.generate({"family": "cruise-dense", "count": 1, "params": {"vehicles": 31}})
    state = pack(scenes * 1024, slots=32)
    env = hwb.make_matched_env(3, 31, 0)
    per_env = len(pickle.dumps(env.unwrapped.road))
    print("case size ours_bytes ref_bytes ratio")
    print(f"state_vs_10MB 1024x32 {state.nbytes} {LIMIT} {LIMIT / state.nbytes:.2f}")
    print(f"state_vs_highway_env_pickle 1024x32 {state.nbytes} {per_env * 1024} {per_env * 1024 / state.nbytes:.1f}")
    per_vehicle = state.nbytes / (1024 * 32)
    print(f"# {state.nbytes / 2**20:.2f} MiB, {per_vehicle:.0f} bytes per vehicle slot")


if __name__ == "__main__":
    main()
