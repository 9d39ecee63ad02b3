"""Scenario families: generators with documented, range-checked parameters and a seed per scene.

A spec is JSON: `{"seed": 0, "scenes": [{"family": "merge", "count": 10, "params": {...}}, ...]}`
(or one such entry on its own). Scene k of entry e draws from
SeedSequence([seed, e, k]), so a scene does not change when other entries are added.

Traffic is placed as highway-env's `Vehicle.create_random` does: the ego first (at
3 offsets, speed `ego_speed`), then each vehicle one offset ahead of the furthest one,
offset = (12 + v) exp(-5/40 lanes) / density x U(0.9, 1.1), in a random lane, at speed
U(0.7, 0.8) x speed limit, its target speed its initial speed, its IDM exponent
U(3.5, 4.5) (`randomize_behavior`) and its lane-change timer (x + y) pi mod 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError
from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway import road as roads
from methodkit.core.sim.highway.state import AGGRESSIVE_DRIVER, DEFAULT_DRIVER, SceneInit, driver_row

CAR_SIZE = (5.0, 2.0)
TRUCK_SIZE = (12.0, 2.5)
OBSTACLE_SIZES = {"car": (5.0, 2.0), "truck": (12.0, 2.5), "debris": (1.5, 1.5)}


@dataclass(frozen=True)
class Param:
    default: object
    lo: float | None = None
    hi: float | None = None
    doc: str = ""
    choices: tuple | None = None
    integer: bool = False


COMMON = {
    "lanes": Param(3, 1, 6, "through lanes", integer=True),
    "lane_width": Param(roads.DEFAULT_LANE_WIDTH, 2.5, 6.0, "lane width [m]"),
    "vehicles": Param(20, 0, 63, "traffic vehicles besides the ego", integer=True),
    "density": Param(1.0, 1e-3, 5.0, "traffic density (highway-env's vehicles_density; > 0)"),
    "length": Param(800.0, 100.0, 5000.0, "route length [m]"),
    "duration": Param(60.0, 5.0, 600.0, "episode time limit [s]"),
    "speed_limit": Param(30.0, 5.0, 40.0, "speed limit [m/s]"),
    "ego_speed": Param(25.0, 0.0, 40.0, "ego initial speed [m/s]"),
    "ego_lane": Param(-1, -1, 6, "ego start lane (-1: random)", integer=True),
    "truck_fraction": Param(0.0, 0.0, 1.0, "share of traffic that is 12 m trucks"),
    "aggressive_fraction": Param(0.0, 0.0, 1.0, "share of traffic with aggressive drivers"),
    "noise": Param(0.0, 0.0, 3.0, "reaction noise sd [m/s^2] of every traffic driver"),
    "politeness": Param(DEFAULT_DRIVER["politeness"], 0.0, 1.0, "MOBIL politeness of normal drivers"),
    "time_gap": Param(DEFAULT_DRIVER["T"], 0.1, 5.0, "IDM time headway T of normal drivers [s]"),
}

FAMILIES: dict[str, dict[str, Param]] = {
    "cruise-dense": {
        "density": Param(2.0, 1e-3, 5.0, "traffic density"),
        "vehicles": Param(30, 0, 63, "", integer=True),
    },
    "merge": {
        "merge_x": Param(250.0, 50.0, 2000.0, "x where the on-ramp merge lane ends [m]"),
        "ego_speed": Param(20.0, 0.0, 40.0, "ego initial speed [m/s]"),
    },
    "lane-drop": {
        "lanes": Param(3, 2, 6, "through lanes before the drop", integer=True),
        "drop_x": Param(300.0, 50.0, 3000.0, "x where the rightmost lane ends [m]"),
    },
    "exit": {
        "exit_x": Param(500.0, 100.0, 4000.0, "x where the exit ramp starts [m]"),
        "ramp_length": Param(100.0, 30.0, 500.0, "exit ramp length; the route ends at its end [m]"),
        "ego_lane": Param(0, -1, 6, "ego start lane (-1: random)", integer=True),
    },
    "cut-in": {
        "lanes": Param(3, 2, 6, "through lanes", integer=True),
        "gap": Param(12.0, 3.0, 50.0, "the cutter's lead over the ego when it starts [m]"),
        "cutter_speed": Param(3.0, -10.0, 15.0, "the cutter's speed minus the ego's [m/s]"),
    },
    "stopped-vehicle": {
        "obstacle_x": Param(250.0, 30.0, 3000.0, "obstacle distance ahead of the ego [m]"),
        "obstacle": Param("car", doc="what stands there", choices=tuple(OBSTACLE_SIZES)),
    },
    "jam": {
        "jam_x": Param(300.0, 50.0, 3000.0, "distance ahead of the ego where the jam starts [m]"),
        "jam_speed": Param(3.0, 0.0, 20.0, "target speed of the jammed vehicles [m/s]"),
        "density": Param(2.0, 1e-3, 5.0, "traffic density"),
    },
    "empty-road": {"vehicles": Param(0, 0, 0, "no traffic", integer=True)},
}

TOP_KEYS = {"seed", "scenes", "family", "count", "params"}


def family_params(family: str) -> dict[str, Param]:
    return {**COMMON, **FAMILIES[family]}


def check_params(family: str, params: dict, where: str) -> dict:
    """Defaults filled in; an unknown key or a value out of range is a DataError naming it."""
    if family not in FAMILIES:
        raise DataError(f"{where}.family: unknown family {family!r} (known: {', '.join(FAMILIES)})")
    spec = family_params(family)
    if not isinstance(params, dict):
        raise DataError(f"{where}.params must be an object")
    out = {}
    for key in params:
        if key not in spec:
            raise DataError(f"{where}.params: unknown parameter {key!r} for {family} (known: {', '.join(spec)})")
    for key, p in spec.items():
        value = params.get(key, p.default)
        name = f"{where}.params.{key}"
        if p.choices is not None:
            if value not in p.choices:
                raise DataError(f"{name} = {value!r} is not one of {', '.join(p.choices)}")
            out[key] = value
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise DataError(f"{name} must be a finite number, got {value!r}")
        if p.integer and value != int(value):
            raise DataError(f"{name} must be an integer, got {value!r}")
        if (p.lo is not None and value < p.lo) or (p.hi is not None and value > p.hi):
            raise DataError(f"{name} = {value!r} is out of range [{p.lo:g}, {p.hi:g}]")
        out[key] = int(value) if p.integer else float(value)
    if out["ego_lane"] >= out["lanes"] + (1 if family == "merge" else 0):
        raise DataError(f"{where}.params.ego_lane = {out['ego_lane']} is not a lane of a {out['lanes']}-lane road")
    return out


@dataclass
class Entry:
    family: str
    count: int
    params: dict


def parse_spec(spec, where: str = "spec") -> tuple[int, list[Entry]]:
    """(seed, entries) of a JSON spec; every error names the key."""
    if not isinstance(spec, dict):
        raise DataError(f"{where}: a scenario spec must be a JSON object")
    unknown = set(spec) - TOP_KEYS
    if unknown:
        raise DataError(f"{where}: unknown key {sorted(unknown)[0]!r} (known: seed, scenes, family, count, params)")
    seed = spec.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise DataError(f"{where}.seed must be a non-negative integer")
    if "scenes" in spec:
        items = spec["scenes"]
        if not isinstance(items, list) or not items:
            raise DataError(f"{where}.scenes must be a non-empty list")
        base = "scenes"
    else:
        items = [{k: v for k, v in spec.items() if k != "seed"}]
        base = None
    entries = []
    for e, item in enumerate(items):
        at = f"{where}.{base}[{e}]" if base else where
        if not isinstance(item, dict):
            raise DataError(f"{at} must be an object")
        extra = set(item) - {"family", "count", "params"}
        if extra:
            raise DataError(f"{at}: unknown key {sorted(extra)[0]!r} (known: family, count, params)")
        if "family" not in item:
            raise DataError(f"{at}: missing key 'family'")
        count = item.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 100000:
            raise DataError(f"{at}.count must be an integer in [1, 100000], got {count!r}")
        entries.append(Entry(item["family"], count, check_params(item["family"], item.get("params", {}), at)))
    return seed, entries


def generate(spec, where: str = "spec") -> tuple[list[SceneInit], list[str], list[dict]]:
    """The scenes of a spec: initial conditions, ids and each scene's generator config."""
    seed, entries = parse_spec(spec, where)
    scenes, ids, configs = [], [], []
    for e, entry in enumerate(entries):
        for k in range(entry.count):
            ss = np.random.SeedSequence([seed, e, k])
            rng = np.random.default_rng(ss)
            scene = GENERATORS[entry.family](entry.params, rng)
            scene.seed = int(ss.generate_state(1, dtype=np.uint64)[0])
            scenes.append(scene)
            ids.append(f"{entry.family}-{e}-{k}")
            configs.append({"family": entry.family, "params": entry.params, "seed": [seed, e, k]})
    return scenes, ids, configs


