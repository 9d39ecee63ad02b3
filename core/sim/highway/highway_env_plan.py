"""A vocabulary (plan) policy driving the ego in highway-env 1.12.1: the parity backend of plan policies.

highway_env_backend runs highway-env's own drivers (ego "idm" or "keep"); this module lets
the same policy function that `simulate.rollout` takes (Sim, running env indices) -> one
candidate per environment) drive the ego there. The scene is built by
highway_env_backend.build; the ego becomes a ControlledVehicle whose acceleration is clipped
to +-ACC_LIMIT, as this simulator's plan controller (kernels.act_plan) does (highway-env
leaves it unclipped: an emergency stop would brake at v/0.6 m/s^2). Once a second the
highway-env state is copied into a one-environment State (positions, headings, speeds,
target speeds, timers; the ego's current lane from highway-env's lane index),
so the policy sees this simulator's observation (Sim.observe) and the candidate is turned
into a (target lane, target speed) by vocab.targets; the ego then follows it for five 0.2 s
frames (Road.act, Road.step, as AbstractEnv._simulate). The episode is judged with this
simulator's rules and returned as suite.run_highway_env's episode record, so
suite.exit_route_metrics scores both backends alike.
"""

from __future__ import annotations

import math

import numpy as np

from methodkit.core.sim.highway import events as ev
from methodkit.core.sim.highway import geometry as G
from methodkit.core.sim.highway import highway_env_backend as hwb
from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway import vocab
from methodkit.core.sim.highway.simulate import FRAME_S, FRAMES_PER_DECISION, Sim
from methodkit.core.sim.highway.state import SceneInit, pack

EDGE = ("a", "b")  # highway_env_backend.build puts every lane on this edge, lane id = this simulator's lane


def _plan_vehicle():
    ControlledVehicle = hwb._hw()[4]

    class PlanVehicle(ControlledVehicle):
        """ControlledVehicle with this simulator's plan-controller acceleration limit."""

        def speed_control(self, target_speed: float) -> float:
            return float(np.clip(self.KP_A * (target_speed - self.speed), -K.ACC_LIMIT, K.ACC_LIMIT))

    return PlanVehicle


def build(scene: SceneInit):
    """(highway-env road, its vehicles in slot order) with the ego a plan-following vehicle."""
    road, slots = hwb.build(scene, "keep")
    old = slots[0]
    ego = _plan_vehicle()(road, list(old.position), old.heading, old.speed, target_speed=old.speed)
    ego.LENGTH, ego.WIDTH, ego.diagonal = old.LENGTH, old.WIDTH, old.diagonal
    road.vehicles[road.vehicles.index(old)] = ego
    slots[0] = ego
    return road, slots


def snapshot(scene: SceneInit, slots) -> object:
    """This simulator's one-environment State of the highway-env vehicles now (policy input only)."""
    now = SceneInit(
        road=scene.road,
        x=np.array([o.position[0] for o in slots]),
        y=np.array([o.position[1] for o in slots]),
        heading=np.array([o.heading for o in slots]),
        speed=np.array([o.speed for o in slots]),
        length=scene.length,
        width=scene.width,
        kind=scene.kind,
        target_speed=np.array([getattr(o, "target_speed", 0.0) for o in slots]),
        drivers=scene.drivers,
        timer=np.array([getattr(o, "timer", 0.0) for o in slots]),
        max_steps=scene.max_steps,
        seed=scene.seed,
    )
    state = pack([now])
    ego = slots[0]
    state.lanes[0, K.CUR, 0] = ego.lane_index[2]
    return state


def decide(scene: SceneInit, slots, policy) -> int:
    """Ask `policy` for a candidate on the current highway-env state and set the ego's targets to it."""
    state = snapshot(scene, slots)
    running = np.zeros(1, dtype=np.int64)
    choice = int(np.asarray(policy(Sim(state), running), dtype=np.int64)[0])
    if not 0 <= choice < vocab.N_CANDIDATES:
        raise ValueError(f"candidates must lie in [0, {vocab.N_CANDIDATES})")
    lane, speed = vocab.targets(state, running)
    slots[0].target_lane_index = (*EDGE, int(lane[0, choice]))
    slots[0].target_speed = float(speed[0, choice])
    return choice


