"""The batched state: B environments x N vehicle slots, struct of arrays with explicit dtypes.

Vehicle slot 0 of every environment is the ego. A `State` is plain arrays, so a
snapshot is a copy of rows and a restore writes them back: rolling G candidate plans
out of one state is `state.take([b] * G)`, then stepping the G copies together.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from methodkit.core.rng import chunk_seeds
from methodkit.core.sim.highway import events as ev
from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway.road import Road, stack

# Driver parameters (IDMVehicle's constants), the columns of a `drivers` matrix.
DRIVER_FIELDS = ("a", "b", "s0", "T", "delta", "politeness", "gain", "brake", "noise")
DEFAULT_DRIVER = {
    "a": 3.0,  # COMFORT_ACC_MAX
    "b": 5.0,  # -COMFORT_ACC_MIN
    "s0": 10.0,  # DISTANCE_WANTED = 5 + LENGTH
    "T": 1.5,  # TIME_WANTED
    "delta": 4.0,  # DELTA
    "politeness": 0.0,  # POLITENESS
    "gain": 0.2,  # LANE_CHANGE_MIN_ACC_GAIN
    "brake": 2.0,  # LANE_CHANGE_MAX_BRAKING_IMPOSED
    "noise": 0.0,  # reaction noise: sd of a Gaussian added to each acceleration command
}
# Aggressive drivers (the cut-in drivers): no politeness, short headway, no gain
# threshold, and they impose harder braking on the car they cut in front of.
AGGRESSIVE_DRIVER = {**DEFAULT_DRIVER, "politeness": 0.0, "T": 0.8, "gain": 0.0, "brake": 4.5}


@dataclass
class State:
    """Everything a step reads and writes; the road arrays travel with it."""

    veh: np.ndarray  # float64 [B, N_VFIELDS, N] (cos/sin of the heading included: set them with it)
    kind: np.ndarray  # int8 [B, N]
    lanes: np.ndarray  # int16 [B, 2, N]: current lane, target lane
    crashed: np.ndarray  # bool [B, N]
    contact: np.ndarray  # bool [B, N]: the ego overlapped slot j at the last step
    env_i: np.ndarray  # int32 [B, N_EI]
    env_f: np.ndarray  # float64 [B, N_EF]
    rng: np.ndarray  # uint64 [B]: one xorshift stream per environment
    lanes_t: np.ndarray  # float64 [B, L, 4]
    road_i: np.ndarray  # int32 [B, N_RI]
    road_f: np.ndarray  # float64 [B, N_RF]

    @property
    def batch(self) -> int:
        return int(self.veh.shape[0])

    @property
    def slots(self) -> int:
        return int(self.veh.shape[2])

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, f.name).nbytes for f in fields(self))

    def arrays(self) -> tuple:
        return tuple(getattr(self, f.name) for f in fields(self))

    def take(self, index) -> State:
        """A new State of copies of environments `index` (repeats allowed): the snapshot."""
        index = np.asarray(index, dtype=np.int64)
        return State(*(np.ascontiguousarray(a[index]) for a in self.arrays()))

    snapshot = take

    def restore(self, snap: State, index) -> None:
        """Write a snapshot's environments back into rows `index`, in place."""
        index = np.asarray(index, dtype=np.int64)
        if self.lanes_t.shape[1] != snap.lanes_t.shape[1] or self.slots != snap.slots:
            raise ValueError("snapshot shapes differ from this state's")
        for mine, theirs in zip(self.arrays(), snap.arrays(), strict=True):
            mine[index] = theirs

    def copy(self) -> State:
        return State(*(a.copy() for a in self.arrays()))

    def boxes(self) -> np.ndarray:
        """[B, N, 5] = (x, y, heading, length, width) of the shared interface."""
        return np.stack([self.veh[:, f] for f in (K.X, K.Y, K.H, K.LEN, K.WID)], axis=-1)

    def speeds(self) -> np.ndarray:
        """[B, N, 2] = (vx, vy)."""
        v = self.veh[:, K.V]
        return np.stack([v * np.cos(self.veh[:, K.H]), v * np.sin(self.veh[:, K.H])], axis=-1)

    @property
    def present(self) -> np.ndarray:
        return self.kind != K.ABSENT


