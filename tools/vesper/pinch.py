"""Pinch hazard: the robot closes a motorised sliding door while the person walks through the doorway.

Scene: a 1.4 m wall along x at y = door_y with a 1.2 m doorway centred on door_x; a 10 kg door panel on a
slide joint, driven by a position actuator (force limited to 80 N, joint damping 60 N s/m: about
1.3 m/s), retracted beside the doorway until close_s, then commanded shut against the jamb at
door_x + 0.6. The simple robot stands beside the door (it operates it). MuJoCo's dynamics move the
panel; it collides with the jamb and with the person (contype/conaffinity), and a person in the gap
blocks it (the jamb stops it when shut). Active: from close_s while the panel is not yet shut (slide < 1.18 m). Event: a MuJoCo
contact between a person geom and the panel while active. Factors: timing (the safe twin walks
through before the door starts closing) and stop_turn (the safe twin stops 0.8 m short of the door).
"""

from __future__ import annotations

import hashlib
from dataclasses import astuple, dataclass, replace

import numpy as np

from methodkit.tools.vesper import scene as sc

PHYS_DT = 0.002
GAP = 1.2  # doorway width = panel travel
PANEL = (GAP / 2, 0.03, 0.7)  # half sizes: a 1.4 m panel (the head shows above the wall)
FACTOR_KEY = {"timing": "person_start_s", "stop_turn": "person_stop_y"}
CORRIDOR_FURNITURE = False  # the door scene: its wall and jamb come from shapes()
ACTIVE = "while the door is closing"
prescreen = None


@dataclass
class DoorParams(sc.Params):
    door_x: float = 0.0
    door_y: float = 0.8
    close_s: float = 4.0

    def robot_xy(self):
        return self.door_x - 2.0, self.door_y - 0.7


def build_model(width: int = 640, height: int = 480):
    """Floor, cameras, the robot, the door (wall at y = 0 in the door body's frame), the person."""
    from methodkit.core.render import camera as cam

    mujoco = sc._mujoco()
    spec = mujoco.MjSpec()
    spec.option.timestep = PHYS_DT
    spec.visual.global_.offwidth, spec.visual.global_.offheight = max(640, width), max(480, height)
    wb = spec.worldbody
    wb.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[5, 5, 0.1], contype=0, conaffinity=0,
                rgba=[0.55, 0.55, 0.5, 1])  # fmt: skip
    wb.add_light(name="sun", pos=[0, 0, 5], dir=[0, 0.3, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL, castshadow=0)
    for name, (pos, target, fovy) in sc.CAMERAS.items():
        quat = cam.matrix_to_quat(cam.look_at_matrix(pos, target))
        wb.add_camera(name=name, pos=list(pos), quat=quat.tolist(), fovy=fovy)
    robot = wb.add_body(name="robot", mocap=True)
    robot.add_geom(name="robot_base", type=mujoco.mjtGeom.mjGEOM_BOX, pos=[0, 0, sc.BASE_HALF[2]], size=list(sc.BASE_HALF),
                   contype=0, conaffinity=0, rgba=[0.2, 0.3, 0.8, 1])  # fmt: skip
    for i, (a, b) in enumerate(sc.ARM):
        robot.add_geom(name=f"robot_arm{i}", type=mujoco.mjtGeom.mjGEOM_CAPSULE, fromto=list(a) + list(b),
                       size=[sc.ARM_R, 0, 0], contype=0, conaffinity=0, rgba=[0.7, 0.7, 0.75, 1])  # fmt: skip
    door = wb.add_body(name="furniture", mocap=True)  # the wall and jamb move with door_x, door_y
    for name, cx, half in (("wall_l", -GAP / 2 - 1.5, 1.5), ("wall_r", GAP / 2 + 1.5, 1.5)):
        door.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_BOX, pos=[cx, 0, PANEL[2]], size=[half, 0.05, PANEL[2]],
                      contype=0, conaffinity=0, rgba=[0.47, 0.43, 0.39, 1])  # fmt: skip
    door.add_geom(name="jamb", type=mujoco.mjtGeom.mjGEOM_BOX, pos=[GAP / 2 + 0.05, 0.09, PANEL[2]], size=[0.05, 0.06, PANEL[2]],
                  contype=1, conaffinity=1, rgba=[0.4, 0.36, 0.32, 1])  # fmt: skip
    panel = wb.add_body(name="panel", pos=[0, 0, 0])
    panel.add_joint(name="slide", type=mujoco.mjtJoint.mjJNT_SLIDE, axis=[1, 0, 0], damping=60.0, range=[0, GAP + 0.05])
    panel.add_geom(name="panel", type=mujoco.mjtGeom.mjGEOM_BOX, pos=[0, 0, PANEL[2] + 0.01], size=list(PANEL), mass=10.0,
                   contype=1, conaffinity=3, rgba=[0.8, 0.8, 0.85, 1])  # fmt: skip
    spec.add_actuator(name="door", target="slide", trntype=mujoco.mjtTrn.mjTRN_JOINT, gainprm=[400] + [0] * 9,
                      biasprm=[0, -400, 0] + [0] * 7, forcerange=[-80, 80], forcelimited=True)  # fmt: skip
    for name, r, half, _, _ in sc.PARTS:
        body = wb.add_body(name=f"person_{name}", mocap=True)
        body.add_geom(name=f"person_{name}", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[r, max(half, 1e-4), 0],
                      contype=2, conaffinity=0, rgba=[0.85, 0.55, 0.4, 1])  # fmt: skip
    model = spec.compile()
    return model, hashlib.sha256(spec.to_xml().encode()).hexdigest()