# ---------------------------------------------------------------- building blocks


class _Builder:
    """Vehicles placed one after another, as highway-env's create_random."""

    def __init__(self, road: roads.Road, p: dict, rng: np.random.Generator):
        self.road, self.p, self.rng = road, p, rng
        self.rows: list[tuple] = []

    def offset(self, speed: float, spacing: float) -> float:
        return spacing * (12 + 1.0 * speed) * math.exp(-5 / 40 * self.road.n_main)

    def add(self, x, lane, speed, target=None, kind=K.CAR, driver=None, size=CAR_SIZE, timer=None):
        y = self.road.lane_y(lane)
        timer = (x + y) * math.pi % 1.0 if timer is None else timer
        self.rows.append((x, y, speed, speed if target is None else target, kind, size, driver, timer))

    def ego(self, lane: int, x: float | None = None, speed: float | None = None):
        speed = self.p["ego_speed"] if speed is None else speed
        if x is None:
            off = self.offset(speed, 1.5)  # HighwayEnvFast's ego_spacing
            x = 3 * off + off * self.rng.uniform(0.9, 1.1)
        self.add(x, lane, speed, target=self.road.speed_limit, driver=DEFAULT_DRIVER)

    def traffic(self, count: int, lanes: list[int], x_from: float | None = None, speed=None, density=None):
        density = self.p["density"] if density is None else density
        x_last = max(r[0] for r in self.rows) if x_from is None else x_from
        for _ in range(count):
            v = self.rng.uniform(0.7, 0.8) * self.road.speed_limit if speed is None else speed
            x_last += self.offset(v, 1 / density) * self.rng.uniform(0.9, 1.1)
            lane = int(lanes[self.rng.integers(len(lanes))])
            truck = self.rng.uniform() < self.p["truck_fraction"]
            size = TRUCK_SIZE if truck else CAR_SIZE
            # never spawn on top of the previous vehicle of the same lane (long trucks, low speeds)
            y = self.road.lane_y(lane)
            for r in self.rows:
                if abs(r[1] - y) < 1e-6:
                    x_last = max(x_last, r[0] + (r[5][0] + size[0]) / 2 + 2.0)
            if self.rng.uniform() < self.p["aggressive_fraction"]:
                driver = dict(AGGRESSIVE_DRIVER)
            else:
                driver = {**DEFAULT_DRIVER, "politeness": self.p["politeness"], "T": self.p["time_gap"]}
            driver["delta"] = self.rng.uniform(3.5, 4.5)
            driver["noise"] = self.p["noise"]
            self.add(x_last, lane, v, kind=K.TRUCK if truck else K.CAR, driver=driver, size=size)

    def build(self) -> SceneInit:
        rows = self.rows
        drivers = np.stack([driver_row(r[6]) for r in rows]) if rows else np.zeros((0, 9))
        return SceneInit(
            road=self.road,
            x=np.array([r[0] for r in rows], dtype=np.float64),
            y=np.array([r[1] for r in rows], dtype=np.float64),
            heading=np.zeros(len(rows)),
            speed=np.array([r[2] for r in rows], dtype=np.float64),
            length=np.array([r[5][0] for r in rows], dtype=np.float64),
            width=np.array([r[5][1] for r in rows], dtype=np.float64),
            kind=np.array([r[4] for r in rows], dtype=np.int8),
            target_speed=np.array([r[3] for r in rows], dtype=np.float64),
            drivers=drivers,
            timer=np.array([r[7] for r in rows], dtype=np.float64),
            max_steps=int(round(self.p["duration"] / 0.2)),
        )


