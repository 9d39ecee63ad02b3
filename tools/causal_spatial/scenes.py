"""Scene pieces shared by the four tasks, as core.render spec objects (metres, degrees).

Every named object gets one of eight saturated colours, unique within its scene, so a question can
call it "the <colour> <shape>" and a perceiver can find it by hue. The scenery a question never
names (the car, the container, the wall) is unsaturated (black, white, grey), which is also how the
perceiver tells it apart from named objects.
"""

from __future__ import annotations

import math

import numpy as np

PALETTE = ("red", "green", "blue", "yellow", "orange", "purple", "cyan", "magenta")
SHAPES = ("box", "cylinder", "sphere", "vase")  # a vase is a standing capsule
SCENERY_COLOURS = ("black", "white", "grey")
DENSITY = 500.0  # kg/m^3, the default the COW proxy assumes too
FRICTION = 0.8

CAR_SPEED = 0.3  # m/s, kinematic
CAR_LENGTH, CAR_HALF_WIDTH = 0.16, 0.0525  # footprint incl. wheels (the swept-box prefilter uses these)
_WHEEL_R = 0.02


def rotate2(v, yaw_rad: float) -> np.ndarray:
    c, s = math.cos(yaw_rad), math.sin(yaw_rad)
    return np.array([c * v[0] - s * v[1], s * v[0] + c * v[1]])


def base_spec(size: int, camera: dict, *, shadows: bool = True) -> dict:
    """Floor with a grid (evenly spaced lines: the perspective cue), one directional light, sky, camera."""
    return {
        "timestep": 0.002,
        "floor": {"size": [6, 6], "colour": "grey", "texture": {"builtin": "grid", "repeat": [24, 24]}},
        "sky": True,
        "lights": [{"pos": [0.6, -0.8, 2.5], "dir": [-0.25, 0.35, -1.0], "directional": True, "diffuse": 0.6}],
        "objects": [],
        "cameras": [camera],
        "render": {"width": size, "height": size, "shadow_size": 512 if shadows else 0, "samples": 0},
    }


def camera(target, distance: float, elevation_deg: float, azimuth_deg: float) -> dict:
    """A camera looking at `target` from `distance`, `elevation_deg` above the horizon; azimuth 0 looks
    along +y (image right = world +x)."""
    e, a = math.radians(elevation_deg), math.radians(azimuth_deg)
    forward = np.array([math.sin(a), math.cos(a), 0.0])
    t = np.asarray(target, dtype=float)
    pos = t - distance * math.cos(e) * forward + np.array([0.0, 0.0, distance * math.sin(e)])
    return {"name": "cam", "pos": [float(x) for x in pos], "target": [float(x) for x in t], "fovy": 45.0}


def camera_left(cam: dict) -> np.ndarray:
    """The camera's left on the ground plane (unit vector, world x-y)."""
    f = np.asarray(cam["target"], dtype=float) - np.asarray(cam["pos"], dtype=float)
    right = np.array([f[1], -f[0]])
    return -right / np.linalg.norm(right)


def shape_object(name: str, shape: str, colour: str, dims: dict, pos, yaw_deg: float = 0.0) -> dict:
    """A free body: box (w, d, h), cylinder (r, h), sphere (r), vase (r, h: the capsule's full height)."""
    obj = {"name": name, "colour": colour, "pos": [float(p) for p in pos], "euler": [0, 0, float(yaw_deg)],
           "friction": FRICTION}  # fmt: skip
    if shape == "box":
        obj.update(type="box", size=[dims["w"], dims["d"], dims["h"]])
        volume = dims["w"] * dims["d"] * dims["h"]
    elif shape == "cylinder":
        obj.update(type="cylinder", radius=dims["r"], length=dims["h"])
        volume = math.pi * dims["r"] ** 2 * dims["h"]
    elif shape == "sphere":
        obj.update(type="sphere", radius=dims["r"])
        volume = 4 / 3 * math.pi * dims["r"] ** 3
    else:  # vase: capsule standing on its end
        straight = max(dims["h"] - 2 * dims["r"], 1e-3)
        obj.update(type="capsule", radius=dims["r"], length=straight)
        volume = math.pi * dims["r"] ** 2 * straight + 4 / 3 * math.pi * dims["r"] ** 3
    obj["mass"] = float(DENSITY * volume)
    return obj


