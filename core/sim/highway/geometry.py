"""Planar geometry of the highway world: oriented boxes, the drivable area, constant-velocity motion.

Shared layouts (float64):
- a box is (x, y, heading, length, width), (x, y) its centre, heading in radians from +x;
- a road is lane segments [S, 5] = (x_start, x_end, y_center, width, lane_index); roads run along +x and
  the drivable area is the union of the segments' rectangles [x_start, x_end] x [y_center -+ width / 2];
- speeds are (vx, vy) in the world frame.

Every operation has a Numba kernel (what the simulator and the scorer call; the scalar `@njit` helpers
are meant to be called from other kernels) and a plain NumPy reference (`*_ref`) that the tests hold
the kernels to. Touching counts as overlapping (as shapely's `intersects`, which NAVSIM uses).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

BOX_X, BOX_Y, BOX_HEADING, BOX_LENGTH, BOX_WIDTH = range(5)
SEG_X0, SEG_X1, SEG_Y, SEG_WIDTH, SEG_LANE = range(5)

# Corner order of box_corners, as NAVSIM's BBCoordsIndex: the front bumper is corner 0 -> corner 3.
FRONT_LEFT, REAR_LEFT, REAR_RIGHT, FRONT_RIGHT = range(4)
_CORNER_SIGNS = np.array([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]])

# Slack for "the next segment starts where this one ends" (segment ends are user floats).
CONTINUATION_TOL = 1e-6


# --------------------------------------------------------------------------- boxes


def box_corners(boxes: np.ndarray, xp=np) -> np.ndarray:
    """Corners [..., 4, 2] of boxes [..., 5] in the order front-left, rear-left, rear-right, front-right.
    `xp` is the array module (numpy, or cupy for arrays on a GPU), as in every NumPy helper here."""
    boxes = xp.asarray(boxes, dtype=xp.float64)
    signs = xp.asarray(_CORNER_SIGNS)
    c, s = xp.cos(boxes[..., BOX_HEADING]), xp.sin(boxes[..., BOX_HEADING])
    half_l = 0.5 * boxes[..., BOX_LENGTH]
    half_w = 0.5 * boxes[..., BOX_WIDTH]
    lon = signs[:, 0] * half_l[..., None]  # [..., 4] offsets along the heading
    lat = signs[:, 1] * half_w[..., None]  # [..., 4] offsets to the left
    x = boxes[..., BOX_X, None] + lon * c[..., None] - lat * s[..., None]
    y = boxes[..., BOX_Y, None] + lon * s[..., None] + lat * c[..., None]
    return xp.stack([x, y], axis=-1)


def _separated_on(a, b, axis, xp):
    """Do the point sets a [..., k, 2] and b [..., j, 2] project onto `axis` [..., 2] without overlap?"""
    pa = xp.einsum("...kd,...d->...k", a, axis)
    pb = xp.einsum("...kd,...d->...k", b, axis)
    return (pa.max(-1) < pb.min(-1)) | (pb.max(-1) < pa.min(-1))


def boxes_overlap_ref(a: np.ndarray, b: np.ndarray, xp=np) -> np.ndarray:
    """NumPy reference: do boxes a [..., 5] and b [..., 5] (broadcast) overlap? Separating axes on corners."""
    ca, cb = box_corners(a, xp), box_corners(b, xp)
    ca, cb = xp.broadcast_arrays(ca, cb)
    separated = xp.zeros(ca.shape[:-2], dtype=bool)
    for corners in (ca, cb):  # the candidate axes are the edge normals of both boxes
        for e in (0, 1):
            edge = corners[..., e + 1, :] - corners[..., e, :]
            separated |= _separated_on(ca, cb, xp.stack([-edge[..., 1], edge[..., 0]], axis=-1), xp)
    return ~separated


@njit(cache=True)
def overlap_pair(ax, ay, ah, al, aw, bx, by, bh, bl, bw):
    """Do two oriented boxes overlap? Separating-axis test on the four face normals (scalar kernel)."""
    dx = bx - ax
    dy = by - ay
    ca, sa = np.cos(ah), np.sin(ah)
    cb, sb = np.cos(bh), np.sin(bh)
    # |cos| and |sin| of the relative heading give the other box's half extent along each axis.
    cr = abs(ca * cb + sa * sb)
    sr = abs(ca * sb - sa * cb)
    hal, haw, hbl, hbw = 0.5 * al, 0.5 * aw, 0.5 * bl, 0.5 * bw
    # axes of a: (ca, sa) and (-sa, ca)
    if abs(dx * ca + dy * sa) > hal + hbl * cr + hbw * sr:
        return False
    if abs(-dx * sa + dy * ca) > haw + hbl * sr + hbw * cr:
        return False
    # axes of b
    if abs(dx * cb + dy * sb) > hbl + hal * cr + haw * sr:
        return False
    if abs(-dx * sb + dy * cb) > hbw + hal * sr + haw * cr:
        return False
    return True


@njit(cache=True)
def overlap_boxes(a, b):
    """Scalar-kernel form taking two box rows [5]."""
    return overlap_pair(a[0], a[1], a[2], a[3], a[4], b[0], b[1], b[2], b[3], b[4])


# Array wrappers run a serial kernel below this many rows: starting the thread pool costs more than
# the work on small inputs (a drawn frame's few hundred marking points).
PARALLEL_MIN_ROWS = 65536


def _overlap_rows_py(a, b, out):
    for i in prange(a.shape[0]):
        out[i] = overlap_pair(a[i, 0], a[i, 1], a[i, 2], a[i, 3], a[i, 4], b[i, 0], b[i, 1], b[i, 2], b[i, 3], b[i, 4])


_overlap_rows = njit(cache=True)(_overlap_rows_py)
_overlap_rows_parallel = njit(cache=True, parallel=True)(_overlap_rows_py)


def boxes_overlap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Do boxes a [..., 5] and b [..., 5] (broadcast against each other) overlap? Bool array [...]."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    shape = a.shape[:-1]
    out = np.empty(int(np.prod(shape)), dtype=np.bool_)
    kernel = _overlap_rows_parallel if out.size >= PARALLEL_MIN_ROWS else _overlap_rows
    kernel(np.ascontiguousarray(a.reshape(-1, 5)), np.ascontiguousarray(b.reshape(-1, 5)), out)
    return out.reshape(shape)


@njit(cache=True)
def pairwise_overlap(boxes, present):
    """Symmetric [K, K] overlap matrix of boxes [K, 5]; absent boxes overlap nothing, the diagonal is False."""
    k = boxes.shape[0]
    out = np.zeros((k, k), dtype=np.bool_)
    for i in range(k):
        if not present[i]:
            continue
        for j in range(i + 1, k):
            if present[j] and overlap_boxes(boxes[i], boxes[j]):
                out[i, j] = True
                out[j, i] = True
    return out


def pairwise_overlap_ref(boxes: np.ndarray, present: np.ndarray) -> np.ndarray:
    """NumPy reference of pairwise_overlap."""
    hit = boxes_overlap_ref(boxes[:, None, :], boxes[None, :, :])
    hit &= present[:, None] & present[None, :]
    np.fill_diagonal(hit, False)
    return hit


@njit(cache=True)
def segment_hits_box(x0, y0, x1, y1, bx, by, bh, bl, bw):
    """Does the line segment (x0, y0)-(x1, y1) touch the oriented box? Separating axes: the box's two
    axes and the segment's normal (scalar kernel; used for NAVSIM's front-bumper test)."""
    c, s = np.cos(bh), np.sin(bh)
    hl, hw = 0.5 * bl, 0.5 * bw
    # segment endpoints in the box frame
    u0 = (x0 - bx) * c + (y0 - by) * s
    v0 = -(x0 - bx) * s + (y0 - by) * c
    u1 = (x1 - bx) * c + (y1 - by) * s
    v1 = -(x1 - bx) * s + (y1 - by) * c
    if min(u0, u1) > hl or max(u0, u1) < -hl:
        return False
    if min(v0, v1) > hw or max(v0, v1) < -hw:
        return False
    nu, nv = -(v1 - v0), u1 - u0  # normal of the segment, in the box frame
    d = nu * u0 + nv * v0
    r = hl * abs(nu) + hw * abs(nv)
    return abs(d) <= r


def segment_hits_box_ref(p0: np.ndarray, p1: np.ndarray, boxes: np.ndarray, xp=np) -> np.ndarray:
    """NumPy reference of segment_hits_box on corners: p0, p1 [..., 2], boxes [..., 5] (broadcast)."""
    corners = box_corners(boxes, xp)
    p0, p1, corners = xp.broadcast_arrays(p0[..., None, :], p1[..., None, :], corners)
    seg = xp.concatenate([p0[..., :1, :], p1[..., :1, :]], axis=-2)
    separated = xp.zeros(corners.shape[:-2], dtype=bool)
    d = seg[..., 1, :] - seg[..., 0, :]
    axes = [
        corners[..., 1, :] - corners[..., 0, :],
        corners[..., 2, :] - corners[..., 1, :],
        xp.stack([-d[..., 1], d[..., 0]], axis=-1),
    ]
    for axis in axes:
        separated |= _separated_on(corners, seg, axis, xp)
    return ~separated


# --------------------------------------------------------------------------- drivable area


@njit(cache=True)
def point_on_road(x, y, road):
    """Is the point inside the union of the road's segment rectangles (boundaries included)?"""
    for s in range(road.shape[0]):
        if road[s, 0] <= x <= road[s, 1] and abs(y - road[s, 2]) <= 0.5 * road[s, 3]:
            return True
    return False