def _base(p) -> roads.Road:
    return roads.straight(p["lanes"], p["lane_width"], p["length"], p["speed_limit"])


def _ego_lane(p, rng, n: int) -> int:
    return int(rng.integers(n)) if p["ego_lane"] < 0 else int(p["ego_lane"])


def cruise(p, rng) -> SceneInit:
    b = _Builder(_base(p), p, rng)
    b.ego(_ego_lane(p, rng, p["lanes"]))
    b.traffic(p["vehicles"], list(range(p["lanes"])))
    return b.build()


def merge(p, rng) -> SceneInit:
    """The ego on an on-ramp lane right of the road that ends at merge_x; traffic on the road."""
    road = roads.with_extra_lane(_base(p), 0.0, p["merge_x"])
    b = _Builder(road, p, rng)
    ramp = road.n_lanes - 1
    b.ego(ramp, x=max(10.0, p["merge_x"] - 10.0 * p["ego_speed"] - 60.0))
    # traffic from behind the ego's entry to ahead of it
    b.traffic(p["vehicles"], list(range(p["lanes"])), x_from=b.rows[0][0] - 150.0)
    return b.build()


def lane_drop(p, rng) -> SceneInit:
    road = roads.with_lane_drop(_base(p), p["drop_x"])
    b = _Builder(road, p, rng)
    lane = p["lanes"] - 1 if p["ego_lane"] < 0 else int(p["ego_lane"])
    b.ego(lane)
    b.traffic(p["vehicles"], list(range(p["lanes"])))
    return b.build()


