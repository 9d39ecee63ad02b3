"""The same scenes through highway-env 1.12.1 itself: the parity reference and `rollout --backend highway-env`.

highway-env is imported only here and only when called (it is in the test extra). A
scene becomes one highway-env road ("a" -> "b") holding every lane of the segment table
as a StraightLane (so all lanes are MOBIL side lanes, as in this simulator), its traffic
IDMVehicles whose class constants are overridden per instance with the scene's driver
parameters, its static obstacles Obstacles. The ego is an IDMVehicle too (policy
"idm") or a ControlledVehicle holding its lane and speed (policy "keep"). highway-env
has no expert: the expert runs only in this simulator.
"""

from __future__ import annotations

import math

import numpy as np

from methodkit.core.errors import require
from methodkit.core.sim.highway import geometry as G
from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway.road import Road
from methodkit.core.sim.highway.state import DEFAULT_DRIVER, DRIVER_FIELDS, SceneInit

DRIVER_ATTRS = {
    "a": "COMFORT_ACC_MAX",
    "s0": "DISTANCE_WANTED",
    "T": "TIME_WANTED",
    "delta": "DELTA",
    "politeness": "POLITENESS",
    "gain": "LANE_CHANGE_MIN_ACC_GAIN",
    "brake": "LANE_CHANGE_MAX_BRAKING_IMPOSED",
}
POLICIES = ("idm", "keep")


def _hw():
    require("highway_env", "test")
    from highway_env.road.lane import StraightLane
    from highway_env.road.road import Road as HRoad
    from highway_env.road.road import RoadNetwork
    from highway_env.vehicle.behavior import IDMVehicle
    from highway_env.vehicle.controller import ControlledVehicle
    from highway_env.vehicle.objects import Obstacle

    return StraightLane, HRoad, RoadNetwork, IDMVehicle, ControlledVehicle, Obstacle


def build_road(road: Road, seed: int = 0):
    """A highway-env Road with one StraightLane per segment, all on the edge ("a", "b")."""
    StraightLane, HRoad, RoadNetwork, *_ = _hw()
    net = RoadNetwork()
    for x0, x1, y, w, _lane in road.segments[np.argsort(road.segments[:, 4])]:
        net.add_lane("a", "b", StraightLane([x0, y], [x1, y], width=w, speed_limit=road.speed_limit))
    return HRoad(network=net, np_random=np.random.RandomState(seed), record_history=False)


def set_driver(vehicle, row: np.ndarray) -> None:
    """Override an IDMVehicle's class constants on the instance (highway-env reads them through self)."""
    params = dict(zip(DRIVER_FIELDS, row, strict=True))
    for key, attr in DRIVER_ATTRS.items():
        setattr(vehicle, attr, float(params[key]))
    vehicle.COMFORT_ACC_MIN = -float(params["b"])


def build(scene: SceneInit, policy: str = "idm"):
    """(highway-env road, its vehicles in slot order) for a scene."""
    _, _, _, IDMVehicle, ControlledVehicle, Obstacle = _hw()
    road = build_road(scene.road, scene.seed % 2**32)
    slots = []
    for i in range(scene.n):
        pos = [scene.x[i], scene.y[i]]
        if scene.kind[i] == K.OBSTACLE:
            obj = Obstacle(road, pos, scene.heading[i])
            road.objects.append(obj)
        elif i == 0 and policy == "keep":
            obj = ControlledVehicle(road, pos, scene.heading[i], scene.speed[i], target_speed=scene.speed[i])
            road.vehicles.append(obj)
        else:
            obj = IDMVehicle(road, pos, scene.heading[i], scene.speed[i], target_speed=scene.target_speed[i])
            obj.timer = float(scene.timer[i])
            set_driver(obj, scene.drivers[i])
            road.vehicles.append(obj)
        obj.LENGTH = float(scene.length[i])
        obj.WIDTH = float(scene.width[i])
        obj.diagonal = math.hypot(obj.LENGTH, obj.WIDTH)
        slots.append(obj)
    # an ending lane ends in an Obstacle, as highway-env's merge-v0 builds its ramp
    for _x0, x1, y, _w, lane in scene.road.segments:
        if scene.road.lane_ends(int(lane)):
            road.objects.append(Obstacle(road, [x1, y]))
    return road, slots


