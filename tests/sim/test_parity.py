"""IDM, MOBIL, the controllers and the bicycle equal highway-env 1.12.1's on 10k random configurations (1e-9)."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway import road as roads
from methodkit.core.sim.highway.state import DRIVER_FIELDS, SceneInit, driver_row, pack

hw_backend = pytest.importorskip("methodkit.core.sim.highway.highway_env_backend")
pytest.importorskip("highway_env")

N_CONFIGS = 10_000


def random_config(rng: np.random.Generator) -> SceneInit:
    """An ego and up to six neighbours (front/rear in its lane and both side lanes), every parameter random."""
    lanes = int(rng.integers(2, 5))
    road = roads.straight(lanes, 4.0, 2000.0, 30.0)
    ego_lane = int(rng.integers(lanes))
    v = rng.uniform(0.0, 38.0)
    rows = [(500.0, ego_lane * 4.0 + rng.uniform(-0.6, 0.6), rng.uniform(-0.05, 0.05), v)]
    for lane in (ego_lane - 1, ego_lane, ego_lane + 1):
        if not 0 <= lane < lanes:
            continue
        for sign in (1.0, -1.0):
            if rng.uniform() < 0.75:
                gap = rng.uniform(0.5, 120.0)  # centre distance: the (v, gap, dv, lane) of the issue
                dv = rng.uniform(-15.0, 15.0)
                rows.append((500.0 + sign * gap, lane * 4.0 + rng.uniform(-0.6, 0.6), rng.uniform(-0.05, 0.05), v + dv))
    n = len(rows)
    drivers = np.stack(
        [
            driver_row(
                {
                    "a": rng.uniform(1.0, 4.0),
                    "b": rng.uniform(3.0, 7.0),
                    "s0": rng.uniform(5.0, 15.0),
                    "T": rng.uniform(0.5, 2.5),
                    "delta": rng.uniform(3.5, 4.5),
                    "politeness": rng.uniform(0.0, 1.0),
                    "gain": rng.uniform(0.0, 0.5),
                    "brake": rng.uniform(1.0, 5.0),
                }
            )
            for _ in range(n)
        ]
    )
    arr = np.array(rows)
    return SceneInit(
        road=road,
        x=arr[:, 0],
        y=arr[:, 1],
        heading=arr[:, 2],
        speed=arr[:, 3],
        length=np.full(n, 5.0),
        width=np.full(n, 2.0),
        kind=np.full(n, K.CAR, dtype=np.int8),
        target_speed=rng.uniform(10.0, 40.0, n),
        drivers=drivers,
        timer=np.full(n, 1.5),  # past LANE_CHANGE_DELAY: MOBIL decides at this act()
    )


def ours(state, name, *args):
    s = state
    if name == "neighbours":
        return K.neighbours(s.veh, s.kind, s.lanes_t, s.road_i, s.road_f, 0, *args)
    if name == "idm":
        return K.idm_pair(s.veh, s.kind, s.lanes_t, s.road_f, 0, *args)
    if name == "mobil":
        return K.mobil(s.veh, s.kind, s.lanes, s.lanes_t, s.road_i, s.road_f, 0, *args)
    raise KeyError(name)


def test_idm_mobil_and_act_equal_highway_env():
    rng = np.random.default_rng(2024)
    worst = 0.0
    mobil_checked = 0
    for _ in range(N_CONFIGS):
        scene = random_config(rng)
        state = pack([scene])
        road, vs = hw_backend.build(scene, "idm")
        ego = vs[0]
        index = {id(v): k for k, v in enumerate(vs)}
        cur = int(state.lanes[0, K.CUR, 0])
        assert ego.lane_index[2] == cur
        for lane in range(scene.road.n_lanes):
            f_hw, r_hw = road.neighbour_vehicles(ego, ("a", "b", lane))
            f, r = ours(state, "neighbours", 0, lane)
            assert (index.get(id(f_hw), -1), index.get(id(r_hw), -1)) == (f, r)
            # IDM of the ego behind its front vehicle in every lane, and of the rear one behind the ego
            a_hw = ego.acceleration(ego_vehicle=ego, front_vehicle=f_hw)
            worst = max(worst, abs(a_hw - ours(state, "idm", 0, 0, f, lane)))
            a_hw = ego.acceleration(ego_vehicle=r_hw, front_vehicle=ego)
            worst = max(worst, abs(a_hw - ours(state, "idm", 0, r, 0, lane)))
        for lane in road.network.side_lanes(ego.lane_index):
            brake = state.veh[0, K.BRAKE, 0]
            assert ego.mobil(lane) == ours(state, "mobil", 0, lane[2], state.veh[0, K.POLITE, 0], -1, brake)
            mobil_checked += 1
        # the whole act() of every vehicle: lane decision, steering, acceleration
        for i, v in enumerate(vs):
            v.act()
            s = state
            K.act_traffic(
                s.veh, s.kind, s.lanes, s.crashed, s.lanes_t, s.road_i, s.road_f, s.rng, 0, i,
                s.veh[0, K.POLITE, i], -1, False,
            )  # fmt: skip
            assert v.target_lane_index[2] == s.lanes[0, K.TGT, i]
            worst = max(worst, abs(v.action["acceleration"] - s.veh[0, K.ACC, i]))
            worst = max(worst, abs(v.action["steering"] - s.veh[0, K.STEER, i]))
        # then Vehicle.step: the kinematic bicycle over one 0.2 s frame
        for i, v in enumerate(vs):
            v.step(0.2)
            K.integrate(state.veh, state.crashed, 0, i, 0.2)
            mine = state.veh[0, [K.X, K.Y, K.H, K.V], i]
            theirs = np.array([v.position[0], v.position[1], v.heading, v.speed])
            worst = max(worst, float(np.abs(mine - theirs).max()))
    assert worst <= 1e-9, worst
    assert mobil_checked > N_CONFIGS


def test_driver_fields_reach_highway_env():
    """Every driver field but the noise maps onto an IDMVehicle constant (a parity test would hide a gap)."""
    assert set(DRIVER_FIELDS) - set(hw_backend.DRIVER_ATTRS) == {"b", "noise"}


@pytest.mark.slow
def test_traffic_statistics_within_5_percent_over_200_episodes():
    stats = hw_backend.traffic_statistics(200)
    for key in ("mean_speed", "lane_change_rate"):
        ours, ref = stats["ours"][key], stats["highway_env"][key]
        assert abs(ours - ref) <= 0.05 * abs(ref), (key, ours, ref)
    assert stats["highway_env"]["lane_change_rate"] > 0


def test_traffic_statistics_match_on_a_few_episodes():
    """The same starts give the same trajectories (the fast form of the slow 200-episode check)."""
    stats = hw_backend.traffic_statistics(2, seconds=10.0)
    assert stats["max_position_diff_m"] < 1e-6
    assert stats["ours"]["mean_speed"] == pytest.approx(stats["highway_env"]["mean_speed"], rel=1e-9)
