"""The released-load scene shared by the trip and falling-load hazards: real dynamics, real contacts.

A simple robot (mocap base box and capsule arm pointing +x, at (robot_x, robot_y)) holds a free box (the
load) under its arm tip through a weld equality; at drop_s the weld is deactivated and MuJoCo's dynamics
take over: the box falls under gravity, lands on the floor (contacts with the floor plane), may bounce or
tumble, and is pushed by whatever touches it. The person is the kinematic capsule person of scene.py (one
mocap body per part) with contacts enabled against the load only, so a foot that walks into the box kicks
it. The hazard event is a MuJoCo contact (data.contact, after mj_step) between a person geom and the load
while the hazard is active; which activity counts (airborne or resting) is the hazard module's rule.
After move_s the robot drives off along -x to robot_x_end (out of the walkway).
"""

from __future__ import annotations

import hashlib
from dataclasses import astuple, dataclass, replace

import numpy as np

from methodkit.tools.vesper import scene as sc

PHYS_DT = 0.002  # physics step; the trajectory is recorded every scene.DT (5 steps)
LOAD_HALF = 0.10
TIP_X = 0.55  # arm tip, robot frame


@dataclass
class LoadParams(sc.Params):
    """scene.Params plus where the robot stands, how high it holds the load and when it lets go."""

    robot_y: float = 0.6
    tip_z: float = 0.85
    drop_s: float = 0.5
    move_s: float = 99.0

    def robot_x(self, t):
        moved = self.robot_speed * np.clip(np.asarray(t, dtype=float) - self.move_s, 0.0, None)
        return np.maximum(self.robot_x0 - moved, self.robot_x_end)

    def robot_moving(self, t):
        t = np.asarray(t, dtype=float)
        return (t >= self.move_s) & (self.robot_x0 - self.robot_speed * (t - self.move_s) > self.robot_x_end)

    def released(self, t):
        return np.asarray(t, dtype=float) >= self.drop_s

    def load_hold(self):
        """Load centre while held: just below the arm tip."""
        return np.array([self.robot_x0, self.robot_y, 0.0]) + grip_offset(self.tip_z)


def grip_offset(tip_z: float) -> np.ndarray:
    """The held load's centre in the robot frame (the weld's relative pose)."""
    return np.array([TIP_X, 0.0, tip_z - 0.05 - LOAD_HALF - 0.01])


def arm(tip_z: float):
    """Arm segments in the robot frame: a mast to tip_z, then a link out to the tip over +x."""
    z = tip_z
    return (((0.0, 0.0, 0.40), (0.0, 0.0, z + 0.05)), ((0.0, 0.0, z + 0.05), (TIP_X, 0.0, z)))


def robot_segments(p: LoadParams, t: float):
    o = np.array([float(p.robot_x(t)), p.robot_y, 0.0])
    return [(np.array(a) + o, np.array(b) + o, sc.ARM_R) for a, b in arm(p.tip_z)]