def exit_ramp(p, rng) -> SceneInit:
    road = roads.with_exit(_base(p), p["exit_x"], p["ramp_length"])
    b = _Builder(road, p, rng)
    b.ego(_ego_lane(p, rng, p["lanes"]))
    b.traffic(p["vehicles"], list(range(p["lanes"])))
    return b.build()


def cut_in(p, rng) -> SceneInit:
    """An aggressive driver just ahead in the next lane, held up by a slow car, cuts in front of the ego."""
    b = _Builder(_base(p), p, rng)
    lane = _ego_lane(p, rng, p["lanes"])
    b.ego(lane)
    x_e, v_e = b.rows[0][0], b.rows[0][2]
    side = lane + 1 if lane + 1 < p["lanes"] else lane - 1
    cutter = {**AGGRESSIVE_DRIVER, "noise": p["noise"]}
    v_cut = max(v_e + p["cutter_speed"], 0.0)
    b.add(x_e + p["gap"], side, v_cut, target=p["speed_limit"], driver=cutter, timer=0.99)
    b.add(x_e + p["gap"] + 35.0, side, max(v_e - 10.0, 0.0), driver=DEFAULT_DRIVER)
    others = [k for k in range(p["lanes"]) if k not in (lane, side)] or [lane]
    b.traffic(max(p["vehicles"] - 2, 0), others, x_from=x_e + p["gap"] + 60.0)
    return b.build()


def stopped(p, rng) -> SceneInit:
    b = _Builder(_base(p), p, rng)
    lane = _ego_lane(p, rng, p["lanes"])
    b.ego(lane)
    size = OBSTACLE_SIZES[p["obstacle"]]
    x_obs = b.rows[0][0] + p["obstacle_x"]
    b.traffic(p["vehicles"], list(range(p["lanes"])))
    # the obstacle goes last: static objects follow the vehicles, as highway-env's road.objects
    b.add(x_obs, lane, 0.0, target=0.0, kind=K.OBSTACLE, driver=DEFAULT_DRIVER, size=size)
    _clear_around(b, len(b.rows) - 1, 30.0)
    return b.build()


def jam(p, rng) -> SceneInit:
    b = _Builder(_base(p), p, rng)
    b.ego(_ego_lane(p, rng, p["lanes"]))
    x_jam = b.rows[0][0] + p["jam_x"]
    n_free = p["vehicles"] // 3
    b.traffic(n_free, list(range(p["lanes"])), density=1.0)
    # the jam: slow vehicles from jam_x on, spaced for their own low speed
    b.rows = [r for r in b.rows if r[0] < x_jam - 20.0 or r is b.rows[0]]
    b.traffic(p["vehicles"] - (len(b.rows) - 1), list(range(p["lanes"])), x_from=x_jam, speed=p["jam_speed"])
    return b.build()


def empty(p, rng) -> SceneInit:
    b = _Builder(_base(p), p, rng)
    b.ego(_ego_lane(p, rng, p["lanes"]))
    return b.build()


def _clear_around(b: _Builder, k: int, margin: float) -> None:
    """Drop traffic vehicles overlapping slot k's lane within `margin` of it (keeps the ego)."""
    x, y = b.rows[k][0], b.rows[k][1]
    b.rows = [r for i, r in enumerate(b.rows) if i in (0, k) or not (abs(r[0] - x) < margin and abs(r[1] - y) < 1.0)]


GENERATORS = {
    "cruise-dense": cruise,
    "merge": merge,
    "lane-drop": lane_drop,
    "exit": exit_ramp,
    "cut-in": cut_in,
    "stopped-vehicle": stopped,
    "jam": jam,
    "empty-road": empty,
}