def _judge(scene: SceneInit, ego, hit: list, lane_ends: set) -> str | None:
    """The episode's end by this simulator's rules, or None while it runs (highway_env_backend.run's
    rules, with the obstacles `hit` in this frame told apart: the one closing an ending lane is a
    lane-end overrun, any other an obstacle collision)."""
    r = scene.road
    segs = r.segments
    row = {int(s[4]): s for s in segs}
    x, y = ego.position
    cur = int(ego.lane_index[2]) if ego.lane_index else -1
    on_exit = r.exit_lane >= 0 and cur == r.exit_lane
    if ego.crashed:
        if hit and all(id(o) in lane_ends for o in hit):
            return ev.EVENT_NAMES[ev.LANE_END_OVERRUN]
        return ev.EVENT_NAMES[ev.COLLISION_OBSTACLE if hit else ev.COLLISION_VEHICLE]
    if r.wants_exit and on_exit and x >= r.route_end - ego.LENGTH / 2:
        return ev.EVENT_NAMES[ev.ROUTE_COMPLETED]
    if r.wants_exit and not on_exit and x > row[r.exit_lane][1]:
        return ev.EVENT_NAMES[ev.MISSED_EXIT]
    if not r.wants_exit and x >= r.route_end:
        return ev.EVENT_NAMES[ev.ROUTE_COMPLETED]
    if cur in row and r.lane_ends(cur) and x + ego.LENGTH / 2 * math.cos(ego.heading) > row[cur][1]:
        return ev.EVENT_NAMES[ev.LANE_END_OVERRUN]
    if not G.box_on_road(x, y, ego.heading, ego.LENGTH, ego.WIDTH, segs[np.argsort(segs[:, 4]), :4]):
        return ev.EVENT_NAMES[ev.OFF_ROAD]
    return None


def run(scene: SceneInit, policy, frames: int | None = None) -> dict:
    """One episode of `scene` in highway-env with the ego driven by `policy` (decisions once a second).

    Returns the episode record of suite.run_highway_env (road, boxes [T+1, N, 5] from the start,
    present, events [(frame, code, -1)], route, dt, speeds, exit_x for exit routes) plus
    "choices" (the candidate of every decision) and "end" (the ending's event name).
    """
    road, slots = build(scene)
    in_slots = {id(o) for o in slots}
    lane_ends = {id(o) for o in road.objects if id(o) not in in_slots}
    frames = scene.max_steps if frames is None else frames
    boxes = [[[o.position[0], o.position[1], o.heading, o.LENGTH, o.WIDTH] for o in slots]]
    choices, end = [], None
    for frame in range(frames):
        if frame % FRAMES_PER_DECISION == 0:
            choices.append(decide(scene, slots, policy))
        crashed_before = {id(o) for o in road.objects if o.crashed}
        road.act()
        road.step(FRAME_S)
        boxes.append([[o.position[0], o.position[1], o.heading, o.LENGTH, o.WIDTH] for o in slots])
        hit = [o for o in road.objects if o.crashed and id(o) not in crashed_before]
        end = _judge(scene, slots[0], hit, lane_ends)
        if end is not None:
            break
    end = end or ev.EVENT_NAMES[ev.TIMEOUT]
    codes = {name: code for code, name in ev.EVENT_NAMES.items()}
    events = [(len(boxes) - 1, codes[end], -1)]
    boxes = np.array(boxes)
    r = scene.road
    record = {
        "road": r.segments.copy(),
        "boxes": boxes,
        "present": np.ones(boxes.shape[:2], dtype=bool),
        "events": np.array(events, dtype=np.int64).reshape(-1, 3),
        "route": np.array([scene.x[0], r.route_end]),
        "dt": FRAME_S,
        "speeds": np.gradient(boxes[..., :2], FRAME_S, axis=0) if len(boxes) > 1 else np.zeros_like(boxes[..., :2]),
        "choices": np.array(choices, dtype=np.int64),
        "end": end,
    }
    if r.wants_exit:
        record["exit_x"] = float(r.segments[r.segments[:, 4] == r.exit_lane][0, 0])
    return record