@njit(cache=True)
def box_on_road(x, y, heading, length, width, road):
    """Are all four corners of the box on the road? (NAVSIM's drivable-area rule: corners only.)"""
    c, s = np.cos(heading), np.sin(heading)
    for k in range(4):
        lon = _CORNER_SIGNS[k, 0] * 0.5 * length
        lat = _CORNER_SIGNS[k, 1] * 0.5 * width
        if not point_on_road(x + lon * c - lat * s, y + lon * s + lat * c, road):
            return False
    return True


def _points_on_road_rows_py(points, road, out):
    for i in prange(points.shape[0]):
        out[i] = point_on_road(points[i, 0], points[i, 1], road)


def _boxes_on_road_rows_py(boxes, road, out):
    for i in prange(boxes.shape[0]):
        out[i] = box_on_road(boxes[i, 0], boxes[i, 1], boxes[i, 2], boxes[i, 3], boxes[i, 4], road)


_points_on_road_rows = njit(cache=True)(_points_on_road_rows_py)
_points_on_road_rows_parallel = njit(cache=True, parallel=True)(_points_on_road_rows_py)
_boxes_on_road_rows = njit(cache=True)(_boxes_on_road_rows_py)
_boxes_on_road_rows_parallel = njit(cache=True, parallel=True)(_boxes_on_road_rows_py)