def from_env(env) -> SceneInit:
    """The initial condition of a reset highway-env env (its vehicles, all made IDM drivers)."""
    road = env.unwrapped.road
    lanes = road.network.graph["0"]["1"]
    seg = np.array([[ln.start[0], ln.end[0], ln.start[1], ln.width, k] for k, ln in enumerate(lanes)], dtype=np.float64)
    x_end = float(seg[:, 1].max())
    r = Road(seg, speed_limit=float(lanes[0].speed_limit), route_end=x_end, road_end=x_end, n_main=len(lanes))
    vs = road.vehicles
    drivers = []
    for v in vs:
        row = dict(DEFAULT_DRIVER)
        row["delta"] = float(getattr(v, "DELTA", DEFAULT_DRIVER["delta"]))
        drivers.append([row[k] for k in DRIVER_FIELDS])
    return SceneInit(
        road=r,
        x=np.array([v.position[0] for v in vs]),
        y=np.array([v.position[1] for v in vs]),
        heading=np.array([v.heading for v in vs]),
        speed=np.array([v.speed for v in vs]),
        length=np.array([v.LENGTH for v in vs]),
        width=np.array([v.WIDTH for v in vs]),
        kind=np.full(len(vs), K.CAR, dtype=np.int8),
        target_speed=np.array([getattr(v, "target_speed", v.speed) for v in vs]),
        drivers=np.array(drivers),
        timer=np.array([getattr(v, "timer", (np.sum(v.position) * np.pi) % 1.0) for v in vs]),
        max_steps=int(env.unwrapped.config["duration"] * env.unwrapped.config["simulation_frequency"]),
    )


def make_matched_env(lanes: int = 3, vehicles: int = 20, seed: int = 0):
    """highway-env's highway-fast-v0 (5 Hz simulation, 1 Hz policy), the matched configuration."""
    require("highway_env", "test")
    import gymnasium as gym
    import highway_env  # noqa: F401  (registers the environments)

    env = gym.make("highway-fast-v0", config={"lanes_count": lanes, "vehicles_count": vehicles})
    env.reset(seed=seed)
    return env


def run(scene: SceneInit, policy: str = "idm", frames: int | None = None, dt: float = 0.2) -> dict:
    """Step a scene in highway-env (Road.act then Road.step, as AbstractEnv._simulate) and judge the ego.

    Returns boxes [T, N, 5], present [T, N], speed [T, N], lane [T, N] and the route outcome
    judged with this simulator's rules (collision, off-road, lane end, missed exit, route end).
    """
    if policy not in POLICIES:
        raise ValueError(f"highway-env backend policies: {', '.join(POLICIES)}")
    road, slots = build(scene, policy)
    frames = scene.max_steps if frames is None else frames
    r = scene.road
    segs = r.segments
    boxes, speed, lane = [], [], []
    end, x_start = "timeout", float(scene.x[0])
    ego = slots[0]
    lane_row = {int(s[4]): s for s in segs}
    for _ in range(frames):
        road.act()
        road.step(dt)
        boxes.append([[o.position[0], o.position[1], o.heading, o.LENGTH, o.WIDTH] for o in slots])
        speed.append([o.speed for o in slots])
        lane.append([o.lane_index[2] if o.lane_index else -1 for o in slots])
        x, y = ego.position
        cur = lane[-1][0]
        on_exit = r.exit_lane >= 0 and cur == r.exit_lane
        if ego.crashed:
            end = "collision"
            break
        if r.wants_exit and on_exit and x >= r.route_end - ego.LENGTH / 2:
            end = "route_completed"
            break
        if r.wants_exit and not on_exit and x > lane_row[r.exit_lane][1]:
            end = "missed_exit"
            break
        if not r.wants_exit and x >= r.route_end:
            end = "route_completed"
            break
        if r.lane_ends(cur) and x + ego.LENGTH / 2 * math.cos(ego.heading) > lane_row[cur][1]:
            end = "lane_end_overrun"
            break
        if not G.box_on_road(x, y, ego.heading, ego.LENGTH, ego.WIDTH, segs[np.argsort(segs[:, 4]), :4]):
            end = "off_road"
            break
    x_end = boxes[-1][0][0] if boxes else x_start
    progress = min(max((x_end - x_start) / max(r.route_end - x_start, 1e-9), 0.0), 1.0)
    if end == "route_completed":
        progress = 1.0
    return {
        "boxes": np.array(boxes),
        "speed": np.array(speed),
        "lane": np.array(lane),
        "end": end,
        "progress": progress,
        "seconds": len(boxes) * dt,
    }


