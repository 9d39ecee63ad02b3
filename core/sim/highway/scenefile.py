"""Scene files from a spec: initial states, the others' recorded futures, the expert's index and trajectory.

The arrays follow scenes.py's schema (fixed shapes, padded, with masks); this module only
fills them from the simulator and hands them to scenes.py's writer.
"""

from __future__ import annotations

import json
from importlib.metadata import version

import numpy as np

from methodkit.core.sim.highway import expert, scenarios, simulate
from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway.state import pack

CHUNK = 256


def build(spec, with_expert: bool = True, where: str = "spec") -> dict:
    """The scene arrays of a spec (every scene's initial state and 4 s of recorded future)."""
    scenes, ids, configs = scenarios.generate(spec, where)
    slots = max(s.n for s in scenes)
    lanes = max(s.road.n_lanes for s in scenes)
    parts = [_chunk(scenes[k : k + CHUNK], slots, lanes, with_expert) for k in range(0, len(scenes), CHUNK)]
    arrays = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    arrays["scene_id"] = np.array(ids)
    arrays["meta"] = np.array(
        json.dumps(
            {
                "simulator": f"methodkit.core.sim.highway {version('methodkit')}",
                "frame_s": simulate.FRAME_S,
                "generators": configs,
            }
        )
    )
    return arrays


def _chunk(scenes, slots: int, n_lanes: int, with_expert: bool) -> dict:
    state = pack(scenes, slots=slots)
    if state.lanes_t.shape[1] < n_lanes:
        pad = n_lanes - state.lanes_t.shape[1]
        state.lanes_t = np.concatenate([state.lanes_t, np.zeros((state.batch, pad, 4))], axis=1)
    speeds = state.speeds()
    agents = np.stack(
        [
            state.veh[:, K.X],
            state.veh[:, K.Y],
            state.veh[:, K.H],
            speeds[..., 0],
            speeds[..., 1],
            state.veh[:, K.LEN],
            state.veh[:, K.WID],
            state.kind.astype(np.float64),
        ],
        axis=-1,
    )
    lane_idx = np.broadcast_to(np.arange(n_lanes, dtype=np.float64), (state.batch, n_lanes))
    lanes = np.concatenate([state.lanes_t, lane_idx[..., None]], axis=-1)
    lane_mask = np.arange(n_lanes)[None, :] < state.road_i[:, K.N_LANES : K.N_LANES + 1]
    out = {
        "agents": agents,
        "agent_mask": state.present.copy(),
        "lanes": lanes,
        "lane_mask": lane_mask,
        "route": np.column_stack(
            [
                state.env_f[:, K.X_START],
                state.road_f[:, K.ROUTE_END],
                state.road_i[:, K.WANTS_EXIT],
                state.road_i[:, K.EXIT_LANE],
            ]
        ).astype(np.float64),
        "speed_limit": state.road_f[:, K.SPEED_LIMIT].copy(),
        "drivers": np.ascontiguousarray(state.veh[:, K.A_MAX : K.NOISE + 1].transpose(0, 2, 1)),
        "target_speed": state.veh[:, K.TSPEED].copy(),
    }
    if with_expert:
        fut = expert.futures(state)
        index, traj = expert.expert_index(state, traj=fut["ego"])
        out["futures"] = fut["agents"]
        out["future_mask"] = fut["present"]
        out["expert_index"] = index.astype(np.int64)
        out["expert_traj"] = traj
    return out


def write(path: str, arrays: dict, force: bool = False) -> None:
    from methodkit.core import io

    io.write_arrays(path, arrays, force=force)
