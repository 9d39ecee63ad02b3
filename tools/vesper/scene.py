"""The simple-robot corridor scene composed with MjSpec, its kinematic person, and ground truth.

World frame: metres, z up. The robot (a base box and a 3-link capsule arm, one mocap body) drives along
+x on y = 0; the person (capsule torso, head, arms, legs: one mocap body per part, parametric gait) walks
along -y from y = 3. Both are kinematic: poses are set through mocap_pos/mocap_quat, then mj_forward;
the distances come from mujoco.mj_geomDistance between every person geom and every robot (hazard) geom.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

BASE_HALF = (0.30, 0.25, 0.20)
ARM = (((0.0, 0.0, 0.40), (0.0, 0.0, 0.80)), ((0.0, 0.0, 0.80), (0.30, 0.0, 0.90)), ((0.30, 0.0, 0.90), (0.55, 0.0, 0.85)))
ARM_R = 0.05
# person parts: name, radius, half length, local fromto of the rest pose (scaled for a child)
PARTS = (
    ("torso", 0.15, 0.25, (0.0, 0.0, 0.90), (0.0, 0.0, 1.40)),
    ("head", 0.11, 0.0, (0.0, 0.0, 1.60), (0.0, 0.0, 1.60)),
    ("leg_l", 0.07, 0.41, (0.0, 0.10, 0.90), (0.0, 0.10, 0.08)),
    ("leg_r", 0.07, 0.41, (0.0, -0.10, 0.90), (0.0, -0.10, 0.08)),
    ("arm_l", 0.05, 0.30, (0.0, 0.22, 1.38), (0.0, 0.22, 0.78)),
    ("arm_r", 0.05, 0.30, (0.0, -0.22, 1.38), (0.0, -0.22, 0.78)),
)
DT = 0.01


@dataclass
class Params:
    """One scenario: every key that decides what happens (a twin differs in exactly one)."""

    robot_x0: float
    robot_speed: float
    robot_x_end: float
    person_x: float
    person_speed: float
    person_start_s: float
    person_stop_y: float | None
    person_scale: float
    horizon_s: float
    person_dir: float = -1.0  # -1: walks along -y from y = 3 (far side); +1: along +y from y = -3 (camera side)

    def robot_x(self, t):
        return np.minimum(self.robot_x0 + self.robot_speed * np.asarray(t, dtype=float), self.robot_x_end)

    def robot_moving(self, t):
        return self.robot_x0 + self.robot_speed * np.asarray(t, dtype=float) < self.robot_x_end

    def person_y(self, t):
        walked = self.person_speed * np.clip(np.asarray(t, dtype=float) - self.person_start_s, 0.0, None)
        y = -3.0 * self.person_dir + self.person_dir * walked
        if self.person_stop_y is not None:
            y = np.maximum(y, self.person_stop_y) if self.person_dir < 0 else np.minimum(y, self.person_stop_y)
        return y

    def person_walking(self, t):
        t = np.asarray(t, dtype=float)
        walking = t >= self.person_start_s
        if self.person_stop_y is not None:
            walking &= self.person_dir * (self.person_stop_y - self.person_y(t)) > 1e-9
        return walking


def _seg_pose(a, b):
    """Centre and quaternion of a capsule from a to b (its local z along b - a); plain floats (hot loop)."""
    ax, ay, az = float(a[0]), float(a[1]), float(a[2])
    dx, dy, dz = float(b[0]) - ax, float(b[1]) - ay, float(b[2]) - az
    mid = np.array([ax + dx / 2, ay + dy / 2, az + dz / 2])
    n = math.sqrt(dx * dx + dy * dy + dz * dz)
    if n < 1e-9:
        return mid, np.array([1.0, 0, 0, 0])
    zx, zy, c = dx / n, dy / n, dz / n
    s = math.hypot(zx, zy)  # |(0, 0, 1) x z|, the axis (-zy, zx, 0) / s
    if s < 1e-9:
        return mid, np.array([1.0, 0, 0, 0]) if c > 0 else np.array([0, 1.0, 0, 0])
    half = math.atan2(s, c) / 2
    k = math.sin(half) / s
    return mid, np.array([math.cos(half), -zy * k, zx * k, 0.0])


def person_segments(p: Params, t: float) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """World segments (a, b, radius) of the person's parts at time t: gait swings legs and arms in x-y."""
    k = p.person_scale
    y = float(p.person_y(t))
    walking = bool(p.person_walking(t))
    omega = 2 * np.pi * p.person_speed / (0.75 * k)
    phase = omega * (t - p.person_start_s) if walking else 0.0
    swing = 0.45 * np.sin(phase) if walking else 0.0
    out = []
    for name, r, _, a, b in PARTS:
        a = np.array(a) * k
        b = np.array(b) * k
        if name.startswith(("leg", "arm")):
            sgn = 1.0 if name.endswith("_l") else -1.0
            if name.startswith("arm"):
                sgn = -sgn  # opposite arm swing
            ang = sgn * swing
            length = np.linalg.norm(b - a)
            b = a + length * np.array([0.0, p.person_dir * np.sin(ang), -np.cos(ang)])  # leg forward along the walk
        origin = np.array([p.person_x, y, 0.0])
        out.append((a + origin, b + origin, r * k))
    return out


