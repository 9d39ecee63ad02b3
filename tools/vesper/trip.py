"""Trip hazard: the robot sets a box down in the walkway and drives off; the person walks into it.

Scene: load.py (tip at 0.85 m). The robot lets go of the box at drop_s (it falls about 0.5 m onto the
floor under MuJoCo's dynamics), then drives away along -x. Active: the box lies on the floor (centre
below LOAD_HALF + 0.03 m after release). Event: a MuJoCo contact between a person geom and the box
while it lies there (the foot that hits it kicks it). Deciding factors: path_offset (the person's
line passes 0.6 m clear of the box) and stop_turn (the person stops 0.8 m short of it).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from methodkit.tools.vesper import load
from methodkit.tools.vesper.load import LOAD_HALF, LoadParams, shapes  # noqa: F401 (the hazard interface)

prescreen = None
TIP_Z = 0.85
FACTOR_KEY = {"path_offset": "person_x", "stop_turn": "person_stop_y"}
CORRIDOR_FURNITURE = True  # load.py builds on the corridor scene
ACTIVE = "while the box lies on the floor of the walkway"


def simulator(width: int, height: int) -> load.LoadSimulator:
    return load.LoadSimulator(TIP_Z, width, height)


def events(p: LoadParams, traj: dict) -> tuple[np.ndarray, np.ndarray]:
    """(active, hit) per recorded step: the box on the floor, and a person contact with it then."""
    active = p.released(traj["t"]) & (traj["load_qpos"][:, 2] < LOAD_HALF + 0.03)
    return active, traj["contact"] & active


def draw(rng, spec: dict, factor: str) -> tuple[LoadParams, LoadParams]:
    v = float(rng.uniform(*spec["speed"]))
    k = float(spec["scale"])
    way = 1.0 if spec.get("approach", "front") == "behind" else -1.0
    rx, ry = float(rng.uniform(-1.3, 0.1)), float(rng.uniform(0.4, 0.9))
    drop = float(rng.uniform(0.3, 0.8))
    t_cross = float(rng.uniform(4.6, 6.2))  # the person's root reaches the box line
    start = t_cross - (3.0 + way * ry) / v
    d = LoadParams(robot_x0=rx, robot_speed=0.8, robot_x_end=rx - 1.5, person_x=rx + load.TIP_X + float(rng.uniform(-0.08, 0.08)),
                   person_speed=v, person_start_s=start, person_stop_y=None, person_scale=k, horizon_s=10.0,
                   person_dir=way, robot_y=ry, tip_z=TIP_Z, drop_s=drop, move_s=drop + 0.5)  # fmt: skip
    if factor == "stop_turn":
        s = replace(d, person_stop_y=round(ry - way * (LOAD_HALF + 0.8 + 0.27 * k), 3))
    elif factor == "path_offset":
        s = replace(d, person_x=rx + load.TIP_X + LOAD_HALF + 0.6 + 0.15 * k + 0.15)
    else:
        raise ValueError(f"trip has no factor {factor}")
    return d, s