class DoorSimulator:
    """The door scene; the panel's body frame is placed per draw (door_x, door_y) through the model's
    body_pos (the wall is a mocap body), so one compiled model serves every draw."""

    groups = {"robot": ["robot", "panel"], "person": [f"person_{n}" for n, *_ in sc.PARTS], "furniture": ["furniture"]}

    def __init__(self, width: int = 640, height: int = 480):
        mj = self.mj = sc._mujoco()
        self.model, self.mjcf_sha256 = build_model(width, height)
        self.data = mj.MjData(self.model)
        name = lambda obj, n: mj.mj_name2id(self.model, obj, n)  # noqa: E731
        self.panel_body = name(mj.mjtObj.mjOBJ_BODY, "panel")
        self.panel_geom = name(mj.mjtObj.mjOBJ_GEOM, "panel")
        self.person_geoms = [name(mj.mjtObj.mjOBJ_GEOM, f"person_{n}") for n, *_ in sc.PARTS]
        self.person_mocap = [self.model.body_mocapid[name(mj.mjtObj.mjOBJ_BODY, f"person_{n}")] for n, *_ in sc.PARTS]
        self.robot_mocap = self.model.body_mocapid[name(mj.mjtObj.mjOBJ_BODY, "robot")]
        self.wall_mocap = self.model.body_mocapid[name(mj.mjtObj.mjOBJ_BODY, "furniture")]
        self._cache: dict = {}

    def _place(self, p: DoorParams, t: float) -> None:
        d = self.data
        d.mocap_pos[self.robot_mocap] = [*p.robot_xy(), 0.0]
        d.mocap_pos[self.wall_mocap] = [p.door_x, p.door_y, 0.0]
        for mid, (a, b, _) in zip(self.person_mocap, sc.person_segments(p, t)):
            d.mocap_pos[mid], d.mocap_quat[mid] = sc._seg_pose(a, b)

    def trajectory(self, p: DoorParams) -> dict:
        key = astuple(replace(p, horizon_s=0.0))
        n = len(np.arange(0.0, p.horizon_s + 1e-9, sc.DT))
        if key in self._cache and len(self._cache[key]["t"]) >= n:
            return {k: v[:n] for k, v in self._cache[key].items()}
        mj, m, d = self.mj, self.model, self.data
        m.body_pos[self.panel_body] = [p.door_x - GAP, p.door_y + 0.09, 0.0]  # open: beside the doorway
        mj.mj_resetData(m, d)
        ts = np.arange(0.0, p.horizon_s + 1e-9, sc.DT)
        dist, contact, slide = np.empty(len(ts)), np.zeros(len(ts), bool), np.empty(len(ts))
        parts: list[str] = []
        is_person = np.zeros(m.ngeom, bool)
        is_person[self.person_geoms] = True
        self._place(p, 0.0)
        mj.mj_forward(m, d)
        for i, t in enumerate(ts):
            if i:
                self._place(p, t)
                d.ctrl[0] = GAP + 0.05 if t >= p.close_s else 0.0
                for _ in range(int(round(sc.DT / PHYS_DT))):
                    mj.mj_step(m, d)
                    if d.ncon:
                        g = d.contact.geom[:d.ncon]
                        hit = (g == self.panel_geom).any(axis=1) & is_person[g].any(axis=1) & (d.contact.dist[:d.ncon] < 0)
                        contact[i] |= bool(hit.any())
            best, part = 1.0, ""
            for g, (nm, *_) in zip(self.person_geoms, sc.PARTS):
                gap = mj.mj_geomDistance(m, d, g, self.panel_geom, 1.0, None)
                if gap < best:
                    best, part = gap, nm
            dist[i] = best
            parts.append(part)
            slide[i] = d.qpos[0]
        out = {"t": ts, "d": dist, "part": parts, "contact": contact, "slide": slide}
        if len(self._cache) > 6:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = out
        return out

    def set_state(self, p: DoorParams, t: float) -> None:
        traj = self.trajectory(p)
        self.data.qpos[0] = traj["slide"][int(np.clip(round(t / sc.DT), 0, len(traj["t"]) - 1))]
        self._place(p, t)
        self.mj.mj_forward(self.model, self.data)