def points_on_road(points: np.ndarray, road: np.ndarray) -> np.ndarray:
    """Bool [...] for points [..., 2] on the road [S, 5]."""
    points = np.asarray(points, dtype=np.float64)
    out = np.empty(int(np.prod(points.shape[:-1])), dtype=np.bool_)
    kernel = _points_on_road_rows_parallel if out.size >= PARALLEL_MIN_ROWS else _points_on_road_rows
    kernel(np.ascontiguousarray(points.reshape(-1, 2)), np.ascontiguousarray(road, np.float64), out)
    return out.reshape(points.shape[:-1])


def boxes_on_road(boxes: np.ndarray, road: np.ndarray) -> np.ndarray:
    """Bool [...]: all four corners of each box [..., 5] on the road [S, 5]."""
    boxes = np.asarray(boxes, dtype=np.float64)
    out = np.empty(int(np.prod(boxes.shape[:-1])), dtype=np.bool_)
    kernel = _boxes_on_road_rows_parallel if out.size >= PARALLEL_MIN_ROWS else _boxes_on_road_rows
    kernel(np.ascontiguousarray(boxes.reshape(-1, 5)), np.ascontiguousarray(road, np.float64), out)
    return out.reshape(boxes.shape[:-1])


def points_on_road_ref(points: np.ndarray, road: np.ndarray) -> np.ndarray:
    """NumPy reference of points_on_road."""
    p = np.asarray(points, dtype=np.float64)[..., None, :]  # [..., 1, 2] against S segments
    inside = (road[:, SEG_X0] <= p[..., 0]) & (p[..., 0] <= road[:, SEG_X1])
    inside &= np.abs(p[..., 1] - road[:, SEG_Y]) <= 0.5 * road[:, SEG_WIDTH]
    return inside.any(-1)


