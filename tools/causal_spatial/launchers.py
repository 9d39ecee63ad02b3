"""The trajectory task's launchers and bouncing wall: ramps, restitution, and their ballistics.

A ramp is a fixed, frictionless plank (a thin box tilted by its pitch about its width axis, its foot
on the floor); a ball set on it with a speed up the slope slides up, leaves the top edge at the ramp's
pitch with the speed energy leaves it (v^2 = v0^2 - 2 g climb), and flies. A bouncing wall is a fixed,
frictionless box whose contacts have restitution e (physics.CONTACT_KEYS): a hit returns e of the
speed normal to the wall and keeps the speed along it. These drag-free predictions aim the layouts;
the answers come from simulating them (tasks.trajectory).
"""

from __future__ import annotations

import math

import numpy as np

from methodkit.core.render import gl

mujoco = gl.import_mujoco()

RAMP_THICKNESS = 0.012
RAMP_WIDTH = 0.12
WALL_THICKNESS, WALL_HEIGHT = 0.03, 0.26


def euler_xyz(R: np.ndarray) -> list[float]:
    """Degrees (x, y, z) of MuJoCo's intrinsic "xyz" sequence for rotation matrix R (= Rx Ry Rz)."""
    b = math.asin(max(-1.0, min(1.0, R[0, 2])))
    a = math.atan2(-R[1, 2], R[2, 2])
    c = math.atan2(-R[0, 1], R[0, 0])
    return [math.degrees(a), math.degrees(b), math.degrees(c)]


def rotation(euler_deg) -> np.ndarray:
    quat, mat = np.zeros(4), np.zeros(9)
    mujoco.mju_euler2Quat(quat, np.radians(np.asarray(euler_deg, dtype=float)), "xyz")
    mujoco.mju_quat2Mat(mat, quat)
    return mat.reshape(3, 3)


def ramp_frame(u, pitch_deg: float) -> np.ndarray:
    """Columns: the slope's upward direction, the width axis, the top face's normal."""
    a = math.radians(pitch_deg)
    up = np.array([math.cos(a) * u[0], math.cos(a) * u[1], math.sin(a)])
    n = np.array([-math.sin(a) * u[0], -math.sin(a) * u[1], math.cos(a)])
    return np.column_stack([up, np.cross(n, up), n])


def ramp_object(name: str, colour, edge_xy, u, length: float, pitch_deg: float, *,
                width: float = RAMP_WIDTH) -> dict:  # fmt: skip
    """A fixed frictionless plank rising along the ground direction `u`, its top face's upper edge
    above `edge_xy` at height length * sin(pitch)."""
    R = ramp_frame(u, pitch_deg)
    top_edge = np.array([edge_xy[0], edge_xy[1], length * math.sin(math.radians(pitch_deg))])
    centre = top_edge - R[:, 0] * length / 2 - R[:, 2] * RAMP_THICKNESS / 2
    return {"name": name, "type": "box", "size": [length, width, RAMP_THICKNESS], "fixed": True, "colour": colour,
            "pos": [float(x) for x in centre], "euler": euler_xyz(R), "slippery": True}  # fmt: skip


def ramp_pose(obj: dict) -> dict:
    """A ramp spec object's geometry: upslope unit vector, top-face normal, pitch, top-face centre and edge."""
    R = rotation(obj["euler"])
    axis, n = R[:, 0], R[:, 2]
    if n[2] < 0:
        n = -n
    up = axis if axis[2] >= 0 else -axis
    top = np.asarray(obj["pos"], dtype=float) + n * obj["size"][2] / 2
    return {"up": up, "normal": n, "pitch": math.degrees(math.asin(min(1.0, up[2]))), "top": top,
            "edge": top + up * obj["size"][0] / 2}  # fmt: skip


def seat_on_ramp(centre, radius: float, pose: dict) -> np.ndarray:
    """The ball's centre moved along the ramp's normal so that it just rests on the top face."""
    c = np.asarray(centre, dtype=float)
    return c - float(np.dot(c - pose["top"], pose["normal"])) * pose["normal"] + (radius + 5e-4) * pose["normal"]


def takeoff(v0: float, pitch_deg: float, climb: float, g: float) -> float | None:
    """Speed at the top edge after sliding frictionlessly up `climb` metres of height from speed v0."""
    v2 = v0 * v0 - 2 * g * climb
    return math.sqrt(v2) if v2 > 0 else None


def fall_time(z0: float, vz: float, z_land: float, g: float) -> float:
    return (vz + math.sqrt(max(vz * vz + 2 * g * (z0 - z_land), 0.0))) / g


def landing(s0: float, z0: float, speed: float, elevation_deg: float, z_land: float, g: float, *,
            wall_s: float | None = None, restitution: float = 0.0, wall_top: float = WALL_HEIGHT) -> dict:  # fmt: skip
    """Drag-free flight of a ball's centre along the throw line (s, z) from (s0, z0) until it comes down
    to z_land. With a wall whose face the centre meets at s = wall_s (radius already subtracted): a hit
    below `wall_top` reverses the normal speed times `restitution` and keeps the vertical one.
    Returns {"s": landing s, "hit_wall": bool, "z_wall": centre height at the hit or None}."""
    th = math.radians(elevation_deg)
    vx, vz = speed * math.cos(th), speed * math.sin(th)
    t_land = fall_time(z0, vz, z_land, g)
    s_free = s0 + vx * t_land
    if wall_s is None or s_free <= wall_s or vx <= 0:
        return {"s": s_free, "hit_wall": False, "z_wall": None}
    t_w = (wall_s - s0) / vx
    z_w = z0 + vz * t_w - g * t_w * t_w / 2
    if z_w > wall_top:
        return {"s": s_free, "hit_wall": False, "z_wall": z_w}
    t_back = fall_time(z_w, vz - g * t_w, z_land, g)
    return {"s": wall_s - restitution * vx * t_back, "hit_wall": True, "z_wall": z_w}


def fit_ramp(points: np.ndarray, name: str, colour) -> dict | None:
    """A ramp spec object from an instance's world points when they lie on a plane tilted 8-60 degrees
    from the floor (the plank's top face dominates the view), else None. Its pose: the plane's normal
    (least principal axis), upslope against the normal's ground direction, extents from the points'
    spread along the slope and across it."""
    if len(points) < 30:
        return None
    centre = points.mean(axis=0)
    _, sv, vt = np.linalg.svd(points - centre, full_matrices=False)
    n = vt[2] if vt[2][2] >= 0 else -vt[2]
    tilt = math.degrees(math.acos(min(1.0, float(n[2]))))
    if not 8.0 < tilt < 60.0 or sv[2] / math.sqrt(len(points)) > 0.006:
        return None
    g = -n[:2] / np.linalg.norm(n[:2])
    R = ramp_frame(g, tilt)
    along, across = (points - centre) @ R[:, 0], (points - centre) @ R[:, 1]
    mid = centre + R[:, 0] * (along.max() + along.min()) / 2 + R[:, 1] * (across.max() + across.min()) / 2
    size = [float(np.ptp(along)), float(np.ptp(across)), RAMP_THICKNESS]
    return {"name": name, "type": "box", "size": size, "fixed": True, "colour": colour, "slippery": True,
            "pos": [float(x) for x in mid - R[:, 2] * RAMP_THICKNESS / 2], "euler": euler_xyz(R)}  # fmt: skip
