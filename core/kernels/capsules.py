"""capsule_dists: the minimum surface distance between two capsule sets per time step (Numba).

person_caps [T, P, 7] and hazard_caps [T, Q, 7] hold capsules (x1, y1, z1, x2, y2, z2, radius);
dmin [T] = min over pairs of (segment-segment distance - r_a - r_b), negative when they overlap.
Exact for capsule primitives (a sphere is a capsule with equal end points).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True)
def _clamp(x):
    return min(1.0, max(0.0, x))


@njit(cache=True)
def segment_distance(p1, q1, p2, q2):
    """Distance between segments p1-q1 and p2-q2 (Ericson, Real-Time Collision Detection 5.1.9)."""
    d1 = q1 - p1
    d2 = q2 - p2
    r = p1 - p2
    a = d1 @ d1
    e = d2 @ d2
    f = d2 @ r
    eps = 1e-12
    if a <= eps and e <= eps:
        return np.sqrt(r @ r)
    if a <= eps:
        s = 0.0
        t = _clamp(f / e)
    else:
        c = d1 @ r
        if e <= eps:
            t = 0.0
            s = _clamp(-c / a)
        else:
            b = d1 @ d2
            den = a * e - b * b
            s = _clamp((b * f - c * e) / den) if den > eps else 0.0
            t = (b * s + f) / e
            if t < 0.0:
                t = 0.0
                s = _clamp(-c / a)
            elif t > 1.0:
                t = 1.0
                s = _clamp((b - c) / a)
    c1 = p1 + d1 * s
    c2 = p2 + d2 * t
    diff = c1 - c2
    return np.sqrt(diff @ diff)


@njit(cache=True, parallel=True)
def _capsule_dists(a, b):
    n = a.shape[0]
    out = np.empty(n)
    for t in prange(n):
        best = np.inf
        for i in range(a.shape[1]):
            for j in range(b.shape[1]):
                d = segment_distance(a[t, i, 0:3], a[t, i, 3:6], b[t, j, 0:3], b[t, j, 3:6]) - a[t, i, 6] - b[t, j, 6]
                if d < best:
                    best = d
        out[t] = best
    return out


def capsule_dists(person_caps: np.ndarray, hazard_caps: np.ndarray) -> np.ndarray:
    """dmin [T] between capsule sets [T, P, 7] and [T, Q, 7]."""
    a = np.ascontiguousarray(person_caps, dtype=np.float64)
    b = np.ascontiguousarray(hazard_caps, dtype=np.float64)
    if a.ndim != 3 or b.ndim != 3 or a.shape[2] != 7 or b.shape[2] != 7 or a.shape[0] != b.shape[0]:
        raise ValueError(f"capsule_dists: expected [T, P, 7] and [T, Q, 7], got {a.shape} and {b.shape}")
    return _capsule_dists(a, b)
