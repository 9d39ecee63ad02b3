"""From an RGB-D view with instance masks to named 3D primitives (the COW's lifting step).

Input is what an RGB-D camera with an instance segmenter gives: RGB, depth in metres, instance ids,
K and T (world-from-camera). Nothing else of the scene is read. Each instance's pixels are lifted,
X_cam = z K^-1 [u, v, 1]^T, X_w = T X_cam, and a primitive is fitted:
- a sphere when an algebraic sphere fit leaves a radial residual under 10% of its radius;
- otherwise the footprint is the convex hull of the top face's points (the 4 mm slab under the
  highest point) seen from above: its minimum-area rectangle (rotating calipers over the hull's
  edges, which finds a square's orientation where PCA is degenerate) gives an oriented box, unless
  the hull fills less than 90% of that rectangle (a disk fills pi/4), which makes it round: a
  cylinder when the top slab spreads to the rim, a vase (capsule) when the top is a cap;
- height is the points' z range; the hidden back half is completed by the footprint's symmetry.
Names come from hue: saturated instances get the nearest of the eight named colours, unsaturated
ones (black, white, grey) are scenery: the car's parts, a container's walls, a wall.
"""

from __future__ import annotations

import colorsys
import math
from dataclasses import asdict, dataclass

import numpy as np

from methodkit.core.errors import DataError
from methodkit.tools.causal_spatial.scenes import PALETTE

_HUES = {  # the hue (degrees) of each named colour as core.render defines it
    name: colorsys.rgb_to_hsv(*rgb)[0] * 360
    for name, rgb in {
        "red": (0.85, 0.1, 0.1),
        "green": (0.1, 0.7, 0.2),
        "blue": (0.15, 0.3, 0.9),
        "yellow": (0.95, 0.85, 0.1),
        "orange": (0.95, 0.5, 0.05),
        "purple": (0.55, 0.2, 0.75),
        "cyan": (0.1, 0.8, 0.85),
        "magenta": (0.9, 0.15, 0.7),
    }.items()
}
assert set(_HUES) == set(PALETTE)
SATURATION_MIN = 0.3
TOP_SLAB = 0.004


@dataclass
class Primitive:
    instance: int
    colour: str  # a palette name, or "scenery"
    shade: str  # "black" / "white" / "grey" for scenery, else the colour
    shape: str  # box / cylinder / sphere / vase
    centre: list  # x, y, z of the centre
    size: list  # box: full extents [x, y, z] in its frame; round: [2r, 2r, h]
    yaw: float  # degrees, the box frame's x axis
    rgb: list  # mean colour 0..1
    pixels: int

    @property
    def radius(self) -> float:
        return self.size[0] / 2

    def to_dict(self) -> dict:
        return asdict(self)


def lift(depth: np.ndarray, ids: np.ndarray, K: np.ndarray, T: np.ndarray) -> dict[int, np.ndarray]:
    """Instance id -> its pixels' world points (N, 3); the floor (0) and background (-1) skipped."""
    h, w = depth.shape
    v, u = np.nonzero(ids > 0)
    z = depth[v, u].astype(float)
    x = (u - K[0, 2]) / K[0, 0] * z
    y = (v - K[1, 2]) / K[1, 1] * z
    world = np.c_[x, y, z] @ T[:3, :3].T + T[:3, 3]
    inst = ids[v, u]
    order = np.argsort(inst, kind="stable")
    inst, world, u, v = inst[order], world[order], u[order], v[order]
    cuts = np.nonzero(np.diff(inst))[0] + 1
    return {int(g[0]): p for g, p in zip(np.split(inst, cuts), np.split(world, cuts)) if len(g)}


def colour_of(rgb_mean) -> tuple[str, str]:
    """(palette colour or 'scenery', shade) from a mean RGB in 0..1."""
    hue, sat, val = colorsys.rgb_to_hsv(*[float(c) for c in rgb_mean])
    if sat < SATURATION_MIN:
        shade = "black" if val < 0.25 else "white" if val > 0.6 else "grey"
        return "scenery", shade
    deg = hue * 360
    name = min(_HUES, key=lambda n: min(abs(deg - _HUES[n]), 360 - abs(deg - _HUES[n])))
    return name, name


