"""Stepping a batch, closed-loop rollouts under a policy, and episode records.

The simulation runs at 5 Hz (one frame = 0.2 s, split into `substeps` integration steps);
the ego's policy decides once a second (every 5 frames), as highway-env's
simulation_frequency = 5, policy_frequency = 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.sim.highway import events as E
from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway import vocab
from methodkit.core.sim.highway.road import segments_of
from methodkit.core.sim.highway.state import State, roles

FRAME_S = 0.2  # 5 Hz
FRAMES_PER_DECISION = 5  # 1 Hz decisions
PARALLEL_FROM = 32  # below this many environments a thread launch costs more than it saves


@dataclass
class Sim:
    """A batch of environments and its clock."""

    state: State
    substeps: int = 1

    @property
    def dt(self) -> float:
        return FRAME_S / self.substeps

    def frames(self, n: int = 1, parallel: bool | None = None) -> None:
        """Advance every running environment by n frames (n * substeps kernel steps).

        parallel=None threads over environments from PARALLEL_FROM of them on.
        """
        s = self.state
        parallel = s.batch >= PARALLEL_FROM if parallel is None else parallel
        kernel = K.step_batch if parallel else K.step_batch_serial
        kernel(
            s.veh, s.kind, s.lanes, s.crashed, s.contact, s.lanes_t, s.road_i, s.road_f, s.env_i, s.env_f, s.rng,
            self.dt, n * self.substeps,
        )  # fmt: skip

    @property
    def done(self) -> np.ndarray:
        return self.state.env_i[:, K.DONE] != 0

    def observe(self, k_near: int = 8, max_range: float = 5 * K.MAX_SPEED) -> tuple[np.ndarray, np.ndarray]:
        """Ego features [B, 5] and the k nearest vehicles [B, k, 6] (see kernels.observe_batch)."""
        s = self.state
        ego = np.zeros((s.batch, 5))
        near = np.zeros((s.batch, k_near, 6))
        kernel = K.observe_batch if s.batch >= PARALLEL_FROM else K.observe_batch_serial
        kernel(s.veh, s.kind, s.lanes, s.lanes_t, s.road_i, s.road_f, k_near, max_range, ego, near)
        return ego, near


def vectorised_scene(state: State) -> dict:
    """The raw scene for graph encoders, in the ego's frame (x relative to the ego).

    agents [B, N, 8] = (dx, y, heading, vx, vy, length, width, kind), agent_mask [B, N];
    lanes [B, L, 4] = (x0 - x_ego, x1 - x_ego, y, width), lane_mask [B, L].
    """
    x_ego = state.veh[:, K.X, :1]
    speeds = state.speeds()
    agents = np.stack(
        [
            state.veh[:, K.X] - x_ego,
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
    lanes = state.lanes_t.copy()
    lanes[..., 0] -= x_ego
    lanes[..., 1] -= x_ego
    lane_mask = np.arange(lanes.shape[1])[None, :] < state.road_i[:, K.N_LANES : K.N_LANES + 1]
    return {"agents": agents, "agent_mask": state.present.copy(), "lanes": lanes, "lane_mask": lane_mask}


# ---------------------------------------------------------------- policies

# A policy maps the batch (a Sim) to one candidate per environment; the three built-in
# ones need no model. "expert" and "idm" drive the ego inside the kernel instead.
Policy = Callable[[Sim, np.ndarray], np.ndarray]


def keep_policy(sim: Sim, env: np.ndarray) -> np.ndarray:
    return np.full(env.size, vocab.KEEP, dtype=np.int64)


EGO_MODES = {"expert": K.EGO_EXPERT, "idm": K.EGO_IDM}
POLICIES: dict[str, Policy | None] = {"expert": None, "idm": None, "keep": keep_policy}


@dataclass
class Episodes:
    """What a rollout returns: the final state and, when recorded, per-frame arrays."""

    state: State
    frames: int
    boxes: np.ndarray | None = None  # [T, B, N, 5]
    present: np.ndarray | None = None  # [T, B, N]
    plans: np.ndarray | None = None  # [T, B, H, 2] the ego's current plan (plan policies)
    events: list = field(default_factory=list)  # per env: list of (frame, kind, other)
    speed: np.ndarray | None = None  # [T, B] the ego's speed
    lane: np.ndarray | None = None  # [T, B] the ego's lane

    def record(self, b: int) -> dict:
        """Environment b as the shared episode record (ego index 0)."""
        s = self.state
        t_end = self.frames
        rec = {
            "road": segments_of(s.lanes_t[b], s.road_i[b]),
            "boxes": self.boxes[:t_end, b],
            "present": self.present[:t_end, b],
            "events": list(self.events[b]),
            "route": np.array([s.env_f[b, K.X_START], s.road_f[b, K.ROUTE_END]]),
            "dt": FRAME_S,
            "roles": roles(s)[b],
        }
        if s.road_i[b, K.WANTS_EXIT]:
            rec["exit_x"] = float(s.lanes_t[b, s.road_i[b, K.EXIT_LANE], K.LX0])
        if self.plans is not None:
            rec["plan"] = self.plans[:t_end, b]
        return rec


def rollout(
    state: State,
    policy: str | Policy = "expert",
    substeps: int = 1,
    record: bool = False,
    max_frames: int | None = None,
    parallel: bool | None = None,
) -> Episodes:
    """Run every environment to its end (or `max_frames`) under `policy`; the state is stepped in place."""
    sim = Sim(state, substeps)
    fn = POLICIES.get(policy) if isinstance(policy, str) else policy
    if isinstance(policy, str):
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}")
        state.env_i[:, K.EGO_MODE] = EGO_MODES.get(policy, K.EGO_PLAN)
        if policy == "idm":
            state.veh[:, K.TSPEED, 0] = state.road_f[:, K.SPEED_LIMIT]
        if policy == "expert":
            state.veh[:, K.TSPEED, 0] = state.road_f[:, K.SPEED_LIMIT]
    else:
        state.env_i[:, K.EGO_MODE] = K.EGO_PLAN
    limit = int(state.env_i[:, K.MAX_STEPS].max() // substeps) + 1 if max_frames is None else max_frames
    out = Episodes(state, 0, events=[[] for _ in range(state.batch)])
    boxes, present, plans, speed, lane = [], [], [], [], []
    plan_now = np.full((state.batch, int(vocab.PLAN_SECONDS / FRAME_S), 2), np.nan)

    def record_frame():
        boxes.append(state.boxes())
        present.append(state.present.copy())
        plans.append(plan_now.copy())
        speed.append(state.veh[:, K.V, 0].copy())
        lane.append(state.lanes[:, K.CUR, 0].copy())

    for frame in range(limit):
        running = np.flatnonzero(~sim.done)
        if running.size == 0:
            break
        if fn is not None and frame % FRAMES_PER_DECISION == 0:
            choice = np.asarray(fn(sim, running), dtype=np.int64)
            vocab.apply(state, choice, running)
            if record:
                for e, b in enumerate(running):
                    plan_now[b] = vocab.plans(state, b, FRAME_S)[choice[e], :, :2]
        if record:
            record_frame()
            for _ in range(substeps):
                before = sim.done.copy()
                _one_step(sim, parallel)
                ev = state.env_i[:, K.LAST_EVENT]
                for b in np.flatnonzero((ev != K.EV_NONE) & ~before):
                    out.events[b].append((frame + 1, int(ev[b]), int(state.env_i[b, K.LAST_OTHER])))
        else:
            sim.frames(1, parallel)
        out.frames = frame + 1
    if record:
        record_frame()
        out.frames += 1
        out.boxes = np.stack(boxes)
        out.present = np.stack(present)
        out.plans = np.stack(plans) if fn is not None else None
        out.speed = np.stack(speed)
        out.lane = np.stack(lane)
    return out


def _one_step(sim: Sim, parallel: bool | None) -> None:
    s = sim.state
    parallel = s.batch >= PARALLEL_FROM if parallel is None else parallel
    kernel = K.step_batch if parallel else K.step_batch_serial
    kernel(
        s.veh, s.kind, s.lanes, s.crashed, s.contact, s.lanes_t, s.road_i, s.road_f, s.env_i, s.env_f, s.rng,
        sim.dt, 1,
    )  # fmt: skip


def route_table(state: State, ids: list[str] | None = None) -> dict:
    """Per-environment route outcomes (columns of the rollout CSV) from the final state."""
    e = state.env_i
    return {
        "scene": ids or [str(b) for b in range(state.batch)],
        "end": [E.EVENT_NAMES.get(int(r), "running") for r in e[:, K.REASON]],
        "progress": state.env_f[:, K.PROGRESS].copy(),
        "seconds": state.env_f[:, K.TIME].copy(),
        "distance_m": state.env_f[:, K.DIST].copy(),
        "collisions_vehicle": e[:, K.N_COLL_VEH].copy(),
        "collisions_obstacle": e[:, K.N_COLL_OBS].copy(),
        "offroad": e[:, K.N_OFFROAD].copy(),
        "lane_end": e[:, K.N_LANE_END].copy(),
        "missed_exit": e[:, K.N_MISSED_EXIT].copy(),
    }