def robot_segments(p: Params, t: float) -> list[tuple[np.ndarray, np.ndarray, float]]:
    x = float(p.robot_x(t))
    return [(np.array(a) + [x, 0, 0], np.array(b) + [x, 0, 0], ARM_R) for a, b in ARM]


def robot_bounding_capsule(p: Params, t: float):
    """A capsule that contains the base box (for the capsule_dists pre-screen: never farther than the box)."""
    x = float(p.robot_x(t))
    hx, hy, hz = BASE_HALF
    return (np.array([x - hx, 0, hz]), np.array([x + hx, 0, hz]), float(np.hypot(hy, hz)))


# third-person viewpoints (position, target, vertical field of view in degrees) of the MuJoCo renderer
CAMERAS = {
    "side": ((0.2, -4.6, 2.3), (0.2, 1.0, 0.5), 60.0),
    "corner": ((-3.9, -3.6, 2.8), (0.4, 1.0, 0.4), 55.0),
}


def build_model(width: int = 640, height: int = 480):
    """The MjSpec composition: floor, a furniture body (wall, table), the robot body, one mocap body per
    person part, and the CAMERAS; the off-screen frame buffer holds at least width x height."""
    from methodkit.core.render import camera as cam

    mujoco = _mujoco()
    spec = mujoco.MjSpec()
    spec.option.timestep = DT
    spec.visual.global_.offwidth, spec.visual.global_.offheight = max(640, width), max(480, height)
    wb = spec.worldbody
    wb.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[5, 5, 0.1], contype=0, conaffinity=0,
                rgba=[0.55, 0.55, 0.5, 1])  # fmt: skip
    wb.add_light(name="sun", pos=[0, 0, 5], dir=[0, 0.3, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL, castshadow=0)
    furniture = wb.add_body(name="furniture")
    for name, pos, size, rgba in (("wall_n", (0, 4.2, 1.0), (4.5, 0.05, 1.0), (0.47, 0.43, 0.39, 1)),
                                  ("table", (2.6, 2.4, 0.4), (0.5, 0.4, 0.4), (0.59, 0.39, 0.24, 1))):  # fmt: skip
        furniture.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_BOX, pos=list(pos), size=list(size), rgba=list(rgba),
                           contype=0, conaffinity=0)  # fmt: skip
    for name, (pos, target, fovy) in CAMERAS.items():
        quat = cam.matrix_to_quat(cam.look_at_matrix(pos, target))
        wb.add_camera(name=name, pos=list(pos), quat=quat.tolist(), fovy=fovy)
    robot = wb.add_body(name="robot", mocap=True)
    robot.add_geom(name="robot_base", type=mujoco.mjtGeom.mjGEOM_BOX, pos=[0, 0, BASE_HALF[2]], size=list(BASE_HALF),
                   contype=0, conaffinity=0, rgba=[0.2, 0.3, 0.8, 1])  # fmt: skip
    for i, (a, b) in enumerate(ARM):
        robot.add_geom(name=f"robot_arm{i}", type=mujoco.mjtGeom.mjGEOM_CAPSULE, fromto=list(a) + list(b),
                       size=[ARM_R, 0, 0], contype=0, conaffinity=0, rgba=[0.7, 0.7, 0.75, 1])  # fmt: skip
    for name, r, half, _, _ in PARTS:
        body = wb.add_body(name=f"person_{name}", mocap=True)
        body.add_geom(name=f"person_{name}", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[r, max(half, 1e-4), 0],
                      contype=0, conaffinity=0, rgba=[0.85, 0.55, 0.4, 1])  # fmt: skip
    model = spec.compile()
    xml = spec.to_xml()
    return model, hashlib.sha256(xml.encode()).hexdigest()


def _mujoco():
    from methodkit.core.render import gl

    return gl.import_mujoco()  # a headless GL backend chosen before mujoco loads (egl unless --gl/MUJOCO_GL say)


