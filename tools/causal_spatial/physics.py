"""Simulated facts behind every answer: kinematic drives, releases, launches, and what they touch.

Scenes are core.render specs compiled by core.render.build. A kinematic mover (the car, a translated
object) is a free body whose state is overwritten before every step with the commanded path, so
physics pushes what it meets but never the mover itself. Contacts count when they penetrate more
than `PENETRATION` (1 mm), the margin the issue sets between a touch and numerical noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.render import build, gl
from methodkit.core.render import spec as render_spec

mujoco = gl.import_mujoco()

PENETRATION = 0.001


# Contact keys this method adds to core.render's object spec (stripped before validation, applied to the
# object's geom after it): "restitution" e in (0, 1) makes a hit bounce back at e times the normal speed,
# "slippery" makes contacts frictionless; both take priority over the other geom's contact settings.
CONTACT_KEYS = ("restitution", "slippery")
BOUNCE_OMEGA = 150.0  # rad/s: the contact spring's natural frequency (0.3 of a step at the scenes' 2 ms)


def dampratio_for(e: float) -> float:
    """The damping ratio of a spring-dashpot contact that returns `e` of the normal speed. The contact
    cannot pull (MuJoCo's constraint force is >= 0), so it ends when spring and damper forces cancel,
    before the spring is back at rest: e(z) = exp(-z w t*) |cos(wd t*) - z/sqrt(1-z^2) sin(wd t*)| with
    tan(wd t*) = -2 z sqrt(1-z^2) / (1 - 2 z^2), solved for z by bisection."""
    if not 0.0 < e < 1.0:
        raise ValueError(f"restitution must be in (0, 1), got {e}")

    def rebound(z):
        s = math.sqrt(1 - z * z)
        phase = math.pi - math.atan2(2 * z * s, 1 - 2 * z * z)  # wd t*
        return math.exp(-z * phase / s) * abs(math.cos(phase) - z / s * math.sin(phase))

    lo, hi = 1e-6, 0.7
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if rebound(mid) > e else (lo, mid)
    return (lo + hi) / 2


def restitution_solref(e: float, omega: float = BOUNCE_OMEGA) -> list[float]:
    """MuJoCo solref (timeconst, dampratio) whose contact has natural frequency `omega` and returns e."""
    z = dampratio_for(e)
    return [1.0 / (omega * z), z]


def compile_spec(spec: dict, source: str = "scene"):
    extra, objects = {}, []
    for o in spec.get("objects", []):
        if any(k in o for k in CONTACT_KEYS):
            extra[o["name"]] = {k: o[k] for k in CONTACT_KEYS if k in o}
            o = {k: v for k, v in o.items() if k not in CONTACT_KEYS}
        objects.append(o)
    scene = build.build(render_spec.validate({**spec, "objects": objects}, source=source), seed=0)
    if extra:
        for name, ext in extra.items():
            geom = scene.mjspec.geom(name)
            geom.priority, geom.condim = 1, 1  # frictionless, and these settings win the contact
            if ext.get("restitution"):
                geom.solref = restitution_solref(float(ext["restitution"]))
        scene.model = scene.mjspec.compile()
    return scene


@dataclass
class Drive:
    """A kinematic motion: bodies `names` move by `velocity` (world, m/s) for `duration` seconds."""

    names: list[str]
    velocity: np.ndarray
    duration: float


@dataclass
class Events:
    """What a simulation produced: first contacts of the watched body with others (time, point),
    sampled positions of every object, and their final positions."""

    contacts: dict[str, dict] = field(default_factory=dict)  # other name -> {"t", "point"}
    times: list[float] = field(default_factory=list)
    positions: dict[str, list] = field(default_factory=dict)

    def final(self, name: str) -> np.ndarray:
        return np.asarray(self.positions[name][-1])


def _geom_owner(scene) -> np.ndarray:
    owner_of_body = scene.body_names()
    return np.array([owner_of_body.get(int(b), "world") for b in scene.model.geom_bodyid], dtype=object)


def run(scene, duration: float, *, watch: list[str], drive: Drive | None = None, sample_every: float = 0.05,
        on_sample=None, data=None, penetration: float = PENETRATION) -> Events:  # fmt: skip
    """Step `scene` for `duration` s; record first penetrating contacts between the `watch` group
    (one mover, possibly of several bodies, e.g. the car's parts) and anything else ("world" = floor)."""
    model = scene.model
    data = scene.new_data() if data is None else data
    owner = _geom_owner(scene)
    watched = set(watch)
    names = list(scene.objects)
    bodies = np.array([scene.objects[n].body_id for n in names])
    events = Events(positions={n: [] for n in names})
    if drive is not None:  # index arrays of the driven bodies' free-joint positions and velocities
        qadr = np.array([scene.objects[n].free_qpos for n in drive.names])
        vadr = np.array([scene.objects[n].free_qvel for n in drive.names])
        pos_idx = (qadr[:, None] + np.arange(3)).ravel()
        quat_idx = (qadr[:, None] + np.arange(3, 7)).ravel()
        lin_idx = (vadr[:, None] + np.arange(3)).ravel()
        all_v_idx = (vadr[:, None] + np.arange(6)).ravel()
        pos0, quat0 = data.qpos[pos_idx].copy(), data.qpos[quat_idx].copy()
        step_v = np.tile(drive.velocity, len(drive.names))
    dt = model.opt.timestep
    stride = max(1, round(sample_every / dt))
    n_steps = round(duration / dt)

    def sample():
        events.times.append(float(data.time))
        for i, n in enumerate(names):
            events.positions[n].append(data.xpos[bodies[i]].tolist())
        if on_sample is not None:
            on_sample(float(data.time), data)

    def set_drive():
        if drive is None:
            return
        t = min(data.time, drive.duration)
        data.qpos[pos_idx] = pos0 + step_v * t
        data.qpos[quat_idx] = quat0
        data.qvel[all_v_idx] = 0.0
        if data.time < drive.duration:
            data.qvel[lin_idx] = step_v

    set_drive()
    mujoco.mj_forward(model, data)
    sample()
    for step in range(1, n_steps + 1):
        set_drive()
        mujoco.mj_step(model, data)
        if data.ncon:
            con = data.contact
            for k in np.nonzero(con.dist < -penetration)[0]:
                a, b = owner[con.geom[k, 0]], owner[con.geom[k, 1]]
                if (a in watched) == (b in watched):
                    continue
                other = b if a in watched else a
                if other not in events.contacts:
                    events.contacts[other] = {"t": float(data.time), "point": [float(x) for x in con.pos[k]]}
        if step % stride == 0 or step == n_steps:
            sample()
    set_drive()
    mujoco.mj_forward(model, data)
    return events


def first_floor_contact(scene, duration: float, ball: str, *, ignore=(), data=None) -> dict | None:
    """The first touch of `ball` with anything not in `ignore` (mats, floor): {"other", "t", "point"}.
    Touches count without the penetration margin: a ball lands on a mat the moment it touches it."""
    model = scene.model
    data = scene.new_data() if data is None else data
    owner = _geom_owner(scene)
    for _ in range(round(duration / model.opt.timestep)):
        mujoco.mj_step(model, data)
        if not data.ncon:
            continue
        con = data.contact
        for k in np.nonzero(con.dist <= 0)[0]:
            a, b = owner[con.geom[k, 0]], owner[con.geom[k, 1]]
            other = b if a == ball else a
            if ball in (a, b) and a != b and other not in ignore:
                return {"other": other, "t": float(data.time), "point": [float(x) for x in con.pos[k]]}
    return None


def place(data, scene, name: str, pos) -> None:
    """Teleport a free body (kinematic translation; orientation kept)."""
    o = scene.objects[name]
    data.qpos[o.free_qpos : o.free_qpos + 3] = pos
    data.qvel[o.free_qvel : o.free_qvel + 6] = 0.0


def inside_box(point, centre_xy, inner: float, floor_z: float, rim_z: float, *, shrink: float = 0.002) -> bool:
    """COM inside the container's inner box, shrunk by `shrink`, and below its rim."""
    half = inner / 2 - shrink
    return bool(
        abs(point[0] - centre_xy[0]) < half and abs(point[1] - centre_xy[1]) < half and floor_z < point[2] < rim_z
    )


def wall_distance(point, centre_xy, inner: float) -> float:
    """Horizontal distance of a point to the nearest inner wall plane of a square container."""
    return float(min(abs(abs(point[0] - centre_xy[0]) - inner / 2), abs(abs(point[1] - centre_xy[1]) - inner / 2)))


def rollout_final(scenes: list, names: list[str], duration: float, *, threads: int = 1) -> list[np.ndarray]:
    """Final positions of `names[i]` in `scenes[i]` after `duration` s of free dynamics (nothing driven),
    all simulated in one `mujoco.rollout` call (threaded C, no Python per step). The position is the
    one `run` samples last (the state before the last step, which mj_step's kinematics report), so the
    screening gives the same answers as stepping each scene with `run`. Scenes whose models differ in
    size go in separate calls."""
    from mujoco import rollout

    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    n_steps = round(duration / scenes[0].model.opt.timestep)
    out: list = [None] * len(scenes)
    groups: dict = {}
    for i, sc in enumerate(scenes):
        m = sc.model
        groups.setdefault((m.nq, m.nv, m.na, m.nu, m.nbody, m.ngeom, m.nmocap, m.opt.timestep), []).append(i)
    for idx in groups.values():
        models = [scenes[i].model for i in idx]
        size = mujoco.mj_stateSize(models[0], spec)
        init = np.empty((len(idx), size))
        for row, i in enumerate(idx):
            data = scenes[i].new_data()
            mujoco.mj_getState(scenes[i].model, data, init[row], spec)
        datas = [mujoco.MjData(models[0]) for _ in range(max(1, min(threads, len(idx))))]
        warm = np.zeros((len(idx), models[0].nv))  # as a fresh MjData stepped by `run`
        state, _ = rollout.rollout(models, datas, init, nstep=n_steps, initial_warmstart=warm)
        for row, i in enumerate(idx):
            sc, data = scenes[i], datas[0]
            mujoco.mj_setState(sc.model, data, state[row, n_steps - 2] if n_steps > 1 else init[row], spec)
            o = sc.objects[names[i]]
            out[i] = np.array(data.qpos[o.free_qpos : o.free_qpos + 3])
    return out
