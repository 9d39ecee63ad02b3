"""The trajectory vocabulary: 3 lateral x 5 speed targets + emergency stop = 16 candidates.

Candidate c < 15 is (lateral c // 5, speed c % 5): lateral {left, keep, right} moves the
target one lane (index - 1, 0, + 1; a lane not reachable from the ego's position leaves
the target where it is, as highway-env's LANE_LEFT/LANE_RIGHT do), speed {v-8, v-4, v, v+4,
v+8} m/s around the ego's current speed, clipped to [0, v_max] (the road's speed limit).
Candidate 15 is the emergency stop: keep the lane, target speed 0 (braking at the 6 m/s^2
limit). A candidate is executed by the ego's plan controller (kernels.act_plan), and its
4 s plan is the same controller driven without the other vehicles (kernels.ego_plans).
"""

from __future__ import annotations

import numpy as np

from methodkit.core.sim.highway import kernels as K

LATERAL = (-1, 0, 1)
LATERAL_NAMES = ("left", "keep", "right")
SPEED_DELTAS = (-8.0, -4.0, 0.0, 4.0, 8.0)
N_CANDIDATES = 16
EMERGENCY = 15
KEEP = 7  # keep lane, keep speed
PLAN_SECONDS = 4.0


def names() -> list[str]:
    out = [f"{lat}/{dv:+.0f}" for lat in LATERAL_NAMES for dv in SPEED_DELTAS]
    return [*out, "stop"]


def targets(state, env: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(target lane int [E, 16], target speed float [E, 16]) of the ego of environments `env`."""
    env = np.arange(state.batch) if env is None else np.asarray(env, dtype=np.int64)
    cur = state.lanes[env, K.CUR, 0].astype(np.int64)
    v = state.veh[env, K.V, 0]
    x = state.veh[env, K.X, 0]
    y = state.veh[env, K.Y, 0]
    n_lanes = state.road_i[env, K.N_LANES]
    lane = np.empty((env.size, N_CANDIDATES), dtype=np.int64)
    for li, d in enumerate(LATERAL):
        t = cur + d
        row = state.lanes_t[env, np.clip(t, 0, state.lanes_t.shape[1] - 1)]
        s = x - row[:, 0]
        reachable = (
            (t >= 0) & (t < n_lanes) & (np.abs(y - row[:, 2]) <= 2 * row[:, 3]) & (s >= 0)
            & (s < row[:, 1] - row[:, 0] + K.REF_LENGTH)
        )  # fmt: skip
        lane[:, li * 5 : li * 5 + 5] = np.where(reachable | (d == 0), t, cur)[:, None]
    lane[:, EMERGENCY] = cur
    speed = np.empty((env.size, N_CANDIDATES))
    deltas = np.tile(SPEED_DELTAS, len(LATERAL))
    speed[:, :EMERGENCY] = np.clip(v[:, None] + deltas[None, :], 0.0, state.road_f[env, K.SPEED_LIMIT][:, None])
    speed[:, EMERGENCY] = 0.0
    return lane, speed


def apply(state, candidate: np.ndarray, env: np.ndarray | None = None) -> None:
    """Set the ego's targets of environments `env` to their candidates (ints in [0, 16))."""
    env = np.arange(state.batch) if env is None else np.asarray(env)
    candidate = np.asarray(candidate, dtype=np.int64)
    if np.any((candidate < 0) | (candidate >= N_CANDIDATES)):
        raise ValueError(f"candidates must lie in [0, {N_CANDIDATES})")
    lane, speed = targets(state, env)
    rows = np.arange(env.size)
    state.lanes[env, K.TGT, 0] = lane[rows, candidate]
    state.veh[env, K.TSPEED, 0] = speed[rows, candidate]


def plans(state, b: int, dt: float, seconds: float = PLAN_SECONDS) -> np.ndarray:
    """The 16 candidates' ego plans of environment b: [16, steps, 3] (x, y, heading) at dt."""
    lane, speed = targets(state, np.array([b]))
    lane_y = state.lanes_t[b, lane[0], K.LY]
    steps = int(round(seconds / dt))
    out = np.zeros((N_CANDIDATES, steps, 3))
    veh = state.veh[b]
    K.ego_plans(veh[K.X, 0], veh[K.Y, 0], veh[K.H, 0], veh[K.V, 0], veh[K.LEN, 0], lane_y, speed[0], dt, steps, out)
    return out


# Ties (a side lane that does not exist makes its five candidates copies of "keep") go to
# the keep-lane candidates, then left, right, stop.
TIE_ORDER = np.array([5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 10, 11, 12, 13, 14, 15])


def nearest(plans_xy: np.ndarray, trajectory_xy: np.ndarray) -> int:
    """Index of the plan nearest a trajectory (mean Euclidean distance over the common steps)."""
    t = min(plans_xy.shape[1], trajectory_xy.shape[0])
    d = np.linalg.norm(plans_xy[:, :t, :2] - trajectory_xy[None, :t, :2], axis=-1).mean(axis=1)
    return int(TIE_ORDER[np.argmin(d[TIE_ORDER])])
