"""cow-reader --from-frames: the events re-derived from the COW frames' segmentation renders (seg.npz).

cow-simulate --segmentation writes, per frame, the instance ids (body ids of the proxy scene) and
depth, with K, T, the frame times and the id of every named object. From these alone (no simulator
state) the events the reader needs are read again:

- collision: an object is hit iff pixels it covered in frame 0 show the floor or the background in a
  later frame (it moved away; a static object can only be covered, never vacate its pixels; at least
  6 pixels and 5% of its area, settling moves an edge by a pixel) and the car's mask is within 2
  pixels and 6 cm of depth of it in that frame or the one before (a knock-on push by another object
  is no car contact);
- compatibility: inside iff, in the last frame, the median ground position of the object's visible
  top face (depth back-projected) lies in the cavity (L2: the cavity copy under the object's frame-0
  position) and its top is closer to the cavity floor plus its height than to the rim plus its height
  (the height is the z range of its points in the first frame that shows it, hanging in full view);
- occlusion: the visible fraction is the target's pixels in the last frame over those in frame 0;
- trajectory: the ball's centre per frame is its visible points' centroid pushed one radius away
  from the camera; before the first frame whose centre is within 2.5 radii of the ground, the
  ballistic arc (g known) through the last two airborne frames is followed down to one radius (with
  one airborne frame, the straight line to the low one; when the ball covered less than half its
  airborne pace on the way to the low frame, a wall stopped it and it came down there), and the mat
  is the one whose frame-0 points come nearest to that point (within 3 cm; else the floor). Sparse
  frames miss landings and bounces: use more.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from methodkit.core.errors import DataError
from methodkit.tools.causal_spatial import grammar
from methodkit.tools.causal_spatial.perceive import lift

GRAVITY = 9.81  # the scenes' (core/render's default)
VACATED_MIN, VACATED_SHARE = 6, 0.05  # frame-0 pixels showing floor/background later, for "moved" (settling
# moves a resting object's edge by a pixel or so)


def load(cow_dir, record: dict) -> dict:
    rel = record.get("segmentation")
    if not rel:
        raise DataError(f"{record['id']}: no seg.npz in the COW output; run cow-simulate --segmentation")
    with np.load(Path(cow_dir) / rel) as z:
        seg = {k: z[k] for k in z.files}
    seg["names"] = json.loads(str(seg["names"]))
    return seg


def _points(seg, k: int) -> dict[int, np.ndarray]:
    return lift(seg["depth"][k].astype(np.float32), seg["ids"][k].astype(np.int32), seg["K"], seg["T"])


def _hit(ids: np.ndarray, body: int, car: list[int], depth: np.ndarray | None = None) -> bool:
    """Moved (vacated its frame-0 pixels), and the car's mask touches it when it starts to (a knock-on
    push by another object does not count, as a contact with the car would not)."""
    first = ids[0] == body
    need = max(VACATED_MIN, VACATED_SHARE * int(first.sum()))
    for k in range(1, len(ids)):
        if int((first & (ids[k] <= 0)).sum()) >= need:
            return any(_touch(ids[j], body, car, None if depth is None else depth[j]) for j in (k - 1, k))
    return False


def _touch(ids: np.ndarray, body: int, car: list[int], depth: np.ndarray | None = None, reach: int = 2,
           gap: float = 0.06) -> bool:  # fmt: skip
    """The car's pixels within `reach` pixels of the object's, and (with depth) within `gap` metres of
    the object's depth range there: image neighbours far apart in depth do not touch."""
    mask = ids == body
    near = np.zeros_like(mask)
    for dv in range(-reach, reach + 1):
        for du in range(-reach, reach + 1):
            near |= np.roll(np.roll(mask, dv, axis=0), du, axis=1)
    touching = near & np.isin(ids, car)
    if depth is None or not touching.any():
        return bool(touching.any())
    d_obj, d_car = depth[mask].astype(float), depth[touching].astype(float)
    return bool(np.any((d_car > d_obj.min() - gap) & (d_car < d_obj.max() + gap)))


def _top_centre(points: np.ndarray) -> tuple[np.ndarray, float]:
    """(ground position, top z) from the top face's points (seen whole from an elevated camera, so its
    centre is not pulled towards the camera as the side faces' points are)."""
    top = float(points[:, 2].max())
    return np.median(points[points[:, 2] > top - 0.005, :2], axis=0), top


