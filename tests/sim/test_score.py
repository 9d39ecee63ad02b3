"""PDM scorer: known answers on hand-made highway scenes and the Numba kernel against the NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.errors import DataError
from methodkit.core.sim.highway import score as sc

DT = 0.1
T1 = 41  # 4 s at 10 Hz plus the current state
ROAD = np.array([[0.0, 500.0, 0.0, 4.0, 0], [0.0, 500.0, 4.0, 4.0, 1], [0.0, 500.0, 8.0, 4.0, 2]])
CAR = (5.0, 2.0)


def straight_plan(x0=50.0, y0=0.0, v=20.0, accel=0.0, t1=T1):
    """Ego states of a plan along +x at speed v with constant acceleration (speed floored at 0)."""
    t = np.arange(t1) * DT
    speed = np.maximum(v + accel * t, 0.0)
    x = x0 + np.concatenate([[0.0], np.cumsum(0.5 * (speed[1:] + speed[:-1]) * DT)])
    ego = np.zeros((t1, 7))
    ego[:, sc.EGO_X], ego[:, sc.EGO_Y], ego[:, sc.EGO_VLON] = x, y0, speed
    ego[:, sc.EGO_ALON] = np.where(speed > 0, accel, 0.0)
    return ego


def agent_track(x0, y0, vx, vy=0.0, heading=None, size=CAR, steps=T1 + 10):
    """Boxes [A, 5] and speeds [A, 2] of an agent at constant world velocity."""
    t = np.arange(steps) * DT
    heading = np.arctan2(vy, vx) if heading is None else heading
    boxes = np.stack(
        [x0 + vx * t, y0 + vy * t, np.full(steps, heading), np.full(steps, size[0]), np.full(steps, size[1])], -1
    )
    return boxes, np.tile([vx, vy], (steps, 1))


def score_one(ego, tracks=(), static=(), reference=None, road=ROAD):
    """Score one plan in one scene; tracks are (boxes, speeds) pairs."""
    k = max(1, len(tracks))
    steps = tracks[0][0].shape[0] if tracks else 1
    agents = np.zeros((1, k, steps, 5))
    speeds = np.zeros((1, k, steps, 2))
    present = np.zeros((1, k, steps), dtype=bool)
    for i, (boxes, vel) in enumerate(tracks):
        agents[0, i], speeds[0, i], present[0, i] = boxes, vel, True
    is_static = np.zeros((1, k), dtype=bool)
    for i, flag in enumerate(static):
        is_static[0, i] = flag
    ref = ego[-1, 0] - ego[0, 0] if reference is None else reference
    args = (ego[None, None], np.array([CAR]), agents, speeds, present, is_static, road[None], np.array([ref]))
    ours = sc.score_plans(*args, dt=DT)
    x = sc.prepare_inputs(*args[:7], None, args[7], DT)
    ref_scores = sc.score_plans_ref(x)
    for name in sc.METRICS:  # every known-answer case also holds the reference to the kernel
        np.testing.assert_allclose(getattr(ours, name), getattr(ref_scores, name), rtol=0, atol=1e-12, err_msg=name)
    return {name: float(getattr(ours, name)[0, 0]) for name in sc.METRICS}


def test_free_road_scores_one():
    s = score_one(straight_plan(), [agent_track(10.0, 8.0, 20.0)])
    assert s == {
        "nc": 1.0,
        "dac": 1.0,
        "ttc": 1.0,
        "ep": 1.0,
        "comfort": 1.0,
        "pdms": 1.0,
        "progress": pytest.approx(80.0),
    }


def test_head_on_plan_scores_nc_zero():
    # oncoming car in the ego's lane: they meet after 2 s at x = 90
    s = score_one(straight_plan(), [agent_track(130.0, 0.0, -20.0)])
    assert s["nc"] == 0.0 and s["ttc"] == 0.0 and s["pdms"] == 0.0


def test_plan_leaving_the_road_scores_dac_zero():
    ego = straight_plan()
    ego[:, sc.EGO_Y] = np.linspace(0.0, -4.0, T1)  # drifts 4 m to the right of lane 0 (edge at -2)
    s = score_one(ego)
    assert s["dac"] == 0.0 and s["nc"] == 1.0 and s["pdms"] == 0.0
    assert s["ep"] == 0.0  # progress is gated by NC x DAC


def test_static_object_collision_scores_half():
    # debris 1 x 1 m in the ego's lane at x = 100: NC = 1/2, TTC = 0, EP = 40 / 80 = 1/2
    debris = agent_track(100.0, 0.0, 0.0, heading=0.0, size=(1.0, 1.0))
    s = score_one(straight_plan(), [debris], static=[True], reference=80.0)
    assert s["nc"] == 0.5 and s["ttc"] == 0.0 and s["ep"] == 0.5 and s["comfort"] == 1.0
    assert s["pdms"] == pytest.approx(0.5 * (5 * 0 + 5 * 0.5 + 2 * 1) / 12)


def test_stopped_vehicle_collision_scores_zero():
    # a stopped car is an agent (NC = 0), and a collision with a stopped track is at fault
    s = score_one(straight_plan(), [agent_track(100.0, 0.0, 0.0, heading=0.0)])
    assert s["nc"] == 0.0 and s["pdms"] == 0.0


def test_stationary_safe_plan():
    ego = straight_plan(v=0.0)
    traffic = [agent_track(0.0, 4.0, 25.0), agent_track(60.0, 8.0, 15.0)]
    s = score_one(ego, traffic, reference=0.0)  # reference under 5 m: EP = 1
    assert s == {"nc": 1.0, "dac": 1.0, "ttc": 1.0, "ep": 1.0, "comfort": 1.0, "pdms": 1.0, "progress": 0.0}
    s = score_one(ego, traffic, reference=60.0)  # the reference moved 60 m: no progress scores EP = 0
    assert s["ep"] == 0.0 and s["pdms"] == pytest.approx(7.0 / 12.0)


def test_rear_end_by_another_car_is_not_at_fault():
    # stopped ego hit from behind (stopped-ego collision) and moving ego hit by a faster car (rear collision)
    s = score_one(straight_plan(v=0.0), [agent_track(30.0, 0.0, 15.0)], reference=0.0)
    assert s["nc"] == 1.0 and s["ttc"] == 1.0
    s = score_one(straight_plan(v=10.0), [agent_track(30.0, 0.0, 25.0)])
    assert s["nc"] == 1.0
    # NAVSIM's TTC compares the agent's position 0.9 s later with the ego's pose now: the replayed car,
    # which drives through the ego, is then ahead of it, so TTC = 0 even though NC holds the ego blameless
    assert s["ttc"] == 0.0


def test_lateral_collision_at_fault_only_when_ego_straddles_lanes():
    # a car drifting into the ego's lane from the left, side by side
    # (its front 1 m behind the ego's front bumper, so the bumper does not touch it)
    car = agent_track(49.0, 3.2, 20.0, vy=-0.5, heading=0.0)
    s = score_one(straight_plan(), [car])
    assert s["nc"] == 1.0  # ego inside lane 0: the side-swipe is the other car's fault
    s = score_one(straight_plan(y0=1.5), [agent_track(49.0, 4.7, 20.0, vy=-0.5, heading=0.0)])
    assert s["nc"] == 0.0  # ego over the lane marking at y = 2 (in two lanes): at fault


def test_ttc_catches_a_near_miss_ahead():
    # a slower car 12 m ahead (bumper gap 7 m) that the ego passes within 0.9 s of time-to-collision,
    # then changes away from: no collision, TTC = 0
    ego = straight_plan(v=20.0)
    ego[:, sc.EGO_Y] = np.clip((np.arange(T1) - 2) * 0.5, 0.0, 4.0)
    ego[:, sc.EGO_HEADING] = 0.0
    lead = agent_track(62.0, 0.0, 12.0)
    s = score_one(ego, [lead])
    assert s["nc"] == 1.0 and s["ttc"] == 0.0


@pytest.mark.parametrize(
    "case",
    ["hard_brake", "hard_accel", "lat_accel", "yaw_rate", "jerk"],
)
def test_comfort_violations(case):
    ego = straight_plan(v=20.0)
    t = np.arange(T1) * DT
    if case == "hard_brake":
        ego = straight_plan(v=20.0, accel=-5.0)
    elif case == "hard_accel":
        ego = straight_plan(v=10.0, accel=3.0)
    elif case == "lat_accel":
        ego[:, sc.EGO_ALAT] = 5.5
    elif case == "yaw_rate":
        ego = straight_plan(y0=4.0)
        ego[:, sc.EGO_HEADING] = 1.0 * t  # a steady 1 rad/s turn (yaw acceleration 0)
    elif case == "jerk":
        # lon. acc in [-3.6, 2.0] (inside the bounds) but jerk 2 * 1.4 * (t - 2) reaching 5.6 > 4.13; a
        # quadratic passes NAVSIM's whole-window quadratic smoothing unchanged
        ego[:, sc.EGO_ALON] = 1.4 * (t - 2.0) ** 2 - 3.6
    s = score_one(ego, reference=80.0)
    assert s["comfort"] == 0.0
    assert s["pdms"] == pytest.approx((5 * s["ttc"] + 5 * s["ep"]) / 12 * s["nc"] * s["dac"])


def test_comfortable_gentle_plan():
    t = np.arange(T1) * DT
    ego = straight_plan(v=20.0, accel=-1.0)
    ego[:, sc.EGO_ALAT] = 0.5 * np.sin(t)
    ego[:, sc.EGO_HEADING] = 0.05 * np.sin(t)
    assert score_one(ego)["comfort"] == 1.0


def test_kernel_matches_reference_on_random_scenes():
    x = sc.random_inputs(0, n_scenes=30, n_plans=16, n_agents=12)
    ours, want = sc.score_prepared(x), sc.score_plans_ref(x)
    for name in sc.METRICS:
        np.testing.assert_allclose(getattr(ours, name), getattr(want, name), rtol=0, atol=1e-9, err_msg=name)
    # every branch is exercised: all three NC values, both DAC/TTC/comfort values, fractional EP
    assert set(np.unique(ours.nc)) == {0.0, 0.5, 1.0}
    for name in ("dac", "ttc", "comfort"):
        assert set(np.unique(getattr(ours, name))) == {0.0, 1.0}, name
    assert ((ours.ep > 0) & (ours.ep < 1)).any()


def test_dt_of_the_simulator():
    # at 5 Hz the TTC look-ahead is every step to 0.8 s
    assert list(sc.ttc_offsets(0.2)) == [0, 1, 2, 3, 4]
    assert list(sc.ttc_offsets(0.1)) == [0, 3, 6, 9]


def test_plan_states_from_points():
    t = np.arange(21) * 0.2
    points = np.stack([10 + 15 * t + 0.5 * t**2, np.full_like(t, 4.0)], -1)
    states = sc.plan_states(points, 0.2)
    np.testing.assert_allclose(states[:, sc.EGO_HEADING], 0.0, atol=1e-12)
    np.testing.assert_allclose(states[1:-1, sc.EGO_VLON], 15 + t[1:-1], atol=1e-9)
    np.testing.assert_allclose(states[2:-2, sc.EGO_ALON], 1.0, atol=1e-9)
    np.testing.assert_allclose(states[:, sc.EGO_VLAT], 0.0, atol=1e-12)
    still = sc.plan_states(np.zeros((6, 2)), 0.2, heading0=0.7)
    np.testing.assert_allclose(still[:, sc.EGO_HEADING], 0.7)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("ego", np.zeros((1, 1, 41, 6)), "ego has shape"),
        ("ego", np.zeros((1, 1, 3, 7)), "at least 5 states"),
        ("ref", np.array([np.nan]), "reference_progress has a non-finite value at index (0,)"),
        ("agents", "nan", "agents has a non-finite value at index (0, 0, 3, 0)"),
    ],
)
def test_bad_inputs_raise_data_error(field, value, message):
    ego = straight_plan()[None, None]
    boxes, vel = agent_track(100.0, 4.0, 10.0)
    agents, speeds = boxes[None, None].copy(), vel[None, None]
    present = np.ones(agents.shape[:3], dtype=bool)
    ref = np.array([80.0])
    if field == "ego":
        ego = value
    elif field == "ref":
        ref = value
    else:
        agents[0, 0, 3, 0] = np.nan
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        sc.score_plans(ego, np.array([CAR]), agents, speeds, present, np.zeros((1, 1), bool), ROAD[None], ref, dt=DT)


def test_nan_in_an_absent_agent_slot_is_padding():
    ego = straight_plan()[None, None]
    agents = np.full((1, 1, 5, 5), np.nan)
    speeds = np.full((1, 1, 5, 2), np.nan)
    out = sc.score_plans(
        ego,
        np.array([CAR]),
        agents,
        speeds,
        np.zeros((1, 1, 5), bool),
        np.zeros((1, 1), bool),
        ROAD[None],
        np.array([80.0]),
        dt=DT,
    )
    assert out.pdms[0, 0] == 1.0
