"""Closed-loop route metrics on hand-made episode records."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.errors import DataError
from methodkit.core.sim.highway import events as ev
from methodkit.core.sim.highway import metrics as m

DT = 0.2


def record(ego_x, events=(), traffic_speed=25.0, ego_y=None, heading=None):
    """An episode: the ego along ego_x (one value per step), one car in the next lane at traffic_speed."""
    ego_x = np.asarray(ego_x, dtype=float)
    n = len(ego_x)
    boxes = np.zeros((n, 2, 5))
    boxes[:, :, 3:] = [5.0, 2.0]
    boxes[:, 0, 0] = ego_x
    boxes[:, 0, 1] = 0.0 if ego_y is None else ego_y
    boxes[:, 0, 2] = 0.0 if heading is None else heading
    boxes[:, 1, 0] = ego_x[0] + 10.0 + traffic_speed * DT * np.arange(n)
    boxes[:, 1, 1] = 4.0
    return {
        "boxes": boxes,
        "present": np.ones((n, 2), dtype=bool),
        "events": np.array(events, dtype=np.int64).reshape(-1, 3),
        "dt": DT,
        "route": np.array([0.0, 200.0]),
    }


def cruise(speed=20.0, steps=51):
    return speed * DT * np.arange(steps)


def test_clean_completed_route():
    r = m.route_metrics(record(cruise(), [(50, ev.ROUTE_COMPLETED, -1)]))
    assert r.rc == 100.0 and r.penalty == 1.0 and r.ds == 100.0 and r.success
    assert r.comfort == 1.0
    assert r.efficiency == pytest.approx(80.0)  # 20 m/s against traffic at 25 m/s
    assert r.ended_by == "route_completed" and r.ended_at_s == pytest.approx(10.0)


def test_collisions_multiply_their_coefficients():
    events = [(10, ev.COLLISION_VEHICLE, 1), (30, ev.COLLISION_OBSTACLE, 3), (50, ev.ROUTE_COMPLETED, -1)]
    r = m.route_metrics(record(cruise(), events))
    assert r.penalty == pytest.approx(0.60 * 0.65)
    assert r.ds == pytest.approx(100 * 0.60 * 0.65)
    assert not r.success
    assert r.infractions == {"collision_vehicle": 1, "collision_obstacle": 1, "off_road": 0, "lane_end_overrun": 0}


def test_a_continuing_contact_counts_once_and_a_new_one_later_again():
    touching = [(t, ev.COLLISION_VEHICLE, 1) for t in range(10, 15)]  # five steps of one contact
    within_5s = [(20, ev.COLLISION_VEHICLE, 1)]  # 2 s later, same car: CARLA ignores it
    later = [(45, ev.COLLISION_VEHICLE, 1)]  # 7 s after the first: counted
    other_car = [(21, ev.COLLISION_VEHICLE, 2)]
    r = m.route_metrics(record(cruise(), touching + within_5s + later + other_car))
    assert r.infractions["collision_vehicle"] == 3
    assert r.penalty == pytest.approx(0.6**3)


def test_off_road_and_lane_end_overrun():
    events = [(5, ev.OFF_ROAD, 0), (6, ev.OFF_ROAD, 0), (20, ev.OFF_ROAD, 0), (40, ev.LANE_END_OVERRUN, 0)]
    r = m.route_metrics(record(cruise(), events))
    assert r.infractions["off_road"] == 2 and r.infractions["lane_end_overrun"] == 1
    assert r.penalty == pytest.approx(0.65**3)
    assert r.rc == 100.0  # the ego reached x = 200 at the last step without a completion event


def test_missed_exit_ends_the_route():
    # the ego passes the exit at step 25 (x = 100): RC = 50 %, and the collision after it does not count
    events = [(25, ev.MISSED_EXIT, 0), (30, ev.COLLISION_VEHICLE, 1)]
    r = m.route_metrics(record(cruise(), events))
    assert r.rc == pytest.approx(50.0) and r.penalty == 1.0 and r.ds == pytest.approx(50.0)
    assert r.ended_by == "missed_exit" and not r.success


def test_timeout_freezes_progress():
    r = m.route_metrics(record(cruise(speed=5.0), [(50, ev.TIMEOUT, -1)]))
    assert r.rc == pytest.approx(25.0) and r.ended_by == "timeout"


def test_harsh_braking_is_uncomfortable():
    t = DT * np.arange(51)
    speed = np.where(t < 4.0, 25.0, np.maximum(25.0 - 8.0 * (t - 4.0), 0.0))
    x = np.concatenate([[0.0], np.cumsum(0.5 * (speed[1:] + speed[:-1]) * DT)])
    r = m.route_metrics(record(x))
    assert 0.0 < r.comfort < 1.0  # the windows around the braking fail, the cruise before it does not


def test_weaving_is_uncomfortable():
    t = DT * np.arange(51)
    y = 1.5 * np.sin(2.0 * t)  # lateral acceleration 6 m/s^2 > 4.89
    r = m.route_metrics(record(cruise(), ego_y=y, heading=np.arctan2(3.0 * np.cos(2.0 * t), 20.0)))
    assert r.comfort == 0.0


def test_summary_over_routes():
    good = m.route_metrics(record(cruise(), [(50, ev.ROUTE_COMPLETED, -1)]))
    crash = m.route_metrics(record(cruise(), [(10, ev.COLLISION_VEHICLE, 1), (50, ev.ROUTE_COMPLETED, -1)]))
    missed = m.route_metrics(record(cruise(), [(25, ev.MISSED_EXIT, 0)]))
    s = m.summarize([good, crash, missed])
    assert s["ds"] == pytest.approx((100 + 60 + 50) / 3)
    assert s["sr"] == pytest.approx(100 / 3)
    assert s["rc"] == pytest.approx((100 + 100 + 50) / 3)
    assert s["infractions"]["collision_vehicle"] == 1


def test_efficiency_is_nan_without_traffic():
    rec = record(cruise())
    rec["present"][:, 1] = False
    assert np.isnan(m.route_metrics(rec).efficiency)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r.pop("route"), "missing key 'route'"),
        (lambda r: r.update(route=np.array([5.0, 1.0])), "x_end > x_start"),
        (lambda r: r.update(present=np.ones((3, 2), bool)), "do not match"),
        (lambda r: r.update(dt=0.0), "dt must be positive"),
    ],
)
def test_bad_records(mutate, message):
    rec = record(cruise())
    mutate(rec)
    with pytest.raises(DataError, match=message):
        m.route_metrics(rec)