def random_dims(rng: np.random.Generator, shape: str, scale: float = 1.0) -> dict:
    if shape == "box":
        w = rng.uniform(0.05, 0.09) * scale
        return {"w": w, "d": rng.uniform(0.05, 0.09) * scale, "h": rng.uniform(0.06, 0.11) * scale}
    if shape == "sphere":
        return {"r": rng.uniform(0.032, 0.045) * scale}
    r = rng.uniform(0.025, 0.04) * scale
    if shape == "vase":  # tall enough not to be a ball
        return {"r": r, "h": max(rng.uniform(0.07, 0.11) * scale, 2.6 * r)}
    return {"r": r, "h": rng.uniform(0.07, 0.11) * scale}


def height_of(shape: str, dims: dict) -> float:
    return 2 * dims["r"] if shape == "sphere" else dims["h"]


def footprint(shape: str, dims: dict) -> tuple[float, float, bool]:
    """(half-length, half-width, round) of the object's footprint on the floor."""
    if shape == "box":
        return dims["w"] / 2, dims["d"] / 2, False
    return dims["r"], dims["r"], True


def noun(shape: str) -> str:
    return {"box": "box", "cylinder": "cylinder", "sphere": "ball", "vase": "vase"}[shape]


def car_objects(start_xy, yaw_deg: float) -> list[dict]:
    """The toy car: a black chassis, four black cylinder wheels, two white front lights on top (the
    heading cue); local +x is forward. Heavy, because it is driven kinematically."""
    yaw = math.radians(yaw_deg)
    x0 = np.asarray(start_xy, dtype=float)

    def at(local, z):
        p = x0 + rotate2(local, yaw)
        return [float(p[0]), float(p[1]), z]

    parts = [{"name": "car", "type": "box", "size": [CAR_LENGTH, 0.08, 0.04], "pos": at((0, 0), 0.04),
              "colour": "black", "euler": [0, 0, yaw_deg], "mass": 20.0}]  # fmt: skip
    for i, (sx, sy) in enumerate(((1, 1), (1, -1), (-1, 1), (-1, -1))):
        parts.append({"name": f"car-wheel{i}", "type": "cylinder", "radius": _WHEEL_R, "length": 0.015,
                      "pos": at((sx * 0.05, sy * 0.045), _WHEEL_R), "euler": [90, 0, yaw_deg],
                      "colour": "black", "mass": 2.0})  # fmt: skip
    for i, sy in enumerate((1, -1)):
        parts.append({"name": f"car-light{i}", "type": "box", "size": [0.016, 0.022, 0.012],
                      "pos": at((0.066, sy * 0.022), 0.066), "euler": [0, 0, yaw_deg],
                      "colour": "white", "mass": 0.5})  # fmt: skip
    for p in parts:
        p["friction"] = FRICTION
    return parts


def container_objects(centre_xy, inner: float, height: float, wall: float = 0.012, prefix: str = "container",
                      colour: str = "white") -> list[dict]:  # fmt: skip
    """An open square box: a bottom and four walls, fixed. `inner` is the opening's width, `height`
    the inner depth above the bottom's top face."""
    cx, cy = (float(c) for c in centre_xy)
    outer = inner + 2 * wall
    z_wall = wall + height / 2
    parts = [{"name": f"{prefix}-bottom", "type": "box", "size": [outer, outer, wall], "pos": [cx, cy, wall / 2]}]
    off = inner / 2 + wall / 2
    parts += [
        {"name": f"{prefix}-wall0", "type": "box", "size": [wall, outer, height], "pos": [cx + off, cy, z_wall]},
        {"name": f"{prefix}-wall1", "type": "box", "size": [wall, outer, height], "pos": [cx - off, cy, z_wall]},
        {"name": f"{prefix}-wall2", "type": "box", "size": [inner, wall, height], "pos": [cx, cy + off, z_wall]},
        {"name": f"{prefix}-wall3", "type": "box", "size": [inner, wall, height], "pos": [cx, cy - off, z_wall]},
    ]
    for p in parts:
        p.update(fixed=True, colour=colour, friction=FRICTION)
    return parts


def mat_object(name: str, colour: str, centre_xy, length: float, width: float, yaw_deg: float) -> dict:
    return {"name": name, "type": "box", "size": [length, width, 0.004], "fixed": True, "colour": colour,
            "pos": [float(centre_xy[0]), float(centre_xy[1]), 0.002], "euler": [0, 0, yaw_deg],
            "friction": FRICTION}  # fmt: skip
