"""raster2d and capsule_dists against plain NumPy references on fresh random inputs."""

from __future__ import annotations

import numpy as np

from methodkit.core.kernels.capsules import capsule_dists, segment_distance
from methodkit.core.kernels.raster import raster2d, raster2d_reference


def _shapes(rng, m):
    rows = []
    for k in range(m):
        t = k % 3
        if t == 0:
            p = [rng.uniform(0, 64), rng.uniform(0, 48), rng.uniform(1, 8), 0, 0]
        elif t == 1:
            p = [*rng.uniform(0, 64, 2), *rng.uniform(0, 48, 2), rng.uniform(1, 5)]
        else:
            p = [rng.uniform(0, 64), rng.uniform(0, 48), rng.uniform(1, 9), rng.uniform(1, 9), rng.uniform(-3, 3)]
        rows.append([t, *p, *rng.integers(0, 255, 3), k, rng.uniform(0, 2), 0])
    return np.array(rows, dtype=float)


def test_raster2d_matches_numpy_compositor():
    rng = np.random.default_rng(11)
    for _ in range(5):
        s = _shapes(rng, 9)
        rgb, ids = raster2d(s, 48, 64)
        rgb_ref, ids_ref = raster2d_reference(s, 48, 64)
        assert (ids == ids_ref).mean() > 0.999  # boundary pixels may differ by float rounding only
        assert (rgb == rgb_ref).all(axis=2).mean() > 0.999
        assert (ids >= 0).any()


def test_raster2d_depth_order():
    a = [0, 10, 10, 6, 0, 0, 255, 0, 0, 1, 1.0, 0]
    b = [0, 10, 10, 3, 0, 0, 0, 255, 0, 2, 2.0, 0]
    _, ids = raster2d(np.array([b, a]), 20, 20)
    assert ids[10, 10] == 2 and ids[10, 15] == 1 and ids[0, 0] == -1


def _seg_ref(p1, q1, p2, q2, n=401):
    s = np.linspace(0, 1, n)
    a = p1 + s[:, None] * (q1 - p1)
    b = p2 + s[:, None] * (q2 - p2)
    return np.sqrt(((a[:, None] - b[None]) ** 2).sum(-1)).min()


def test_capsule_dists_matches_dense_sampling():
    rng = np.random.default_rng(4)
    a = rng.normal(size=(6, 3, 7))
    b = rng.normal(size=(6, 2, 7))
    a[..., 6] = b[..., 6] = 0.1
    got = capsule_dists(a, b)
    for t in range(6):
        ref = min(_seg_ref(a[t, i, :3], a[t, i, 3:6], b[t, j, :3], b[t, j, 3:6]) - 0.2 for i in range(3) for j in range(2))
        assert got[t] <= ref + 1e-12 and got[t] > ref - 0.02
    assert abs(segment_distance(np.zeros(3), np.zeros(3), np.ones(3), np.ones(3)) - np.sqrt(3)) < 1e-12