def build_model(tip_z: float, width: int = 640, height: int = 480):
    """scene.py's floor, furniture and cameras, the robot of arm(tip_z), the free load, the weld, the person
    (one model per arm height: the robot and the person are mocap bodies, the load starts from qpos)."""
    from methodkit.core.render import camera as cam

    mujoco = sc._mujoco()
    spec = mujoco.MjSpec()
    spec.option.timestep = PHYS_DT
    spec.visual.global_.offwidth, spec.visual.global_.offheight = max(640, width), max(480, height)
    wb = spec.worldbody
    wb.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[5, 5, 0.1], contype=1, conaffinity=1,
                rgba=[0.55, 0.55, 0.5, 1])  # fmt: skip
    wb.add_light(name="sun", pos=[0, 0, 5], dir=[0, 0.3, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL, castshadow=0)
    furniture = wb.add_body(name="furniture")
    for name, pos, size, rgba in (("wall_n", (0, 4.2, 1.0), (4.5, 0.05, 1.0), (0.47, 0.43, 0.39, 1)),
                                  ("table", (2.6, 2.4, 0.4), (0.5, 0.4, 0.4), (0.59, 0.39, 0.24, 1))):  # fmt: skip
        furniture.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_BOX, pos=list(pos), size=list(size), rgba=list(rgba),
                           contype=0, conaffinity=0)  # fmt: skip
    for name, (pos, target, fovy) in sc.CAMERAS.items():
        quat = cam.matrix_to_quat(cam.look_at_matrix(pos, target))
        wb.add_camera(name=name, pos=list(pos), quat=quat.tolist(), fovy=fovy)
    robot = wb.add_body(name="robot", mocap=True)
    robot.add_geom(name="robot_base", type=mujoco.mjtGeom.mjGEOM_BOX, pos=[0, 0, sc.BASE_HALF[2]],
                   size=list(sc.BASE_HALF), contype=0, conaffinity=0, rgba=[0.2, 0.3, 0.8, 1])  # fmt: skip
    for i, (a, b) in enumerate(arm(tip_z)):
        robot.add_geom(name=f"robot_arm{i}", type=mujoco.mjtGeom.mjGEOM_CAPSULE, fromto=list(a) + list(b),
                       size=[sc.ARM_R, 0, 0], contype=0, conaffinity=0, rgba=[0.7, 0.7, 0.75, 1])  # fmt: skip
    hold = grip_offset(tip_z)
    load = wb.add_body(name="load", pos=hold.tolist())
    load.add_freejoint(name="load")
    load.add_geom(name="load", type=mujoco.mjtGeom.mjGEOM_BOX, size=[LOAD_HALF] * 3, mass=4.0, contype=1,
                  conaffinity=3, rgba=[0.85, 0.75, 0.2, 1])  # fmt: skip
    spec.add_equality(name="grip", type=mujoco.mjtEq.mjEQ_WELD, name1="load", name2="robot",
                      objtype=mujoco.mjtObj.mjOBJ_BODY, solref=[0.004, 1.0],
                      data=[0, 0, 0, *(-hold), 1, 0, 0, 0, 1, 0])  # fmt: skip
    for name, r, half, _, _ in sc.PARTS:
        body = wb.add_body(name=f"person_{name}", mocap=True)
        body.add_geom(name=f"person_{name}", type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[r, max(half, 1e-4), 0],
                      contype=2, conaffinity=0, rgba=[0.85, 0.55, 0.4, 1])  # fmt: skip
    model = spec.compile()
    return model, hashlib.sha256(spec.to_xml().encode()).hexdigest()


