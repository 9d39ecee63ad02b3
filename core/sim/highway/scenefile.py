"""Scene files from a spec: initial states, the others' recorded futures, the expert's index and trajectory.

The arrays follow scenes.py's schema (fixed shapes, padding + masks); this module fills them
from the simulator (slot 0 is `ego`, slots 1.. are `agents`; the futures are recorded with
the expert driving, the traffic reacting to it) and hands them to scenes.write_scenes.
"""

from __future__ import annotations

from importlib.metadata import version

import numpy as np

from methodkit.core.sim.highway import expert, scenarios, scenes, simulate
from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway.state import pack, roles

CHUNK = 256


def build(spec, where: str = "spec") -> tuple[dict, dict]:
    """(arrays, meta) of the scene file of a spec."""
    found, ids, configs = scenarios.generate(spec, where)
    slots = max(s.n for s in found)
    n_lanes = max(s.road.n_lanes for s in found)
    parts = [_chunk(found[k : k + CHUNK], slots, n_lanes) for k in range(0, len(found), CHUNK)]
    arrays = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    arrays["scene_id"] = np.array(ids)
    meta = {
        "dt": simulate.FRAME_S,
        "simulator": f"methodkit.core.sim.highway {version('methodkit')}",
        "generator": configs,
        "seeds": [c["seed"] for c in configs],
        "futures": "recorded with the expert driving the ego (traffic reacting)",
    }
    return arrays, meta


def _chunk(part, slots: int, n_lanes: int) -> dict:
    return state_arrays(pack(part, slots=slots), n_lanes)


def state_arrays(state, n_lanes: int, futures: dict | None = None) -> dict:
    """The scene arrays (schema keys but scene_id) of every environment of a packed `state`, now.

    The state is not changed. `futures` (as expert.futures returns) replaces the expert's rollout, for
    callers that snapshot mid-episode or label scenes with another driver."""
    speeds = state.speeds()
    role = roles(state).astype(np.float64)
    features = np.stack(
        [state.veh[:, K.X], state.veh[:, K.Y], state.veh[:, K.H], speeds[..., 0], speeds[..., 1], state.veh[:, K.LEN],
         state.veh[:, K.WID], role],
        axis=-1,
    )  # fmt: skip
    lanes = np.zeros((state.batch, n_lanes, 5))
    width = state.lanes_t.shape[1]
    lanes[:, :width, :4] = state.lanes_t
    lanes[:, :, 4] = np.arange(n_lanes)
    fut = expert.futures(state) if futures is None else futures
    index, traj = expert.expert_index(state, traj=fut["ego"])
    return {
        "ego": features[:, 0],
        "agents": features[:, 1:],
        "agent_mask": state.present[:, 1:].copy(),
        "futures": fut["agents"][:, 1:],
        "future_mask": fut["present"][:, 1:],
        "lanes": lanes,
        "lane_mask": np.arange(n_lanes)[None, :] < state.road_i[:, K.N_LANES : K.N_LANES + 1],
        "route": np.column_stack([state.env_f[:, K.X_START], state.road_f[:, K.ROUTE_END]]),
        "expert_index": index.astype(np.int64),
        "expert_traj": traj,
    }


def write(path: str, arrays: dict, meta: dict, force: bool = False) -> None:
    scenes.write_scenes(path, arrays, meta, force=force)