def futures(scene: SceneInit, seconds: float = 4.0, dt: float = 0.2) -> dict:
    """A scene's next `seconds` in highway-env, every vehicle an IDM driver (the ego too, with its own driver
    row and target speed), in expert.futures' layout for one scene: ego [H, 3] (x, y, heading), agents
    [N, H, 4] (x, y, heading, speed of every slot), present [N, H] (all True: highway-env removes nobody)."""
    road, slots = build(scene, "idm")
    steps = int(round(seconds / dt))
    agents = np.zeros((len(slots), steps, 4))
    for t in range(steps):
        road.act()
        road.step(dt)
        agents[:, t] = [[o.position[0], o.position[1], o.heading, o.speed] for o in slots]
    return {"ego": agents[0, :, :3].copy(), "agents": agents, "present": np.ones(agents.shape[:2], dtype=bool)}


MATCHED_SPEC = {
    "family": "cruise-dense",
    "count": 1,
    "seed": 0,
    "params": {"vehicles": 20, "density": 1.0, "length": 5000},
}


def matched_batch(b: int):
    """B copies of this simulator's scene for the matched configuration (3 lanes, 20 vehicles, density 1)."""
    from methodkit.core.sim.highway.scenarios import generate
    from methodkit.core.sim.highway.state import pack

    scenes, _, _ = generate(MATCHED_SPEC)
    return pack(scenes * b, slots=21, terminate_on_collision=False)


def traffic_statistics(episodes: int, seconds: float = 30.0, lanes: int = 3, vehicles: int = 20) -> dict:
    """Mean speed and lane-change rate of all-IDM traffic, here and in highway-env, from the same starts.

    Episode k starts from highway-fast-v0 reset with seed k (its vehicles, speeds, IDM exponents
    and timers; the ego made an IDM driver with target speed 25 m/s), then runs `seconds` in
    both simulators. Mean speed: over vehicles and 0.2 s frames; lane-change rate: changes of
    the current lane index per vehicle per second.
    """
    from methodkit.core.sim.highway import simulate
    from methodkit.core.sim.highway.state import pack

    frames = int(round(seconds / simulate.FRAME_S))
    totals = {"ours": [0.0, 0, 0], "highway_env": [0.0, 0, 0]}  # speed sum, speed count, lane changes
    worst = 0.0  # largest position difference between the two over every frame and vehicle
    for k in range(episodes):
        env = make_matched_env(lanes, vehicles, k)
        scene = from_env(env)
        env.close()
        theirs = run(scene, "idm", frames=frames)
        _accumulate(totals["highway_env"], theirs["speed"], theirs["lane"], scene)
        state = pack([scene], ego_mode=K.EGO_IDM, terminate_on_collision=False)
        state.env_i[:, K.MAX_STEPS] = frames + 1
        sim = simulate.Sim(state)
        speed, lane, xy = [], [], []
        for _ in range(frames):
            sim.frames(1)
            speed.append(state.veh[0, K.V].copy())
            lane.append(state.lanes[0, K.CUR].copy())
            xy.append(state.veh[0, K.X : K.Y + 1].T.copy())
        t = theirs["boxes"].shape[0]
        worst = max(worst, float(np.abs(np.array(xy)[:t] - theirs["boxes"][:, :, :2]).max()))
        _accumulate(totals["ours"], np.array(speed), np.array(lane), scene)
    result = {"episodes": episodes, "max_position_diff_m": worst}
    for name, (speed_sum, count, changes) in totals.items():
        result[name] = {
            "mean_speed": speed_sum / max(count, 1),
            "lane_change_rate": changes / max(count, 1) / simulate.FRAME_S,
        }
    return result


def _accumulate(acc, speed: np.ndarray, lane: np.ndarray, scene) -> None:
    """Add one episode's [T, N] speeds and lanes (the frames after the start) to the totals."""
    acc[0] += float(speed.sum())
    acc[1] += int(speed.size)
    acc[2] += int((np.diff(lane, axis=0) != 0).sum())
