"""The planner's optional L2 term on the expert trajectory (--expert-l2): off at weight 0 (the same bytes as
the cross-entropy alone), and a positive weight moves the planner's soft plan toward the expert's."""

from __future__ import annotations

import numpy as np

from methodkit.tools.autoscale import planner as P


def _data(with_plans: bool):
    rng = np.random.default_rng(4)
    n, t = 48, 5
    x = rng.normal(size=(n, 6)).astype(np.float32)
    y = rng.integers(P.N_CANDIDATES, size=n)
    plans = (5 * rng.normal(size=(n, P.N_CANDIDATES, t, 2))).astype(np.float32)
    # the expert drove another candidate than its label (plus noise): the two terms disagree
    expert = plans[np.arange(n), (y + 1) % P.N_CANDIDATES] + 0.1 * rng.normal(size=(n, t, 2)).astype(np.float32)
    half = n // 2
    data = P.TrainData(x[:half], y[:half], x[half:], y[half:])
    if with_plans:
        data.real_plans, data.syn_plans = (plans[:half], expert[:half]), (plans[half:], expert[half:])
    return data, x, plans, expert


def _distance(model, x, plans, expert) -> float:
    import torch

    with torch.no_grad():
        d = P.expert_distance(model(torch.as_tensor(x)), torch.as_tensor(plans), torch.as_tensor(expert))
    return float(d.mean())


def _cfg(weight: float) -> P.PlannerConfig:
    return P.PlannerConfig(hidden=32, steps=40, batch_size=16, lr=1e-2, expert_l2=weight)


def test_weight_zero_is_the_cross_entropy_alone_bit_for_bit():
    import torch

    plain, _ = P.train(_data(False)[0], P.PlannerConfig(hidden=32, steps=40, batch_size=16, lr=1e-2), seed=3)
    off, _ = P.train(_data(True)[0], _cfg(0.0), seed=3)
    for k, v in plain.state_dict().items():
        assert torch.equal(off.state_dict()[k], v), k


def test_positive_weight_pulls_the_soft_plan_toward_the_expert():
    import torch

    data, x, plans, expert = _data(True)
    base, _ = P.train(data, _cfg(0.0), seed=3)
    pulled, _ = P.train(data, _cfg(0.5), seed=3)
    d0, d1 = _distance(base, x, plans, expert), _distance(pulled, x, plans, expert)
    assert d1 < 0.8 * d0, (d0, d1)
    assert not all(torch.equal(pulled.state_dict()[k], v) for k, v in base.state_dict().items())


def test_plan_targets_take_xy_on_the_common_steps():
    arrays = {"cand_plans": np.zeros((3, P.N_CANDIDATES, 20, 3)), "expert_traj": np.ones((3, 21, 3))}
    plans, expert = P.plan_targets(arrays)
    assert plans.shape == (3, P.N_CANDIDATES, 20, 2) and expert.shape == (3, 20, 2) and expert.dtype == np.float32


def test_loop_trains_with_the_pools_expert_trajectories(embedded):
    from methodkit.tools.autoscale import data, runner

    folder, arrays, metas, _, _ = embedded
    emb = data.read_embeddings(folder, arrays)
    tests = []
    for weight in (0.0, 0.05):
        cfg = runner.config("vanilla", 40, 1, 4, 20, 16, 0.5, 0.5, "hypergrad", "resample", expert_l2=weight)
        result, _ = runner.run(arrays, metas, emb, cfg, seed=4)
        tests.append(result["test"])
    assert all(np.isfinite(list(t.values())).all() for t in tests)
    plans, expert = runner.make_pools(arrays, metas, emb).plans("real")
    assert plans.shape[:3] == (arrays["real"]["ego"].shape[0], P.N_CANDIDATES, expert.shape[1])
