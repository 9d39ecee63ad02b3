"""Collision hazard: the robot's moving base and arm (scene.py's corridor scene, kinematic robot).

Active: while the base is moving. Event: person-robot distance (mj_geomDistance) under 1 cm while
active. Deciding factors: path_offset, timing, stop_turn.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from methodkit.tools.vesper import scene as sc
from methodkit.tools.vesper.scene import Params

CONTACT_M = 0.01
FACTOR_KEY = {"timing": "person_start_s", "stop_turn": "person_stop_y", "path_offset": "person_x"}
CORRIDOR_FURNITURE = True  # the corridor scene
prescreen = sc.prescreen_dmin


def simulator(width: int, height: int) -> sc.Simulator:
    return sc.Simulator(width, height)


def events(p: Params, traj: dict) -> tuple[np.ndarray, np.ndarray]:
    """(active, hit) per recorded step: the base moving, and contact (d < 1 cm) then."""
    active = np.asarray(traj["active"])
    return active, (traj["d"] < CONTACT_M) & active


def draw(rng, spec: dict, factor: str) -> tuple[Params, Params]:
    v = float(rng.uniform(*spec["speed"]))
    vr = float(rng.uniform(0.5, 0.8))
    t_cross = float(rng.uniform(3.8, 5.5))
    start = t_cross - 3.0 / v
    x0 = -2.4
    xp = x0 + vr * t_cross + float(rng.uniform(0.0, 0.35))
    way = 1.0 if spec.get("approach", "front") == "behind" else -1.0
    d = Params(robot_x0=x0, robot_speed=vr, robot_x_end=2.9, person_x=xp, person_speed=v, person_start_s=start,
               person_stop_y=None, person_scale=float(spec["scale"]), horizon_s=10.0, person_dir=way)  # fmt: skip
    if factor == "timing":
        late = max(0.0, (xp + 1.2 - x0) / vr + 0.8 / v - t_cross)
        s = replace(d, person_start_s=start + late + float(rng.uniform(0.2, 0.8)))
    elif factor == "stop_turn":
        s = replace(d, person_stop_y=-way * round(sc.BASE_HALF[1] + 0.8 + 0.15 * d.person_scale, 3))
    else:
        s = replace(d, person_x=float(d.robot_x(t_cross)) - sc.BASE_HALF[0] - 0.6 - 0.5)
    return d, s


def shapes(sim, p: Params, t: float) -> list:
    """Top-down primitives of the robot at t (for generate's 2d renderer)."""
    out = [("box", float(p.robot_x(t)), 0.0, sc.BASE_HALF[0], sc.BASE_HALF[1], 0.0, (50, 75, 200), 2 * sc.BASE_HALF[2])]
    return out + [("capsule", a, b, r, (180, 180, 190)) for a, b, r in sc.robot_segments(p, t)]