def events(record: dict, seg: dict, question: str) -> dict:
    """The events cow.json would hold, from the frames only (keys the reader uses)."""
    g = grammar.ground(question)
    names, ids = seg["names"], seg["ids"]
    if g.task == "collision":
        car = [b for n, b in names.items() if n.startswith("car")]
        hits = sorted(n for n, b in names.items() if n in _named(names) and _hit(ids, b, car, seg["depth"]))
        return {"hits": hits}
    if g.task == "occlusion":
        first, last = ids[0], ids[-1]
        return {"visible_fraction": {n: float((last == names[n]).sum() / max(1, (first == names[n]).sum()))
                                     for n in g.targets if n in names}}  # fmt: skip
    if g.task == "compatibility":
        cavity = record["cavity"]
        seen = [_points(seg, k) for k in range(len(ids))]
        pl = seen[-1]
        inside = {}
        for n in g.targets:
            b = names.get(n)
            p0 = next((p for p in seen if b in p and len(p[b]) >= 10), None)  # first frame it is seen in
            if p0 is None:
                continue
            if b not in pl:  # hidden entirely at the end: sunk below the rim
                inside[n] = True
                continue
            height = float(np.ptp(p0[b][:, 2]))
            off = _top_centre(p0[b])[0] - np.asarray(cavity["centre"]) if len(g.targets) > 1 else 0.0
            xy, top = _top_centre(pl[b])
            low, high = cavity["floor"] + height, cavity["rim"] + height
            inside[n] = _in_cavity(xy, cavity, off) and abs(top - low) < abs(top - high)
        return {"inside": inside}
    return {"landing": _landing(seg, g)}


def _named(names: dict) -> set[str]:
    return {n for n in names if not n.startswith(("car", "scenery", "container"))}


def _in_cavity(xy, cavity, offset) -> bool:
    c = np.asarray(cavity["centre"]) + np.asarray(offset)
    yaw = math.radians(cavity["yaw"])
    d = np.asarray(xy) - c
    local = np.array([math.cos(yaw) * d[0] + math.sin(yaw) * d[1], -math.sin(yaw) * d[0] + math.cos(yaw) * d[1]])
    return bool(np.all(np.abs(local) < np.asarray(cavity["inner"]) / 2 - 0.002))


def _landing(seg, g) -> dict | None:
    names = seg["names"]
    ball = names.get(g.mover)
    if ball is None:
        return None
    cam = np.asarray(seg["T"])[:3, 3]
    p0 = _points(seg, 0)
    if ball not in p0:
        return None
    radius = float(np.ptp(p0[ball][:, 2])) / 2
    centres, times = [], []
    for k in range(len(seg["ids"])):
        pts = p0 if k == 0 else _points(seg, k)
        if ball not in pts:
            continue
        c = pts[ball].mean(axis=0)
        ray = c - cam
        centres.append(c + radius * ray / np.linalg.norm(ray))
        times.append(float(seg["times"][k]))
    mats = {n: p0[b] for n, b in names.items() if n in g.targets and b in p0}
    for j in range(1, len(centres)):
        if centres[j][2] < 2.5 * radius:
            a, b = centres[j - 1], centres[j]
            if j >= 2:  # the ballistic arc through the last two airborne frames, down to one radius
                dt = times[j - 1] - times[j - 2]
                v = (centres[j - 1] - centres[j - 2]) / dt
                vz = v[2] - GRAVITY * dt / 2
                h = a[2] - radius
                t = (vz + math.sqrt(max(vz * vz + 2 * GRAVITY * h, 0.0))) / GRAVITY
                point = np.array([a[0] + v[0] * t, a[1] + v[1] * t, radius])
                step = float(np.dot(b[:2] - a[:2], v[:2])) / max(float(np.dot(v[:2], v[:2])), 1e-12)
                if step < 0.5 * (times[j] - times[j - 1]):  # stopped on the way (a wall): it came down there
                    point = np.array([b[0], b[1], radius])
            else:  # one airborne frame: the straight line to the first low one
                s = 1.0 if a[2] <= b[2] else float(np.clip((a[2] - radius) / (a[2] - b[2]), 0.0, 1.0))
                point = a + s * (b - a)
            gap = {n: float(np.min(np.linalg.norm(pts[:, :2] - point[:2], axis=1))) for n, pts in mats.items()}
            near = min(gap, key=gap.get) if gap else None
            landed = near if near is not None and gap[near] < 0.03 else "floor"
            return {"object": landed, "t": times[j], "point": point.tolist()}
    return None
