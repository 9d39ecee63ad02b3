"""Geometry kernels of core.sim.highway against their NumPy references and hand-made cases."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.sim.highway import geometry as g

ROAD = np.array(
    [
        [0.0, 500.0, 0.0, 4.0, 0],  # lane 0
        [0.0, 500.0, 4.0, 4.0, 1],  # lane 1
        [0.0, 200.0, 8.0, 4.0, 2],  # lane 2 drops at x = 200
        [200.0, 300.0, 8.0, 4.0, 2],  # ... but continues: a split segment
        [300.0, 350.0, -4.0, 4.0, -1],  # an exit ramp below lane 0, from 300 to 350
    ]
)


def _random_boxes(rng, n, spread=6.0):
    boxes = np.empty((n, 5))
    boxes[:, 0] = rng.uniform(-spread, spread, n)
    boxes[:, 1] = rng.uniform(-spread, spread, n)
    boxes[:, 2] = rng.uniform(-np.pi, np.pi, n)
    boxes[:, 3] = rng.uniform(0.5, 12.0, n)
    boxes[:, 4] = rng.uniform(0.5, 3.0, n)
    return boxes


def test_corners_of_axis_aligned_box():
    corners = g.box_corners(np.array([1.0, 2.0, 0.0, 4.0, 2.0]))
    np.testing.assert_allclose(corners, [[3, 3], [-1, 3], [-1, 1], [3, 1]])
    turned = g.box_corners(np.array([0.0, 0.0, np.pi / 2, 4.0, 2.0]))
    np.testing.assert_allclose(turned[g.FRONT_LEFT], [-1, 2], atol=1e-12)


def test_overlap_kernel_matches_reference_on_random_boxes():
    rng = np.random.default_rng(0)
    a, b = _random_boxes(rng, 20000), _random_boxes(rng, 20000)
    ours, ref = g.boxes_overlap(a, b), g.boxes_overlap_ref(a, b)
    assert 0.2 < ours.mean() < 0.8  # both outcomes well represented
    np.testing.assert_array_equal(ours, ref)


def test_overlap_known_cases():
    car = np.array([0.0, 0.0, 0.0, 5.0, 2.0])
    cases = [
        ([4.9, 0.0, 0.0, 5.0, 2.0], True),  # bumper to bumper, 0.1 m overlap
        ([5.1, 0.0, 0.0, 5.0, 2.0], False),
        ([0.0, 2.1, 0.0, 5.0, 2.0], False),  # side by side, 0.1 m apart
        ([0.0, 1.9, 0.0, 5.0, 2.0], True),
        # a rotated box whose bounding boxes overlap but the boxes do not (only a face normal of b separates)
        ([4.0, -1.5, np.pi / 4, 5.0, 0.4], False),
        ([3.0, 0.0, np.pi / 4, 5.0, 0.4], True),
    ]
    for other, expected in cases:
        other = np.array(other)
        assert bool(g.boxes_overlap(car, other)) is expected, other
        assert bool(g.boxes_overlap_ref(car, other)) is expected, other
        assert bool(g.boxes_overlap(other, car)) is expected, other  # symmetric


def test_overlap_broadcasts():
    ego = np.array([0.0, 0.0, 0.0, 5.0, 2.0])
    others = np.array([[3.0, 0.0, 0.0, 5.0, 2.0], [30.0, 0.0, 0.0, 5.0, 2.0]])
    np.testing.assert_array_equal(g.boxes_overlap(ego[None, None], others[None]), [[True, False]])


def test_pairwise_overlap_matches_reference_and_skips_absent():
    rng = np.random.default_rng(1)
    boxes = _random_boxes(rng, 40, spread=15.0)
    present = rng.random(40) < 0.8
    ours = g.pairwise_overlap(boxes, present)
    np.testing.assert_array_equal(ours, g.pairwise_overlap_ref(boxes, present))
    assert ours.any()
    assert not ours[~present].any() and not ours[:, ~present].any()
    assert not ours.diagonal().any()


def test_segment_hits_box_matches_reference():
    rng = np.random.default_rng(2)
    n = 20000
    boxes = _random_boxes(rng, n)
    p0 = rng.uniform(-6, 6, (n, 2))
    p1 = p0 + rng.uniform(-4, 4, (n, 2))
    ours = np.array([g.segment_hits_box(*p0[i], *p1[i], *boxes[i]) for i in range(n)])
    ref = g.segment_hits_box_ref(p0, p1, boxes)
    assert 0.05 < ours.mean() < 0.95
    np.testing.assert_array_equal(ours, ref)
    # a segment passing beside a corner (bounding-box test alone would say "hit")
    assert not g.segment_hits_box(2.0, 1.8, 3.5, 0.5, 0.0, 0.0, 0.0, 5.0, 2.0)
    assert g.segment_hits_box(2.0, 0.8, 3.5, 0.5, 0.0, 0.0, 0.0, 5.0, 2.0)


def test_points_on_road():
    pts = np.array([[10.0, 0.0], [10.0, 9.9], [10.0, 10.1], [250.0, 8.0], [320.0, -5.0], [360.0, -5.0], [-1.0, 0.0]])
    expected = [True, True, False, True, True, False, False]
    np.testing.assert_array_equal(g.points_on_road(pts, ROAD), expected)
    np.testing.assert_array_equal(g.points_on_road_ref(pts, ROAD), expected)


def test_boxes_on_road_matches_reference_and_corners_rule():
    rng = np.random.default_rng(3)
    boxes = _random_boxes(rng, 5000)
    boxes[:, 0] = rng.uniform(-10, 520, 5000)
    boxes[:, 1] = rng.uniform(-8, 12, 5000)
    boxes[:, 2] *= 0.3
    ours = g.boxes_on_road(boxes, ROAD)
    np.testing.assert_array_equal(ours, g.boxes_on_road_ref(boxes, ROAD))
    assert 0.2 < ours.mean() < 0.9
    # a car centred in lane 2 with its left side 0.1 m over the road edge
    assert not g.boxes_on_road(np.array([50.0, 9.1, 0.0, 5.0, 2.0]), ROAD)
    assert g.boxes_on_road(np.array([50.0, 8.9, 0.0, 5.0, 2.0]), ROAD)
    # straddling lanes 0 and 1 is on the road (the union of segments)
    assert g.boxes_on_road(np.array([50.0, 2.0, 0.0, 5.0, 2.0]), ROAD)


def test_lane_end_ahead_follows_continuing_segments():
    assert g.lane_end_ahead(10.0, 8.0, ROAD) == 300.0  # lane 2 continues through the split at 200
    assert g.lane_end_ahead(10.0, 0.0, ROAD) == 500.0
    assert g.lane_end_ahead(310.0, -4.0, ROAD) == 350.0
    assert g.lane_end_ahead(10.0, 20.0, ROAD) == -np.inf
    rng = np.random.default_rng(4)
    for x, y in zip(rng.uniform(-5, 510, 300), rng.uniform(-7, 11, 300)):
        assert g.lane_end_ahead(x, y, ROAD) == g.lane_end_ahead_ref(x, y, ROAD)


def test_overruns_lane_end():
    # front bumper at 302 in lane 2 (which ends at 300): overrun
    assert g.overruns_lane_end(299.5, 8.0, 0.0, 5.0, ROAD)
    assert not g.overruns_lane_end(296.0, 8.0, 0.0, 5.0, ROAD)
    # lane 1 goes on: no overrun at the same x
    assert not g.overruns_lane_end(299.5, 4.0, 0.0, 5.0, ROAD)
    # leaving sideways is not a lane-end overrun
    assert not g.overruns_lane_end(100.0, 9.5, np.pi / 2, 5.0, ROAD)


@pytest.mark.parametrize("dt", [0.0, 0.3, 1.0])
def test_extrapolate_cv_kernel_matches_numpy(dt):
    rng = np.random.default_rng(5)
    boxes = _random_boxes(rng, 50)
    speeds = rng.uniform(-30, 30, (50, 2))
    ref = g.extrapolate_cv(boxes, speeds, dt)
    out = np.empty(5)
    for i in range(50):
        g.extrapolate_cv_into(boxes[i], speeds[i, 0], speeds[i, 1], dt, out)
        np.testing.assert_allclose(out, ref[i], rtol=0, atol=1e-12)
    np.testing.assert_allclose(ref[:, :2], boxes[:, :2] + speeds * dt)
    np.testing.assert_array_equal(ref[:, 2:], boxes[:, 2:])


def test_extrapolate_cv_over_several_offsets():
    box = np.array([[0.0, 0.0, 0.0, 5.0, 2.0]])
    out = g.extrapolate_cv(box[:, None, :], np.array([[[10.0, 1.0]]]), np.array([0.0, 0.5, 1.0]))
    assert out.shape == (1, 3, 5)
    np.testing.assert_allclose(out[0, :, 0], [0, 5, 10])
    np.testing.assert_allclose(out[0, :, 1], [0, 0.5, 1])
