"""Swept-box prefilter: will a box driven straight ahead touch each object's footprint, and by how much
does it miss? A 2D separating-axis test on the floor plane, run on a layout before any MuJoCo step.

The car's footprint (half-length hl, half-width hw, heading) swept for distance D is itself a box
of half-length hl + D/2 centred D/2 ahead. For a box footprint the clearance is the largest gap
over the four candidate separating axes (exact for face-to-face gaps, a lower bound for corner
gaps); for a round footprint (cylinder, sphere, vase) it is the exact distance from the centre to
the swept box minus the radius. Negative clearance is penetration: a hit.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _clearance(cx, cy, ux, uy, hl, hw, ox, oy, ax, ay, ol, ow, is_round):
    dx, dy = ox - cx, oy - cy
    if is_round:
        lx = abs(dx * ux + dy * uy) - hl
        ly = abs(-dx * uy + dy * ux) - hw
        if lx > 0.0 or ly > 0.0:
            return np.sqrt(max(lx, 0.0) ** 2 + max(ly, 0.0) ** 2) - ol
        return max(lx, ly) - ol
    bx, by = -ay, ax
    best = -1e9
    # axes of the swept box (u, its normal) and of the object (a, b)
    for k in range(4):
        if k == 0:
            px, py = ux, uy
        elif k == 1:
            px, py = -uy, ux
        elif k == 2:
            px, py = ax, ay
        else:
            px, py = bx, by
        r_swept = hl * abs(ux * px + uy * py) + hw * abs(-uy * px + ux * py)
        r_obj = ol * abs(ax * px + ay * py) + ow * abs(bx * px + by * py)
        gap = abs(dx * px + dy * py) - r_swept - r_obj
        if gap > best:
            best = gap
    return best


@njit(cache=True)
def swept_obb_prefilter(car, heading, distance, obbs):
    """car = (x, y, half_length, half_width); heading = yaw (rad); obbs [N, 6] = (x, y, yaw, half_l,
    half_w, round). Returns hit [N] (bool) and clearance [N] (m, negative = overlap)."""
    ux, uy = np.cos(heading), np.sin(heading)
    cx = car[0] + ux * distance / 2.0
    cy = car[1] + uy * distance / 2.0
    hl = car[2] + distance / 2.0
    hw = car[3]
    n = obbs.shape[0]
    hit = np.zeros(n, dtype=np.bool_)
    clearance = np.zeros(n)
    for i in range(n):
        ax, ay = np.cos(obbs[i, 2]), np.sin(obbs[i, 2])
        c = _clearance(cx, cy, ux, uy, hl, hw, obbs[i, 0], obbs[i, 1], ax, ay, obbs[i, 3], obbs[i, 4], obbs[i, 5] > 0.5)
        clearance[i] = c
        hit[i] = c < 0.0
    return hit, clearance
