"""How much of an object the camera sees: from instance-segmentation renders and from ray casts.

Visible fraction v = (what of T is seen in the scene) / (what of T would be seen with every other
object moved out of view), so T's own back faces never count as hidden. Two independent readings:
- segmentation: pixels of T in the scene / pixels of T rendered alone;
- rays (mj_multiRay): of `n` points sampled on T's surface, those whose ray from the camera first
  meets T at that point / those whose ray meets T's own surface there when T is alone (mju_rayGeom).
"""

from __future__ import annotations

import math

import numpy as np

from methodkit.core.render import camera as _camera
from methodkit.core.render import gl

mujoco = gl.import_mujoco()

HIDDEN, VISIBLE = 0.1, 0.5  # v < 0.1 hidden, v > 0.5 visible, in between ambiguous (rejected)
_AWAY = np.array([50.0, 50.0, -5.0])  # below the floor, far off: out of every view


def classify(v: float) -> str:
    return "hidden" if v < HIDDEN else "visible" if v > VISIBLE else "ambiguous"


def _surface_points(model, geom: int, data, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` points on a box / sphere / cylinder / capsule geom's surface, world frame (area-uniform for
    boxes and spheres; side and caps by area for cylinders)."""
    gtype, size = int(model.geom_type[geom]), model.geom_size[geom]
    if gtype == mujoco.mjtGeom.mjGEOM_BOX:
        a, b, c = size
        areas = np.array([b * c, b * c, a * c, a * c, a * b, a * b])
        face = rng.choice(6, size=n, p=areas / areas.sum())
        p = rng.uniform(-1, 1, size=(n, 3)) * size
        axis = face // 2
        sign = np.where(face % 2 == 0, 1.0, -1.0)
        p[np.arange(n), axis] = sign * size[axis]
    elif gtype == mujoco.mjtGeom.mjGEOM_SPHERE:
        p = rng.normal(size=(n, 3))
        p *= size[0] / np.linalg.norm(p, axis=1, keepdims=True)
    else:  # cylinder or capsule: side over the straight part, caps (flat or round) at the ends
        r, half = size[0], size[1]
        side = 2 * math.pi * r * 2 * half
        caps = 2 * math.pi * r * r * (2 if gtype == mujoco.mjtGeom.mjGEOM_CAPSULE else 0.5)
        on_side = rng.uniform(size=n) < side / (side + caps)
        ang = rng.uniform(0, 2 * math.pi, size=n)
        p = np.zeros((n, 3))
        p[:, 0], p[:, 1] = r * np.cos(ang), r * np.sin(ang)
        p[:, 2] = rng.uniform(-half, half, size=n)
        k = ~on_side
        top = np.where(rng.uniform(size=n) < 0.5, 1.0, -1.0)
        if gtype == mujoco.mjtGeom.mjGEOM_CAPSULE:
            u = rng.normal(size=(n, 3))
            u /= np.linalg.norm(u, axis=1, keepdims=True)
            u[:, 2] = np.abs(u[:, 2]) * top
            p[k] = u[k] * r + np.c_[np.zeros(n), np.zeros(n), top * half][k]
        else:
            rad = r * np.sqrt(rng.uniform(size=n))
            p[k, 0], p[k, 1] = rad[k] * np.cos(ang[k]), rad[k] * np.sin(ang[k])
            p[k, 2] = top[k] * half
    rot = data.geom_xmat[geom].reshape(3, 3)
    return p @ rot.T + data.geom_xpos[geom]


def ray_fraction(scene, data, name: str, cam_pos, K, T, width: int, height: int, *, n: int = 200, seed: int = 0) -> float:
    """Visible fraction of object `name` from `cam_pos` by ray casts to `n` surface samples."""
    model = scene.model
    body = scene.objects[name].body_id
    geoms = [g for g in range(model.ngeom) if model.geom_bodyid[g] == body]
    rng = np.random.default_rng(seed)
    pts = np.concatenate([_surface_points(model, g, data, n // len(geoms), rng) for g in geoms])
    own = np.repeat(geoms, n // len(geoms))
    cam = np.asarray(cam_pos, dtype=float)
    vec = pts - cam
    dist_to = np.linalg.norm(vec, axis=1)
    vec /= dist_to[:, None]
    uv, z = _camera.project(K, T, pts)
    in_view = (z > 0) & (uv[:, 0] >= -0.5) & (uv[:, 0] <= width - 0.5) & (uv[:, 1] >= -0.5) & (uv[:, 1] <= height - 0.5)
    alone = np.zeros(len(pts), dtype=bool)
    for i, g in enumerate(own):
        d = mujoco.mju_rayGeom(data.geom_xpos[g], data.geom_xmat[g], model.geom_size[g], cam, vec[i],
                               int(model.geom_type[g]))  # fmt: skip
        alone[i] = d >= 0 and abs(d - dist_to[i]) < 2e-3
    geomid = np.zeros(len(pts), dtype=np.int32)
    dist = np.zeros(len(pts))
    mujoco.mj_multiRay(model, data, cam, vec.ravel(), None, 1, -1, geomid, dist, None, len(pts), 1e3)
    seen = np.isin(geomid, geoms) & (np.abs(dist - dist_to) < 2e-3)
    denom = int((alone & in_view).sum())
    return float((seen & alone & in_view).sum() / denom) if denom else 0.0


def seg_fraction(renderer, scene, data, name: str, movable: list[str]) -> tuple[float, int]:
    """(visible fraction, visible pixels) of `name` from segmentation renders: in the scene, and with
    every other movable object moved out of view (their poses restored afterwards)."""
    body = scene.objects[name].body_id
    seen = int((renderer.render(scene, data, "cam", depth=False).segmentation == body).sum())
    saved = data.qpos.copy()
    for other in movable:
        if other != name and scene.objects[other].free_qpos is not None:
            adr = scene.objects[other].free_qpos
            data.qpos[adr : adr + 3] = _AWAY
    mujoco.mj_forward(scene.model, data)
    alone = int((renderer.render(scene, data, "cam", depth=False).segmentation == body).sum())
    data.qpos[:] = saved
    mujoco.mj_forward(scene.model, data)
    return (seen / alone if alone else 0.0), seen
