"""Scenario specs: every family generates what it promises; bad specs name the key."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.errors import DataError
from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway import scenarios
from methodkit.core.sim.highway.road import validate_segments
from methodkit.core.sim.highway.state import DRIVER_FIELDS


def one(family, **params):
    scenes, ids, configs = scenarios.generate({"family": family, "count": 1, "seed": 2, "params": params})
    return scenes[0]


def test_families_build_their_roads():
    merge = one("merge", merge_x=300.0)
    assert merge.road.n_lanes == 4 and merge.road.segments[3, 1] == 300.0 and merge.road.lane_ends(3)
    assert merge.y[0] == merge.road.lane_y(3)  # the ego starts on the ramp
    drop = one("lane-drop", lanes=4, drop_x=500.0)
    assert drop.road.segments[3, 1] == 500.0 and drop.road.lane_ends(3) and drop.y[0] == drop.road.lane_y(3)
    ex = one("exit", exit_x=700.0, ramp_length=120.0)
    assert ex.road.wants_exit and ex.road.exit_lane == 3 and ex.road.route_end == 820.0 and not ex.road.lane_ends(3)
    stop = one("stopped-vehicle", obstacle="truck", obstacle_x=200.0)
    obstacle = np.flatnonzero(stop.kind == K.OBSTACLE)
    assert obstacle.size == 1 and stop.length[obstacle[0]] == 12.0 and stop.x[obstacle[0]] - stop.x[0] == 200.0
    assert one("empty-road").n == 1
    cut = one("cut-in", gap=10.0)
    fields = dict(zip(DRIVER_FIELDS, cut.drivers[1], strict=True))
    assert (fields["T"], fields["politeness"], fields["gain"]) == (0.8, 0.0, 0.0)  # the aggressive cutter
    assert cut.x[1] - cut.x[0] == 10.0 and abs(cut.y[1] - cut.y[0]) == 4.0
    jam = one("jam", jam_speed=2.0, jam_x=400.0)
    assert np.all(jam.target_speed[1:][jam.x[1:] >= jam.x[0] + 400.0] == 2.0)
    trucks = one("cruise-dense", truck_fraction=1.0)
    assert np.all(trucks.length[1:] == 12.0)
    for scene in (merge, drop, ex, stop, cut, jam, trucks):
        validate_segments(scene.road.segments)


def test_same_seed_same_scene_other_entries_do_not_matter():
    a, _, _ = scenarios.generate({"seed": 9, "scenes": [{"family": "merge", "count": 2}]})
    b, _, _ = scenarios.generate(
        {"seed": 9, "scenes": [{"family": "merge", "count": 2}, {"family": "jam", "count": 3}]}
    )
    np.testing.assert_array_equal(a[1].x, b[1].x)
    c, _, _ = scenarios.generate({"seed": 10, "scenes": [{"family": "merge", "count": 2}]})
    assert not np.array_equal(a[1].x, c[1].x)


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ({"family": "roundabout"}, "spec.family: unknown family 'roundabout'"),
        ({"family": "merge", "params": {"lane": 3}}, "spec.params: unknown parameter 'lane' for merge"),
        ({"family": "merge", "params": {"lanes": 0}}, "spec.params.lanes = 0 is out of range [1, 6]"),
        ({"family": "jam", "params": {"density": 0}}, "spec.params.density = 0 is out of range"),
        ({"family": "cruise-dense", "params": {"density": -1.0}}, "spec.params.density = -1.0 is out of range"),
        ({"family": "merge", "params": {"merge_x": "far"}}, "spec.params.merge_x must be a finite number"),
        ({"family": "lane-drop", "params": {"lanes": 1}}, "spec.params.lanes = 1 is out of range [2, 6]"),
        ({"family": "stopped-vehicle", "params": {"obstacle": "cow"}}, "spec.params.obstacle = 'cow' is not one of"),
        ({"family": "exit", "params": {"ego_lane": 5}}, "spec.params.ego_lane = 5 is not a lane"),
        ({"family": "merge", "count": 0}, "spec.count must be an integer in [1, 100000]"),
        ({"scenes": [{"family": "merge"}, {"count": 2}]}, "spec.scenes[1]: missing key 'family'"),
        ({"scenes": [{"family": "merge", "params": {"speed_limit": 90}}]}, "spec.scenes[0].params.speed_limit = 90"),
        ({"family": "merge", "colour": 1}, "spec: unknown key 'colour'"),
        ([1, 2], "spec: a scenario spec must be a JSON object"),
        ({"family": "merge", "params": {"lane_width": float("nan")}}, "spec.params.lane_width must be a finite number"),
    ],
)
def test_bad_specs_name_the_key(spec, fragment):
    with pytest.raises(DataError, match=None) as info:
        scenarios.generate(spec)
    assert fragment in info.value.message, info.value.message


@pytest.mark.parametrize(
    "segments, fragment",
    [
        ([[0, 100, 0, 4, 0], [0, 100, 4, -4, 1]], "row 1 has width <= 0"),
        ([[0, 100, 0, 4, 0], [50, 10, 4, 4, 1]], "row 1 has x_end <= x_start"),
        ([[0, 100, 0, 4, 0], [0, 100, 4, 4, 3]], "lane indices must be 0..1"),
        ([[0, 100, float("nan"), 4, 0]], "row 0 is not finite"),
        ([[0, 100, 0, 4]], "segments must have shape [S, 5]"),
    ],
)
def test_bad_segments(segments, fragment):
    with pytest.raises(DataError) as info:
        validate_segments(segments)
    assert fragment in info.value.message