class Simulator:
    """Holds the compiled model; distances(params) runs the kinematic horizon and returns d(t)."""

    def __init__(self, width: int = 640, height: int = 480):
        mujoco = _mujoco()
        self.mj = mujoco
        self.model, self.mjcf_sha256 = build_model(width, height)
        self.person_geoms = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, f"person_{n}") for n, *_ in PARTS]
        self.robot_geoms = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, "robot_base")]
        self.robot_geoms += [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, f"robot_arm{i}") for i in range(3)]
        self.person_mocap = [self.model.body_mocapid[mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, f"person_{n}")]
                             for n, *_ in PARTS]  # fmt: skip
        self.robot_mocap = self.model.body_mocapid[mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "robot")]
        self.data = mujoco.MjData(self.model)

    def set_state(self, p: Params, t: float) -> None:
        d = self.data
        d.mocap_pos[self.robot_mocap] = [float(p.robot_x(t)), 0.0, 0.0]
        d.mocap_quat[self.robot_mocap] = [1, 0, 0, 0]
        for mid, (a, b, _) in zip(self.person_mocap, person_segments(p, t)):
            pos, quat = _seg_pose(a, b)
            d.mocap_pos[mid] = pos
            d.mocap_quat[mid] = quat
        self.mj.mj_forward(self.model, d)

    def distance(self, p: Params, t: float) -> tuple[float, str]:
        """min over person x hazard geoms of mj_geomDistance (distmax 1 m) at time t, and the person part."""
        self.set_state(p, t)
        best, part = 1.0, ""
        for pg, (name, *_) in zip(self.person_geoms, PARTS):
            for rg in self.robot_geoms:
                dist = self.mj.mj_geomDistance(self.model, self.data, pg, rg, 1.0, None)
                if dist < best:
                    best, part = dist, name
        return float(best), part

    def trajectory(self, p: Params) -> dict:
        ts = np.arange(0.0, p.horizon_s + 1e-9, DT)
        dist = np.empty(len(ts))
        parts = []
        for i, t in enumerate(ts):
            dist[i], part = self.distance(p, t)
            parts.append(part)
        return {"t": ts, "d": dist, "part": parts, "active": p.robot_moving(ts)}


def prescreen_dmin(p: Params) -> float:
    """Lower bound of the horizon's min person-robot distance from core.kernels.capsules (base as its
    bounding capsule): > 0.01 proves a draw cannot be dangerous before MuJoCo is asked."""
    from methodkit.core.kernels.capsules import capsule_dists

    ts = np.arange(0.0, p.horizon_s + 1e-9, DT)
    pc = np.array([[[*a, *b, r] for a, b, r in person_segments(p, t)] for t in ts])
    hc = np.array([[[*a, *b, r] for a, b, r in [robot_bounding_capsule(p, t), *robot_segments(p, t)]] for t in ts])
    return float(capsule_dists(pc, hc).min())


ROBOT, PERSON, FURNITURE = 0, 1, 2  # instance ids in sensors/<id>.npz (both renderers); -1 floor and background


class CameraRenderer:
    """The MuJoCo camera path: RGB, depth (metres) and instance ids of the simulated states through
    core.render's Renderer (one GL context for every clip); close() it when done."""

    def __init__(self, sim: Simulator, width: int, height: int):
        from methodkit.core.render.renderer import Renderer

        self.sim = sim
        self._wrapped = (None, None)
        self.codes = {"robot": ROBOT, "person": PERSON, "furniture": FURNITURE}
        self.renderer = Renderer(width, height)

    @property
    def scene(self):
        return self._scene(self.sim)

    def _scene(self, sim):
        """The wrapped model of sim (a hazard's simulator may carry `groups`: its hazard objects join 'robot')."""
        from methodkit.core.render.wrap import wrap

        if self._wrapped[0] is not sim.model:
            groups = getattr(sim, "groups", {"robot": ["robot"], "person": [f"person_{n}" for n, *_ in PARTS],
                                             "furniture": ["furniture"]})  # fmt: skip
            self._wrapped = (sim.model, wrap(sim.model, groups))
        return self._wrapped[1]

    def close(self) -> None:
        self.renderer.close()

    def clip(self, p: Params, times, camera: str, sim=None):
        """(rgb uint8 [N,H,W,3], ids int16 [N,H,W], depth float16 [N,H,W], K [3,3], T [N,4,4]) at `times`
        (of `sim`, default the simulator this renderer was made with)."""
        sim = sim or self.sim
        scene = self._scene(sim)
        rgbs, ids, depths, poses = [], [], [], []
        K = None
        for t in times:
            sim.set_state(p, float(t))
            f = self.renderer.render(scene, sim.data, camera)
            rgbs.append(f.rgb.copy())
            ids.append(scene.instance_ids(f.segmentation, self.codes))
            depths.append(f.depth.astype(np.float16))
            poses.append(f.T)
            K = f.K
        return np.stack(rgbs), np.stack(ids), np.stack(depths), K, np.stack(poses)