@dataclass
class SceneInit:
    """One environment's initial condition: a road and its vehicles (slot 0 the ego)."""

    road: Road
    x: np.ndarray
    y: np.ndarray
    heading: np.ndarray
    speed: np.ndarray
    length: np.ndarray
    width: np.ndarray
    kind: np.ndarray  # CAR, TRUCK or OBSTACLE
    target_speed: np.ndarray
    drivers: np.ndarray  # [n, len(DRIVER_FIELDS)]
    timer: np.ndarray
    max_steps: int = 200  # frames (0.2 s each)
    seed: int = 0

    @property
    def n(self) -> int:
        return int(self.x.shape[0])


def driver_row(params: dict | None = None) -> np.ndarray:
    merged = {**DEFAULT_DRIVER, **(params or {})}
    return np.array([merged[k] for k in DRIVER_FIELDS], dtype=np.float64)


def pack(
    scenes: list[SceneInit],
    slots: int | None = None,
    ego_mode: int = K.EGO_PLAN,
    terminate_on_collision: bool = True,
    traffic_collisions: bool = True,
    seeds: np.ndarray | None = None,
    substeps: int = 1,
) -> State:
    """Lay scenes out in one batch of `slots` vehicle slots (default: the largest scene).

    `seeds` (uint64 [B]) seed the per-environment noise streams; default: each scene's
    seed through core.rng, so a scene's noise does not depend on its batch neighbours.
    """
    n_env = len(scenes)
    slots = slots or max(s.n for s in scenes)
    if any(s.n > slots for s in scenes):
        raise ValueError(f"a scene has more than {slots} vehicles")
    roads = stack([s.road for s in scenes])
    veh = np.zeros((n_env, K.N_VFIELDS, slots))
    kind = np.zeros((n_env, slots), dtype=np.int8)
    lanes = np.zeros((n_env, 2, slots), dtype=np.int16)
    env_i = np.zeros((n_env, K.N_EI), dtype=np.int32)
    env_f = np.zeros((n_env, K.N_EF))
    for b, s in enumerate(scenes):
        n = s.n
        for field, values in (
            (K.X, s.x),
            (K.Y, s.y),
            (K.H, s.heading),
            (K.V, s.speed),
            (K.LEN, s.length),
            (K.WID, s.width),
            (K.TSPEED, s.target_speed),
            (K.TIMER, s.timer),
        ):
            veh[b, field, :n] = values
        veh[b, K.A_MAX : K.NOISE + 1, :n] = s.drivers.T
        veh[b, K.COSH, :n] = np.cos(s.heading)
        veh[b, K.SINH, :n] = np.sin(s.heading)
        kind[b, :n] = s.kind
        lane_table = roads.lanes_t[b]
        for i in range(n):
            cur = _closest_lane(lane_table[: s.road.n_lanes], s.x[i], s.y[i])
            lanes[b, :, i] = cur
        env_i[b, K.EGO_MODE] = ego_mode
        env_i[b, K.MAX_STEPS] = s.max_steps * substeps
        env_i[b, K.TERM_COLLISION] = int(terminate_on_collision)
        env_i[b, K.TRAFFIC_COLL] = int(traffic_collisions)
        env_i[b, K.LAST_OTHER] = K.NONE
        env_f[b, K.X_START] = s.x[0]
    if seeds is None:
        seeds = np.array([chunk_seeds(s.seed, 1)[0] for s in scenes], dtype=np.uint64)
    rng = np.asarray(seeds, dtype=np.uint64) | np.uint64(1)  # xorshift needs a non-zero state
    return State(
        veh,
        kind,
        lanes,
        np.zeros((n_env, slots), dtype=bool),
        np.zeros((n_env, slots), dtype=bool),
        env_i,
        env_f,
        rng,
        roads.lanes_t,
        roads.road_i,
        roads.road_f,
    )


def _closest_lane(table: np.ndarray, x: float, y: float) -> int:
    d = np.abs(y - table[:, 2]) + np.maximum(x - table[:, 1], 0) + np.maximum(table[:, 0] - x, 0)
    return int(np.argmin(d))


def roles(state: State) -> np.ndarray:
    """Role codes [B, N] (events.py) of the slots: ego, car, truck, obstacle, aggressive driver."""
    out = state.kind.astype(np.int64).copy()  # CAR, TRUCK, OBSTACLE share the role codes
    idx = {f: DRIVER_FIELDS.index(f) for f in ("T", "politeness", "gain")}
    aggressive = np.ones(out.shape, dtype=bool)
    for f, k in idx.items():
        aggressive &= state.veh[:, K.A_MAX + k] == AGGRESSIVE_DRIVER[f]
    out[aggressive & (state.kind == K.CAR)] = ev.ROLE_AGGRESSIVE
    out[:, 0] = ev.ROLE_EGO
    return out
