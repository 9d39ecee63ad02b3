"""The featurisation kernel against its per-scene NumPy reference, and its graph invariants."""

from __future__ import annotations

import numpy as np

from methodkit.tools.autoscale import features as F
from methodkit.tools.autoscale import kernels as KF


def _random_scenes(rng, n=40, k=10, s=4):
    lanes = np.zeros((n, s, 5))
    mask = np.zeros((n, s), dtype=bool)
    for i in range(n):
        m = rng.integers(1, s + 1)
        for q in range(m):
            lanes[i, q] = [rng.uniform(-50, 50), rng.uniform(150, 600), 4.0 * q, 4.0, q]
        mask[i, :m] = True
        lanes[i, m:] = np.nan  # padding is never read
    ego = np.zeros((n, 8))
    ego[:, 0] = rng.uniform(0, 100, n)
    ego[:, 1] = 4.0 * rng.integers(0, 3, n) + rng.normal(0, 0.5, n)
    ego[:, 3] = rng.uniform(0, 35, n)
    ego[:, 5:7] = [5.0, 2.0]
    agents = np.zeros((n, k, 8))
    agents[..., 0] = ego[:, None, 0] + rng.uniform(-120, 120, (n, k))
    agents[..., 1] = 4.0 * rng.integers(0, 4, (n, k)) + rng.normal(0, 0.8, (n, k))
    agents[..., 3] = rng.uniform(0, 35, (n, k))
    agents[..., 4] = rng.normal(0, 1, (n, k))
    agents[..., 5] = rng.choice([1.5, 5.0, 12.0], (n, k))
    agents[..., 7] = rng.choice([1.0, 2.0], (n, k))
    agents[:, 3, 0] = agents[:, 2, 0]  # equal distances: the stable order must agree
    agents[:, 3, 1] = agents[:, 2, 1]
    agent_mask = rng.uniform(size=(n, k)) < 0.8
    agents[~agent_mask] = np.nan
    noise = rng.normal(0, 0.3, (n, k, 4))
    return {"ego": ego, "agents": agents, "agent_mask": agent_mask, "lanes": lanes, "lane_mask": mask,
            "obs_noise": noise}  # fmt: skip


def test_kernel_equals_numpy_reference_on_random_scenes():
    arrays = _random_scenes(np.random.default_rng(0))
    ours = F.featurise(arrays, n_agents=8)
    ref = F.featurise_ref(arrays, n_agents=8)
    for key in ours:
        np.testing.assert_array_equal(ours[key], ref[key], err_msg=key)
    assert ours["edges"][..., 0].sum() > 100 and ours["grid"].sum() > 100


def test_kernel_equals_reference_on_simulated_pool(small_pools):
    _, arrays, _ = small_pools
    sub = F.subset(arrays["synth"], np.arange(60))
    ours, ref = F.featurise(sub), F.featurise_ref(sub)
    for key in ours:
        np.testing.assert_array_equal(ours[key], ref[key], err_msg=key)


def test_graph_invariants(small_pools):
    _, arrays, _ = small_pools
    g = F.featurise(arrays["real"])
    present = g["nodes"][..., 0] > 0
    assert present[:, 0].all()  # the ego node
    # agents nearest first
    d = np.hypot(g["nodes"][..., 1] * KF.RADIUS, g["nodes"][..., 2] * 10)
    for i in range(len(d)):
        m = present[i, 1:]
        assert np.all(np.diff(d[i, 1:][m]) >= -1e-9)
    # edges only between present nodes, never to self, antisymmetric dx
    e = g["edges"]
    assert not e[..., 0][:, np.arange(13), np.arange(13)].any()
    both = present[:, :, None] & present[:, None, :]
    assert not (e[..., 0].astype(bool) & ~both).any()
    np.testing.assert_allclose(e[..., 1], -np.swapaxes(e[..., 1], 1, 2))
    # every present node sits on exactly one lane node
    assert np.all(g["member"][present].sum(-1) == 1)


def test_ttc_known_answers():
    # 20 m centre gap, two 5 m cars: 15 m free; closing at 5 m/s -> 3 s; opening -> the cap
    assert KF._ttc.py_func(20.0, 5.0, 5.0, 5.0) == 3.0
    assert KF._ttc.py_func(20.0, -1.0, 5.0, 5.0) == KF.TTC_CAP
    assert KF._ttc.py_func(4.0, 1.0, 5.0, 5.0) == 0.0


def test_augment_mirror_keeps_lane_structure():
    rng = np.random.default_rng(1)
    arrays = _random_scenes(rng, n=30)
    arrays["lanes"][~arrays["lane_mask"]] = 0.0
    aug = F.augment(arrays, np.random.default_rng(2))
    lm = arrays["lane_mask"]
    # the set of lane centres is mirrored into itself
    for i in range(30):
        a = np.sort(arrays["lanes"][i, lm[i], 2])
        b = np.sort(aug["lanes"][i, lm[i], 2])
        assert np.allclose(a, b) or np.allclose(a, a.max() + a.min() - b[::-1])
    assert (aug["agent_mask"] <= arrays["agent_mask"]).all()
