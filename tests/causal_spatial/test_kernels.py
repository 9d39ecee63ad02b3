"""The swept-box prefilter against dense sampling and its own .py_func (mask_stats: tests/core/test_masks.py)."""

from __future__ import annotations

import math

import numpy as np

from methodkit.tools.causal_spatial.kernels import swept_obb_prefilter


def _inside_rect(p, c, u, hl, hw):
    d = p - c
    return (np.abs(d @ u) <= hl) & (np.abs(d @ np.array([-u[1], u[0]])) <= hw)


def test_swept_prefilter_matches_dense_sampling():
    """Hit iff the sampled footprint of an object meets the sampled swept rectangle; clearance sign agrees."""
    rng = np.random.default_rng(7)
    heading = 0.6
    u = np.array([math.cos(heading), math.sin(heading)])
    car = np.array([0.0, 0.0, 0.08, 0.05])
    dist = 0.5
    obbs = []
    for _ in range(60):
        along, lat = rng.uniform(-0.1, 0.8), rng.uniform(-0.25, 0.25)
        xy = u * along + np.array([-u[1], u[0]]) * lat
        obbs.append([xy[0], xy[1], rng.uniform(0, math.pi), rng.uniform(0.02, 0.05), rng.uniform(0.02, 0.05),
                     float(rng.random() < 0.4)])  # fmt: skip
    obbs = np.asarray(obbs)
    hit, clear = swept_obb_prefilter(car, heading, dist, obbs)
    c = u * dist / 2
    grid = np.stack(np.meshgrid(np.linspace(-0.4, 1.0, 700), np.linspace(-0.5, 0.7, 600)), -1).reshape(-1, 2)
    in_swept = _inside_rect(grid, c, u, car[2] + dist / 2, car[3])
    for o, h, cl in zip(obbs, hit, clear):
        if o[5] > 0.5:
            in_obj = np.hypot(*(grid - o[:2]).T) <= o[3]
        else:
            in_obj = _inside_rect(grid, o[:2], np.array([math.cos(o[2]), math.sin(o[2])]), o[3], o[4])
        touching = bool((in_obj & in_swept).any())
        if abs(cl) > 0.004:  # away from the grid's resolution
            assert touching == bool(h), (o, cl)
        if not touching and o[5] > 0.5:  # round objects: the clearance is the exact gap
            gap = np.min(np.hypot(*(grid[in_swept] - o[:2]).T)) - o[3]
            assert abs(gap - cl) < 0.004


def test_swept_prefilter_py_func_agrees():
    obbs = np.array([[0.3, 0.0, 0.0, 0.03, 0.03, 0.0], [0.3, 0.2, 0.3, 0.03, 0.02, 1.0]])
    car = np.array([0.0, 0.0, 0.08, 0.05])
    a = swept_obb_prefilter(car, 0.0, 0.4, obbs)
    b = swept_obb_prefilter.py_func(car, 0.0, 0.4, obbs)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], b[1])
    assert a[0].tolist() == [True, False]
    assert abs(a[1][1] - (0.2 - 0.05 - 0.03)) < 1e-12