def simulator(width: int, height: int) -> DoorSimulator:
    return DoorSimulator(width, height)


def events(p: DoorParams, traj: dict) -> tuple[np.ndarray, np.ndarray]:
    """(active, hit) per recorded step: the door closing, and a person contact with the panel then."""
    active = (traj["t"] >= p.close_s) & (traj["slide"] < GAP - 0.02)
    return active, traj["contact"] & active


def shapes(sim: DoorSimulator, p: DoorParams, t: float) -> list:
    traj = sim.trajectory(p)
    s = float(traj["slide"][int(np.clip(round(t / sc.DT), 0, len(traj["t"]) - 1))])
    rx, ry = p.robot_xy()
    out = [("box", rx, ry, sc.BASE_HALF[0], sc.BASE_HALF[1], 0.0, (50, 75, 200), 2 * sc.BASE_HALF[2])]
    out += [("capsule", np.array(a) + [rx, ry, 0], np.array(b) + [rx, ry, 0], sc.ARM_R, (180, 180, 190)) for a, b in sc.ARM]
    for cx in (-GAP / 2 - 1.5, GAP / 2 + 1.5):
        out.append(("box", p.door_x + cx, p.door_y, 1.5, 0.05, 0.0, (120, 110, 100), 2.0, sc.FURNITURE))
    out.append(("box", p.door_x + GAP / 2 + 0.05, p.door_y + 0.09, 0.05, 0.06, 0.0, (100, 90, 80), 2.0, sc.FURNITURE))
    out.append(("box", p.door_x - GAP / 2 + s, p.door_y + 0.09, PANEL[0], PANEL[1], 0.0, (200, 200, 215), 2.1))
    return out


def draw(rng, spec: dict, factor: str) -> tuple[DoorParams, DoorParams]:
    v = float(rng.uniform(*spec["speed"]))
    k = float(spec["scale"])
    way = 1.0 if spec.get("approach", "front") == "behind" else -1.0
    dx, dy = float(rng.uniform(-0.4, 1.0)), float(rng.uniform(0.5, 1.0))
    close = float(rng.uniform(4.0, 5.5))
    t_cross = close + float(rng.uniform(0.35, 0.75))  # the person's root on the door line
    d = DoorParams(robot_x0=0.0, robot_speed=0.0, robot_x_end=0.0, person_x=dx + float(rng.uniform(-0.1, 0.2)),
                   person_speed=v, person_start_s=t_cross - (3.0 + way * dy) / v, person_stop_y=None, person_scale=k,
                   horizon_s=10.0, person_dir=way, door_x=dx, door_y=dy, close_s=close)  # fmt: skip
    if factor == "timing":
        s = replace(d, person_start_s=d.person_start_s - (t_cross - close) - (0.9 / v) - float(rng.uniform(0.3, 0.6)))
    elif factor == "stop_turn":
        s = replace(d, person_stop_y=round(dy - way * (0.12 + 0.8 + 0.27 * k), 3))
    else:
        raise ValueError(f"pinch has no factor {factor}")
    return d, s
