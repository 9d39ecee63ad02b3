"""Falling-load hazard: the robot holds a box over the walkway at shelf height and lets go of it.

Scene: load.py with the arm tip at 2.3 m (the box's underside 2.04 m up, 0.33 m over an adult's head).
At drop_s the weld is released and the box falls under gravity. Active: the box is airborne (released,
centre above LOAD_HALF + 0.03 m). Event: a MuJoCo contact between a person geom and the box while it
falls (it lands on the head or shoulders). Deciding factors: timing (the person passes under before
the release, the box falls behind them) and path_offset (the line passes 0.6 m clear of the box).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from methodkit.tools.vesper import load
from methodkit.tools.vesper.load import LOAD_HALF, LoadParams, shapes  # noqa: F401 (the hazard interface)

prescreen = None
TIP_Z = 2.3
FACTOR_KEY = {"timing": "person_start_s", "path_offset": "person_x"}
CORRIDOR_FURNITURE = True  # load.py builds on the corridor scene
ACTIVE = "while the released box is in the air"
HEAD_TOP = 1.71  # adult (scale 1) head top, metres


def simulator(width: int, height: int) -> load.LoadSimulator:
    return load.LoadSimulator(TIP_Z, width, height)


def events(p: LoadParams, traj: dict) -> tuple[np.ndarray, np.ndarray]:
    """(active, hit) per recorded step: the box in the air, and a person contact with it then."""
    active = p.released(traj["t"]) & (traj["load_qpos"][:, 2] > LOAD_HALF + 0.03)
    return active, traj["contact"] & active


def draw(rng, spec: dict, factor: str) -> tuple[LoadParams, LoadParams]:
    v = float(rng.uniform(*spec["speed"]))
    k = float(spec["scale"])
    way = 1.0 if spec.get("approach", "front") == "behind" else -1.0
    rx, ry = float(rng.uniform(-1.3, 0.1)), float(rng.uniform(0.4, 0.9))
    drop = float(rng.uniform(4.0, 5.5))
    bottom = load.grip_offset(TIP_Z)[2] - LOAD_HALF
    t_under = drop + float(np.sqrt(2 * (bottom - HEAD_TOP * k) / 9.81)) + float(rng.uniform(-0.08, 0.08))
    start = t_under - (3.0 + way * ry) / v
    d = LoadParams(robot_x0=rx, robot_speed=0.0, robot_x_end=rx, person_x=rx + load.TIP_X + float(rng.uniform(-0.06, 0.06)),
                   person_speed=v, person_start_s=start, person_stop_y=None, person_scale=k, horizon_s=10.0,
                   person_dir=way, robot_y=ry, tip_z=TIP_Z, drop_s=drop, move_s=99.0)  # fmt: skip
    if factor == "timing":
        early = (t_under - drop) + (LOAD_HALF + 0.15 * k + 0.25 + 0.35) / v + float(rng.uniform(0.2, 0.5))
        s = replace(d, person_start_s=start - early)
    elif factor == "path_offset":
        s = replace(d, person_x=rx + load.TIP_X + LOAD_HALF + 0.6 + 0.15 * k + 0.15)
    else:
        raise ValueError(f"falling_load has no factor {factor}")
    return d, s
