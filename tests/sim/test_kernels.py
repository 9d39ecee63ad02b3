"""Kernels against plain NumPy references on random states; batch properties (threads, snapshots, memory)."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.sim.highway import kernels as K
from methodkit.core.sim.highway import scenarios, simulate, vocab
from methodkit.core.sim.highway.state import pack


def idm_numpy(a, b, s0, T, delta, v, h, v_target, v_limit, d, fvx, fvy):
    """IDM written out in NumPy over arrays (the formula of the issue, with highway-env's not_zero)."""

    def not_zero(x):
        return np.where(np.abs(x) > 1e-2, x, np.where(x >= 0, 1e-2, -1e-2))

    target = np.clip(v_target, 0, v_limit)
    acc = a * (1 - (np.maximum(v, 0) / np.abs(not_zero(target))) ** delta)
    dv = (v * np.cos(h) - fvx) * np.cos(h) + (v * np.sin(h) - fvy) * np.sin(h)
    s_star = s0 + v * T + v * dv / (2 * np.sqrt(a * b))
    return acc - a * (s_star / not_zero(d)) ** 2


def test_idm_kernel_matches_numpy():
    rng = np.random.default_rng(0)
    n = 5000
    args = [
        rng.uniform(1, 4, n),
        rng.uniform(2, 7, n),
        rng.uniform(2, 15, n),
        rng.uniform(0.3, 3, n),
        rng.uniform(2, 6, n),
        rng.uniform(-2, 40, n),
        rng.uniform(-0.3, 0.3, n),
        rng.uniform(-5, 45, n),
        np.full(n, 30.0),
        rng.uniform(-5, 150, n),
        rng.uniform(-5, 40, n),
        rng.uniform(-3, 3, n),
    ]
    ref = idm_numpy(*args)
    ours = np.array([K.idm(*(x[i] for x in args[:9]), True, *(x[i] for x in args[9:])) for i in range(n)])
    np.testing.assert_allclose(ours, ref, rtol=1e-12, atol=1e-9)


def observe_numpy(state, k_near=8, max_range=200.0):
    """The observation of kernels.observe_batch written with NumPy per environment."""
    ego = np.zeros((state.batch, 5))
    near = np.zeros((state.batch, k_near, 6))
    for b in range(state.batch):
        v = state.veh[b]
        cur = int(state.lanes[b, K.CUR, 0])
        lane = state.lanes_t[b, cur]
        n_lanes = int(state.road_i[b, K.N_LANES])
        ends = cur != state.road_i[b, K.EXIT_LANE] and lane[1] < state.road_f[b, K.ROAD_END] - 1e-9
        to_end = lane[1] - v[K.X, 0] if ends or cur == state.road_i[b, K.EXIT_LANE] else 200.0
        route = K.route_lane_of(state.veh, state.lanes, state.lanes_t, state.road_i, state.road_f, b, 0)
        delta = 0.0 if route < 0 else route - cur
        features = [v[K.V, 0] / 40, (v[K.Y, 0] - lane[2]) / lane[3], cur / max(n_lanes - 1, 1), to_end / 200, delta / 2]
        ego[b] = np.clip(features, -1, 1)
        dx = v[K.X] - v[K.X, 0]
        dy = v[K.Y] - v[K.Y, 0]
        ok = (state.kind[b] != K.ABSENT) & (dx**2 + dy**2 < max_range**2)
        ok[0] = False
        order = [j for j in np.argsort(np.abs(dx), kind="stable") if ok[j]][:k_near]
        vx, vy = v[K.V] * np.cos(v[K.H]), v[K.V] * np.sin(v[K.H])
        for k, j in enumerate(order):
            near[b, k] = np.clip(
                [1, dx[j] / 200, dy[j] / (4 * lane[3]), (vx[j] - vx[0]) / 80, (vy[j] - vy[0]) / 80, v[K.LEN, j] / 12],
                -1,
                1,
            )
    return ego, near


def _batch(families=("cruise-dense", "merge", "exit", "stopped-vehicle"), count=3, seed=3):
    spec = {"seed": seed, "scenes": [{"family": f, "count": count} for f in families]}
    scenes, _, _ = scenarios.generate(spec)
    return pack(scenes)


def test_observation_matches_numpy_reference():
    state = _batch()
    sim = simulate.Sim(state)
    sim.frames(7)
    ego, near = sim.observe()
    ref_ego, ref_near = observe_numpy(state)
    np.testing.assert_allclose(ego, ref_ego, atol=1e-12)
    np.testing.assert_allclose(near, ref_near, atol=1e-12)
    assert near[:, :, 0].sum() > 0


def test_ego_plans_match_python_reference():
    state = _batch(("empty-road", "cruise-dense"), count=2)
    lane, speed = vocab.targets(state, np.array([1]))
    out = vocab.plans(state, 1, 0.2)
    ref = np.zeros_like(out)
    v = state.veh[1]
    K.ego_plans.py_func(
        v[K.X, 0], v[K.Y, 0], v[K.H, 0], v[K.V, 0], v[K.LEN, 0], state.lanes_t[1, lane[0], K.LY], speed[0], 0.2, 20, ref
    )
    np.testing.assert_allclose(out, ref, atol=1e-12)
    # the keep/+0 plan holds speed and lane; the stop plan ends slower than every other
    assert abs(out[vocab.KEEP, -1, 1] - v[K.Y, 0]) < 1e-6
    assert np.argmin(out[:, -1, 0]) == vocab.EMERGENCY


def test_plan_execution_equals_the_plan_on_an_empty_road():
    """A candidate executed by the ego controller in the simulator follows its plan exactly (no traffic)."""
    state = _batch(("empty-road",), count=2)
    plan = vocab.plans(state, 0, 0.2)
    vocab.apply(state, np.array([12, 12]))
    sim = simulate.Sim(state)
    xs = []
    for _ in range(20):
        sim.frames(1)
        xs.append(state.veh[0, [K.X, K.Y, K.H], 0].copy())
    np.testing.assert_allclose(np.array(xs), plan[12], atol=1e-9)


def _step_bytes(state, parallel):
    s = state.copy()
    sim = simulate.Sim(s)
    sim.frames(60, parallel=parallel)
    return b"".join(a.tobytes() for a in s.arrays())


def test_parallel_kernel_equals_serial_bytes():
    state = _batch(count=4)
    state.veh[:, K.NOISE, 1:] = 0.5  # reaction noise: each environment's own stream
    assert _step_bytes(state, True) == _step_bytes(state, False)


def test_noise_streams_are_per_environment():
    """An environment's noise does not depend on which other environments share its batch."""
    state = _batch(count=4)
    state.veh[:, K.NOISE, 1:] = 0.5
    whole = state.copy()
    simulate.Sim(whole).frames(30)
    alone = state.take([5])
    simulate.Sim(alone).frames(30)
    np.testing.assert_array_equal(whole.veh[5], alone.veh[0])
    quiet = state.copy()
    quiet.veh[:, K.NOISE, 1:] = 0.0
    simulate.Sim(quiet).frames(30)
    assert not np.array_equal(quiet.veh[5], whole.veh[5])


def test_snapshot_restore_roundtrip():
    state = _batch()
    sim = simulate.Sim(state)
    sim.frames(5)
    snap = state.snapshot([2, 7])
    before = state.copy()
    sim.frames(10)
    assert not np.array_equal(state.veh[2], before.veh[2])
    state.restore(snap, [2, 7])
    for mine, theirs in zip(state.arrays(), before.arrays(), strict=True):
        np.testing.assert_array_equal(mine[[2, 7]], theirs[[2, 7]])
    # G copies of one environment stepped together equal the original stepped alone
    group = before.take([2] * 16)
    simulate.Sim(group).frames(20)
    alone = before.take([2])
    simulate.Sim(alone).frames(20)
    for g in range(16):
        np.testing.assert_array_equal(group.veh[g], alone.veh[0])


def test_memory_of_1024_envs_by_32_vehicles_under_10_mb():
    scenes, _, _ = scenarios.generate({"family": "cruise-dense", "count": 1, "params": {"vehicles": 31}})
    state = pack(scenes * 1024, slots=32)
    assert state.veh.shape == (1024, K.N_VFIELDS, 32)
    assert state.nbytes < 10 * 2**20


@pytest.mark.parametrize("family", list(scenarios.FAMILIES))
def test_every_family_runs_under_the_expert(family):
    scenes, ids, _ = scenarios.generate({"family": family, "count": 3, "seed": 5})
    state = pack(scenes)
    simulate.rollout(state, "expert")
    table = simulate.route_table(state, ids)
    assert all(end in ("route_completed", "timeout") for end in table["end"]), table["end"]