def _hull(xy: np.ndarray) -> np.ndarray:
    """Convex hull vertices (counter-clockwise) of 2D points (Andrew's monotone chain)."""
    pts = np.unique(np.round(xy, 6), axis=0)
    if len(pts) < 3:
        return pts

    def half(points):
        out = []
        for p in points:
            while len(out) >= 2 and _cross(out[-1] - out[-2], p - out[-2]) <= 0:
                out.pop()
            out.append(p)
        return out

    lower, upper = half(pts), half(pts[::-1])
    return np.array(lower[:-1] + upper[:-1])


def _cross(a, b) -> float:
    return float(a[0] * b[1] - a[1] * b[0])


def _area(poly: np.ndarray) -> float:
    x, y = poly[:, 0], poly[:, 1]
    return 0.5 * abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))


def min_area_rect(xy: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(centre, full extents (a, b), yaw rad of the a axis, hull fill ratio) of 2D points."""
    hull = _hull(xy)
    if len(hull) < 3:
        c = xy.mean(axis=0)
        return c, np.array([1e-3, 1e-3]), 0.0, 1.0
    best = None
    for i in range(len(hull)):
        e = hull[(i + 1) % len(hull)] - hull[i]
        ang = math.atan2(e[1], e[0])
        c, s = math.cos(ang), math.sin(ang)
        local = hull @ np.array([[c, -s], [s, c]])
        lo, hi = local.min(axis=0), local.max(axis=0)
        area = float(np.prod(hi - lo))
        if best is None or area < best[0]:
            mid = (lo + hi) / 2
            centre = np.array([c * mid[0] - s * mid[1], s * mid[0] + c * mid[1]])
            best = (area, centre, hi - lo, ang)
    area, centre, ext, ang = best
    return centre, ext, ang, _area(hull) / area if area > 0 else 1.0


def _circle(xy: np.ndarray) -> tuple[np.ndarray, float]:
    """Least-squares circle through 2D points (algebraic fit)."""
    A = np.c_[2 * xy, np.ones(len(xy))]
    b = (xy**2).sum(axis=1)
    sol, *_ = np.linalg.lstsq(A, b, rcond=None)
    centre = sol[:2]
    return centre, float(math.sqrt(max(sol[2] + centre @ centre, 1e-12)))


def _sphere(points: np.ndarray) -> tuple[np.ndarray, float, float]:
    A = np.c_[2 * points, np.ones(len(points))]
    b = (points**2).sum(axis=1)
    sol, *_ = np.linalg.lstsq(A, b, rcond=None)
    centre = sol[:3]
    r = float(math.sqrt(max(sol[3] + centre @ centre, 1e-12)))
    resid = float(np.sqrt(np.mean((np.linalg.norm(points - centre, axis=1) - r) ** 2)))
    return centre, r, resid


def fit(points: np.ndarray, *, allow_sphere: bool = True) -> tuple[str, list, list, float]:
    """(shape, centre, size, yaw_deg) of one instance's world points."""
    if len(points) < 8:
        raise DataError(f"too few points to fit a primitive ({len(points)})")
    zmin, zmax = float(points[:, 2].min()), float(points[:, 2].max())
    if zmin < 0.02:  # near the floor: it rests on it (a rounded bottom curves out of view)
        zmin = 0.0
    height = max(zmax - zmin, 1e-3)
    if allow_sphere and len(points) >= 20:
        c, r, resid = _sphere(points)
        spread = float(np.ptp(points[:, :2], axis=0).max())  # as wide as it is tall, and as wide as the fit
        if resid < 0.1 * r and 0.8 < height / spread < 1.25 and 0.8 < spread / (2 * r) < 1.2:
            return "sphere", [float(c[0]), float(c[1]), float(c[2])], [2 * r, 2 * r, 2 * r], 0.0
    top = points[points[:, 2] > zmax - TOP_SLAB]
    src = top if len(top) >= 12 else points
    centre, ext, ang, fill = min_area_rect(src[:, :2])
    axis = np.median(top[:, :2], axis=0) if len(top) else centre  # above the axis of a round object
    zmid = (zmin + zmax) / 2  # the middle band: a capsule's straight part, a cylinder's or a box's sides
    side = points[np.abs(points[:, 2] - zmid) < 0.15 * height]
    if len(side) >= 12:  # round iff the side's horizontal distance from the axis is constant (< 10%)
        rad = np.linalg.norm(side[:, :2] - axis, axis=1)
        is_round = float(np.std(rad) / max(np.mean(rad), 1e-9)) < 0.1
    else:
        is_round = fill < 0.9
    if is_round:
        r = float(np.percentile(np.linalg.norm(points[:, :2] - axis, axis=1), 98))
        # a flat top reaches the rim; a capsule's cap is only ~0.5 r wide 4 mm below its apex
        spread = float(np.percentile(np.linalg.norm(top[:, :2] - axis, axis=1), 90)) if len(top) else 0.0
        shape = "cylinder" if spread > 0.72 * r else "vase"
        return shape, [float(axis[0]), float(axis[1]), (zmin + zmax) / 2], [2 * r, 2 * r, height], 0.0
    return "box", [float(centre[0]), float(centre[1]), (zmin + zmax) / 2], [float(ext[0]), float(ext[1]), height], \
        math.degrees(ang)


def _densify(hull: np.ndarray, step: float = 0.002) -> np.ndarray:
    """Points every `step` m along a closed polygon (so long edges weigh as much as short ones)."""
    if len(hull) < 3:
        return hull
    out = []
    for i in range(len(hull)):
        a, b = hull[i], hull[(i + 1) % len(hull)]
        n = max(1, int(np.linalg.norm(b - a) / step))
        out.append(a + (b - a) * (np.arange(n) / n)[:, None])
    return np.concatenate(out)


def perceive(rgb: np.ndarray, depth: np.ndarray, ids: np.ndarray, K, T, *, min_pixels: int = 8) -> list[Primitive]:
    """Every instance in view as a Primitive (scenery fitted as boxes)."""
    K, T = np.asarray(K, dtype=float), np.asarray(T, dtype=float)
    clouds = lift(depth, ids, K, T)
    out = []
    for inst, pts in sorted(clouds.items()):
        mask = ids == inst
        if mask.sum() < (2 if colour_of(np.median(rgb[mask].reshape(-1, 3), axis=0) / 255.0)[0] == "scenery" else min_pixels):
            continue
        mean = rgb[mask].reshape(-1, 3).mean(axis=0) / 255.0
        colour, shade = colour_of(np.median(rgb[mask].reshape(-1, 3), axis=0) / 255.0)
        if colour == "scenery":
            centre, ext, ang, _ = min_area_rect(pts[:, :2])
            zmin, zmax = float(pts[:, 2].min()), float(pts[:, 2].max())
            shape, c3, size, yaw = "box", [*centre.tolist(), (zmin + zmax) / 2], [*ext.tolist(), zmax - zmin], \
                math.degrees(ang)
        else:
            shape, c3, size, yaw = fit(pts)
        out.append(Primitive(inst, colour, shade, shape, [float(x) for x in c3], [float(x) for x in size],
                             float(yaw), mean.tolist(), int(mask.sum())))  # fmt: skip
    return out


def union_box(prims: list[Primitive], clouds: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray, float, float, float]:
    """(centre xy, extents, yaw rad, zmin, zmax) of the union of several instances (e.g. the car's parts)."""
    pts = np.concatenate([clouds[p.instance] for p in prims])
    centre, ext, ang, _ = min_area_rect(pts[:, :2])
    return centre, ext, ang, float(pts[:, 2].min()), float(pts[:, 2].max())
