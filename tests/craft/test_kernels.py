"""Interaction-critical events: the Numba kernel against the NumPy reference, and hand-made windows."""

from __future__ import annotations

import numpy as np

from methodkit.tools.craft import kernels as KC


def _random(n=200, k=6, t=21, seed=0):
    rng = np.random.default_rng(seed)
    ego = np.zeros((n, t, 5))
    ego[..., 0] = np.cumsum(rng.uniform(3, 6, (n, t)), axis=1)
    switch = rng.integers(1, 2 * t, (n, 1))  # half the windows change lanes at frame `switch`
    ego[..., 1] = np.where(np.arange(t)[None, :] >= switch, 4.0, 0.0) + rng.normal(0, 0.3, (n, t))
    ego[..., 3] = 25 + np.cumsum(rng.normal(0, 0.5, (n, t)), axis=1)
    ego[..., 4] = (ego[..., 1] > 2).astype(float)
    size = np.tile([5.0, 2.0], (n, 1))
    agents = np.zeros((n, k, t, 5))
    agents[..., 0] = ego[:, None, :, 0] + rng.uniform(-40, 40, (n, k, 1)) + np.cumsum(rng.normal(0, 1, (n, k, t)), -1)
    agents[..., 1] = rng.choice([0.0, 4.0, 8.0], (n, k, 1)) + rng.normal(0, 0.5, (n, k, t))
    agents[..., 3] = 5.0
    speed = 25 + np.cumsum(rng.normal(0, 1.2, (n, k, t)), axis=-1)
    present = rng.random((n, k, t)) > 0.1
    collided = rng.random((n, t)) > 0.995
    conflict = rng.random(n) > 0.8
    return ego, size, agents, speed, present, collided, conflict


def test_kernel_equals_reference_on_random_windows():
    args = _random()
    got = KC.critical_events(*args, 0.2)
    want = KC.critical_events_ref(*args, dt=0.2)
    np.testing.assert_array_equal(got, want)
    # every flag is reached by these inputs (the test exercises each branch)
    for bit in KC.CRITICAL_NAMES:
        assert ((got & bit) != 0).any(), KC.CRITICAL_NAMES[bit]
    assert (got == 0).any()


def _calm(t=21):
    ego = np.zeros((1, t, 5))
    ego[0, :, 0] = np.arange(t) * 5.0
    ego[0, :, 3] = 25.0
    agents = np.zeros((1, 1, t, 5))
    agents[0, 0, :, 0] = 100.0 + np.arange(t) * 5.0
    agents[0, 0, :, 1] = 4.0  # next lane
    agents[0, 0, :, 3] = 5.0
    speed = np.full((1, 1, t), 25.0)
    present = np.ones((1, 1, t), dtype=bool)
    return ego, np.array([[5.0, 2.0]]), agents, speed, present, np.zeros((1, t), dtype=bool), np.zeros(1, dtype=bool)


def test_hand_made_windows():
    ego, size, agents, speed, present, collided, conflict = _calm()
    assert KC.critical_events(ego, size, agents, speed, present, collided, conflict, 0.2)[0] == 0
    # ego brakes at -5 m/s^2 for one frame
    e = ego.copy()
    e[0, 5:, 3] -= 1.0
    assert KC.critical_events(e, size, agents, speed, present, collided, conflict, 0.2)[0] == KC.HARD_BRAKE
    # a slower car 12 m ahead in the ego's lane closing at 10 m/s: TTC (12 - 5) / 10 = 0.7 s
    a = agents.copy()
    a[0, 0, :, 1] = 0.0
    a[0, 0, 0, 0] = 12.0
    s = speed.copy()
    s[0, 0, 0] = 15.0
    assert KC.critical_events(ego, size, a, s, present, collided, conflict, 0.2)[0] == KC.LOW_TTC
    # a car 20 m behind in the lane brakes at -4 m/s^2
    a = agents.copy()
    a[0, 0, :, 1] = 0.0
    a[0, 0, :, 0] = ego[0, :, 0] - 20.0
    s = speed.copy()
    s[0, 0, 3:] -= 0.8
    assert KC.critical_events(ego, size, a, s, present, collided, conflict, 0.2)[0] == KC.REAR_BRAKE
    # the ego changes into the lane of a car 8 m behind (gap 3 m < 10 m)
    e = ego.copy()
    e[0, 10:, 1] = 4.0
    e[0, 10:, 4] = 1.0
    a = agents.copy()
    a[0, 0, :, 0] = ego[0, :, 0] - 8.0
    assert KC.critical_events(e, size, a, speed, present, collided, conflict, 0.2)[0] & KC.TIGHT_CHANGE
    c = collided.copy()
    c[0, 7] = True
    assert KC.critical_events(ego, size, agents, speed, present, c, conflict, 0.2)[0] == KC.COLLISION
    assert KC.critical_events(ego, size, agents, speed, present, collided, ~conflict, 0.2)[0] == KC.PROXY_CONFLICT
