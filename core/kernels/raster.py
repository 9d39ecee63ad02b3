"""raster2d: z-ordered top-down rasterisation of discs, capsules and oriented boxes (Numba).

shapes float64 [M, 12]: (type, p0, p1, p2, p3, p4, r, g, b, id, depth, unused) in pixel units, where
type 0 disc (cx, cy, radius), 1 capsule (x1, y1, x2, y2, radius), 2 oriented box (cx, cy, half_u,
half_v, angle_rad). A pixel takes the shape of largest depth (nearest the camera) covering its centre.
Returns rgb uint8 [H, W, 3] (background grey 200) and ids int32 [H, W] (-1 background).
"""

from __future__ import annotations

import numpy as np
from numba import njit

DISC, CAPSULE, BOX = 0, 1, 2


@njit(cache=True)
def _inside(s, x, y):
    t = int(s[0])
    if t == 0:
        dx = x - s[1]
        dy = y - s[2]
        return dx * dx + dy * dy <= s[3] * s[3]
    if t == 1:
        ax, ay, bx, by, r = s[1], s[2], s[3], s[4], s[5]
        ux = bx - ax
        uy = by - ay
        ll = ux * ux + uy * uy
        h = 0.0
        if ll > 0.0:
            h = ((x - ax) * ux + (y - ay) * uy) / ll
            h = min(1.0, max(0.0, h))
        dx = x - ax - h * ux
        dy = y - ay - h * uy
        return dx * dx + dy * dy <= r * r
    c = np.cos(s[5])
    sn = np.sin(s[5])
    dx = x - s[1]
    dy = y - s[2]
    u = dx * c + dy * sn
    v = -dx * sn + dy * c
    return abs(u) <= s[3] and abs(v) <= s[4]


@njit(cache=True)
def _raster2d(shapes, h, w):
    rgb = np.full((h, w, 3), 200, dtype=np.uint8)
    ids = np.full((h, w), -1, dtype=np.int32)
    zbuf = np.full((h, w), -np.inf)
    for m in range(shapes.shape[0]):
        s = shapes[m]
        t = int(s[0])
        if t == 0:
            r = s[3]
            x0, x1, y0, y1 = s[1] - r, s[1] + r, s[2] - r, s[2] + r
        elif t == 1:
            r = s[5]
            x0, x1 = min(s[1], s[3]) - r, max(s[1], s[3]) + r
            y0, y1 = min(s[2], s[4]) - r, max(s[2], s[4]) + r
        else:
            e = np.sqrt(s[3] * s[3] + s[4] * s[4])
            x0, x1, y0, y1 = s[1] - e, s[1] + e, s[2] - e, s[2] + e
        u0 = max(0, int(np.floor(x0)))
        u1 = min(w - 1, int(np.ceil(x1)))
        v0 = max(0, int(np.floor(y0)))
        v1 = min(h - 1, int(np.ceil(y1)))
        for v in range(v0, v1 + 1):
            for u in range(u0, u1 + 1):
                if s[10] >= zbuf[v, u] and _inside(s, u + 0.5, v + 0.5):
                    zbuf[v, u] = s[10]
                    ids[v, u] = int(s[9])
                    rgb[v, u, 0] = int(s[6])
                    rgb[v, u, 1] = int(s[7])
                    rgb[v, u, 2] = int(s[8])
    return rgb, ids


def raster2d(shapes: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """rgb uint8 [H, W, 3] and ids int32 [H, W] of shapes [M, 12] (see the module docstring)."""
    arr = np.ascontiguousarray(shapes, dtype=np.float64).reshape(-1, 12)
    if not np.isfinite(arr).all():
        raise ValueError("raster2d: shapes must be finite")
    return _raster2d(arr, int(height), int(width))


def raster2d_reference(shapes: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The same as a NumPy compositor: one full-image boolean mask per shape, painted in depth order."""
    arr = np.asarray(shapes, dtype=np.float64).reshape(-1, 12)
    rgb = np.full((height, width, 3), 200, dtype=np.uint8)
    ids = np.full((height, width), -1, dtype=np.int32)
    zbuf = np.full((height, width), -np.inf)
    y, x = np.mgrid[0:height, 0:width] + 0.5
    for s in arr:
        t = int(s[0])
        if t == DISC:
            mask = (x - s[1]) ** 2 + (y - s[2]) ** 2 <= s[3] ** 2
        elif t == CAPSULE:
            ux, uy = s[3] - s[1], s[4] - s[2]
            ll = ux * ux + uy * uy
            hh = np.clip(((x - s[1]) * ux + (y - s[2]) * uy) / ll, 0, 1) if ll > 0 else np.zeros_like(x)
            mask = (x - s[1] - hh * ux) ** 2 + (y - s[2] - hh * uy) ** 2 <= s[5] ** 2
        else:
            c, sn = np.cos(s[5]), np.sin(s[5])
            u = (x - s[1]) * c + (y - s[2]) * sn
            v = -(x - s[1]) * sn + (y - s[2]) * c
            mask = (np.abs(u) <= s[3]) & (np.abs(v) <= s[4])
        mask &= s[10] >= zbuf
        zbuf[mask] = s[10]
        ids[mask] = int(s[9])
        rgb[mask] = s[6:9].astype(np.uint8)
    return rgb, ids
