"""The privileged rule-based expert and its expert index.

The expert is the ego driven inside the kernel (kernels.EGO_EXPERT): IDM toward the road's
speed limit and a route-aware MOBIL with politeness 0.3 that looks ahead at lane ends and
the exit (kernels.route_lane_of), sees every vehicle and obstacle exactly, never reverses,
and creeps past a standing blocker while it changes lanes. Its 4 s future, rolled out
from a snapshot with the traffic reacting, maps to the nearest of the 16 candidate plans
(mean distance over the 20 plan points): the expert index.
"""

from __future__ import annotations

import numpy as np

from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway import vocab
from methodkit.core.sim.highway.simulate import FRAME_S, Sim
from methodkit.core.sim.highway.state import State


def futures(
    state: State, env=None, seconds: float = vocab.PLAN_SECONDS, substeps: int = 1, ego_mode: int = K.EGO_EXPERT
) -> dict:
    """Roll environments `env` forward under the expert from copies; `state` is not touched.

    `ego_mode=kernels.EGO_IDM` rolls the ego out as a traffic driver with its own driver parameters and
    target speed instead (a driver other than the expert labelling its scenes).

    Returns ego [E, H, 3] (x, y, heading at each 0.2 s frame) and agents [E, N, H, 4]
    (x, y, heading, speed of every slot), present [E, N, H].
    """
    env = np.arange(state.batch) if env is None else np.asarray(env)
    copy = state.take(env)
    copy.env_i[:, K.EGO_MODE] = ego_mode
    copy.env_i[:, K.MAX_STEPS] = np.iinfo(np.int32).max
    if ego_mode == K.EGO_EXPERT:
        copy.veh[:, K.TSPEED, 0] = copy.road_f[:, K.SPEED_LIMIT]
    sim = Sim(copy, substeps)
    steps = int(round(seconds / FRAME_S))
    agents = np.zeros((env.size, copy.slots, steps, 4))
    present = np.zeros((env.size, copy.slots, steps), dtype=bool)
    for t in range(steps):
        sim.frames(1)
        for f, field in enumerate((K.X, K.Y, K.H, K.V)):
            agents[:, :, t, f] = copy.veh[:, field]
        present[:, :, t] = copy.present
    return {"ego": agents[:, 0, :, :3].copy(), "agents": agents, "present": present}


def expert_index(state: State, env=None, traj: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(expert index [E], the expert's 4 s ego trajectory [E, 20, 3]) of environments `env`.

    `traj` reuses a trajectory `futures` already rolled out.
    """
    env = np.arange(state.batch) if env is None else np.asarray(env)
    traj = futures(state, env)["ego"] if traj is None else traj
    index = np.array([vocab.nearest(vocab.plans(state, b, FRAME_S), traj[e]) for e, b in enumerate(env)])
    return index, traj


def expert_policy(sim: Sim, env: np.ndarray) -> np.ndarray:
    """The expert as a plan policy: at each decision, the candidate nearest its 4 s future."""
    return expert_index(sim.state, env)[0]