class LoadSimulator:
    """The load scene of one arm height (a LoadParams with another tip_z recompiles the model):
    trajectory(p) steps the dynamics over the horizon and records, every scene.DT, the person-load
    distance (mj_geomDistance, distmax 1 m), the person part nearest, the load pose and velocity, and
    whether MuJoCo reported a person-load contact; set_state(p, t) poses a recorded instant for rendering."""

    groups = {"robot": ["robot", "load"], "person": [f"person_{n}" for n, *_ in sc.PARTS], "furniture": ["furniture"]}

    def __init__(self, tip_z: float, width: int = 640, height: int = 480):
        self.mj = sc._mujoco()
        self.size = (width, height)
        self._key = None
        self._cache: dict = {}
        self._compile(LoadParams(0, 0, 0, 0, 1, 0, None, 1, 1, tip_z=tip_z))

    def _compile(self, p: LoadParams) -> None:
        if p.tip_z == self._key:
            return
        mj = self.mj
        self.model, self.mjcf_sha256 = build_model(p.tip_z, *self.size)
        self.data = mj.MjData(self.model)
        name = lambda obj, n: mj.mj_name2id(self.model, obj, n)  # noqa: E731
        self.load_geom = name(mj.mjtObj.mjOBJ_GEOM, "load")
        self.person_geoms = [name(mj.mjtObj.mjOBJ_GEOM, f"person_{n}") for n, *_ in sc.PARTS]
        self.person_mocap = [self.model.body_mocapid[name(mj.mjtObj.mjOBJ_BODY, f"person_{n}")] for n, *_ in sc.PARTS]
        self.robot_mocap = self.model.body_mocapid[name(mj.mjtObj.mjOBJ_BODY, "robot")]
        self.qadr = self.model.jnt_qposadr[name(mj.mjtObj.mjOBJ_JOINT, "load")]
        self.vadr = self.model.jnt_dofadr[name(mj.mjtObj.mjOBJ_JOINT, "load")]
        self._key = p.tip_z

    def _pose_kinematic(self, p: LoadParams, t: float) -> None:
        d = self.data
        d.mocap_pos[self.robot_mocap] = [float(p.robot_x(t)), p.robot_y, 0.0]
        d.mocap_quat[self.robot_mocap] = [1, 0, 0, 0]
        for mid, (a, b, _) in zip(self.person_mocap, sc.person_segments(p, t)):
            d.mocap_pos[mid], d.mocap_quat[mid] = sc._seg_pose(a, b)

    def trajectory(self, p: LoadParams) -> dict:
        key = astuple(replace(p, horizon_s=0.0))  # the same draw over a shorter horizon is a prefix of it
        n = len(np.arange(0.0, p.horizon_s + 1e-9, sc.DT))
        if key in self._cache and len(self._cache[key]["t"]) >= n:
            return {k: v[:n] for k, v in self._cache[key].items()}
        self._compile(p)
        mj, m, d = self.mj, self.model, self.data
        mj.mj_resetData(m, d)
        d.qpos[self.qadr:self.qadr + 3] = p.load_hold()
        d.qpos[self.qadr + 3:self.qadr + 7] = [1, 0, 0, 0]
        d.eq_active[0] = 1
        ts = np.arange(0.0, p.horizon_s + 1e-9, sc.DT)
        n = len(ts)
        dist, contact, qpos = np.empty(n), np.zeros(n, bool), np.empty((n, 7))
        vel = np.empty(n)
        parts: list[str] = []
        sub = int(round(sc.DT / PHYS_DT))
        is_person = np.zeros(m.ngeom, bool)
        is_person[self.person_geoms] = True
        self._pose_kinematic(p, 0.0)
        mj.mj_forward(m, d)
        for i, t in enumerate(ts):
            if i:
                self._pose_kinematic(p, t)  # mocap targets once per record step (1 cm of walking)
                for s in range(sub):
                    d.eq_active[0] = 0 if p.released(t - sc.DT + (s + 1) * PHYS_DT) else 1
                    mj.mj_step(m, d)
                    if d.ncon:
                        g = d.contact.geom[:d.ncon]
                        hit = ((g == self.load_geom).any(axis=1) & is_person[g].any(axis=1)
                               & (d.contact.dist[:d.ncon] < 0))  # fmt: skip
                        contact[i] |= bool(hit.any())
            best, part = 1.0, ""
            for g, (nm, *_) in zip(self.person_geoms, sc.PARTS):
                gap = mj.mj_geomDistance(m, d, g, self.load_geom, 1.0, None)
                if gap < best:
                    best, part = gap, nm
            dist[i] = best
            parts.append(part)
            qpos[i] = d.qpos[self.qadr:self.qadr + 7]
            vel[i] = float(np.linalg.norm(d.qvel[self.vadr:self.vadr + 3]))
        out = {"t": ts, "d": dist, "part": parts, "contact": contact, "load_qpos": qpos, "load_speed": vel}
        if len(self._cache) > 6:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = out
        return out

    def set_state(self, p: LoadParams, t: float) -> None:
        """The recorded instant nearest t (robot, person and the simulated load) through mj_forward."""
        traj = self.trajectory(p)
        i = int(np.clip(round(t / sc.DT), 0, len(traj["t"]) - 1))
        self._pose_kinematic(p, t)
        self.data.qpos[self.qadr:self.qadr + 7] = traj["load_qpos"][i]
        self.mj.mj_forward(self.model, self.data)

    def shapes(self, p: LoadParams, t: float) -> list:
        """Top-down primitives of the robot and the load at t (for generate's 2d renderer)."""
        traj = self.trajectory(p)
        q = traj["load_qpos"][int(np.clip(round(t / sc.DT), 0, len(traj["t"]) - 1))]
        w, x, y, z = q[3:]
        yaw = float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))
        rx = float(p.robot_x(t))
        out = [("box", rx, p.robot_y, sc.BASE_HALF[0], sc.BASE_HALF[1], 0.0, (50, 75, 200), 2 * sc.BASE_HALF[2])]
        out += [("capsule", a, b, r, (180, 180, 190)) for a, b, r in robot_segments(p, t)]
        out.append(("box", float(q[0]), float(q[1]), LOAD_HALF, LOAD_HALF, yaw, (215, 190, 50), float(q[2]) + LOAD_HALF))
        return out


def shapes(sim: LoadSimulator, p: LoadParams, t: float) -> list:
    return sim.shapes(p, t)