def boxes_on_road_ref(boxes: np.ndarray, road: np.ndarray) -> np.ndarray:
    """NumPy reference of boxes_on_road."""
    return points_on_road_ref(box_corners(boxes), road).all(-1)


@njit(cache=True)
def lane_end_ahead(x, y, road):
    """The x where the drivable strip through (x, y) ends, following segments that continue it
    (a segment starting at or before the current end and covering y); -inf if (x, y) is off the road."""
    end = -np.inf
    for s in range(road.shape[0]):
        if road[s, 0] <= x <= road[s, 1] and abs(y - road[s, 2]) <= 0.5 * road[s, 3]:
            end = max(end, road[s, 1])
    if end == -np.inf:
        return end
    grown = True
    while grown:  # at most S passes; segments are few
        grown = False
        for s in range(road.shape[0]):
            if road[s, 0] <= end + CONTINUATION_TOL and road[s, 1] > end and abs(y - road[s, 2]) <= 0.5 * road[s, 3]:
                end = road[s, 1]
                grown = True
    return end


def lane_end_ahead_ref(x: float, y: float, road: np.ndarray) -> float:
    """Plain reference of lane_end_ahead: walk the segments sorted by start."""
    covering = np.abs(y - road[:, SEG_Y]) <= 0.5 * road[:, SEG_WIDTH]
    here = covering & (road[:, SEG_X0] <= x) & (x <= road[:, SEG_X1])
    if not here.any():
        return -np.inf
    end = road[here, SEG_X1].max()
    for s in np.argsort(road[:, SEG_X0], kind="stable"):
        if covering[s] and road[s, SEG_X0] <= end + CONTINUATION_TOL:
            end = max(end, road[s, SEG_X1])
    return float(end)


@njit(cache=True)
def overruns_lane_end(x, y, heading, length, road):
    """Has the box driven past the end of its lane? Its centre is on the road, the midpoint of its front
    bumper is not, and that point lies beyond the end of the strip through the centre."""
    if not point_on_road(x, y, road):
        return False
    fx = x + 0.5 * length * np.cos(heading)
    fy = y + 0.5 * length * np.sin(heading)
    if point_on_road(fx, fy, road):
        return False
    return fx > lane_end_ahead(x, y, road)


# --------------------------------------------------------------------------- constant-velocity motion


def extrapolate_cv(boxes: np.ndarray, speeds: np.ndarray, dt: float | np.ndarray, xp=np) -> np.ndarray:
    """Boxes [..., 5] moved at constant world velocity speeds [..., 2] for dt seconds (heading kept).
    dt may be an array broadcasting against the leading shape (e.g. [..., M] offsets with boxes[..., None, :])."""
    boxes = xp.asarray(boxes, dtype=xp.float64)
    dt = xp.asarray(dt, dtype=xp.float64)
    out = xp.broadcast_to(boxes, np.broadcast_shapes(boxes.shape, dt.shape + (5,))).copy()
    out[..., BOX_X] += xp.asarray(speeds)[..., 0] * dt
    out[..., BOX_Y] += xp.asarray(speeds)[..., 1] * dt
    return out


@njit(cache=True)
def extrapolate_cv_into(box, vx, vy, dt, out):
    """Kernel form: out[:] = box moved by (vx, vy) * dt, heading and size kept."""
    out[0] = box[0] + vx * dt
    out[1] = box[1] + vy * dt
    out[2] = box[2]
    out[3] = box[3]
    out[4] = box[4]
