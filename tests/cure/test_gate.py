"""Step B (cosines, self-calibrated gate, overlap) and step C (the suppression surrogate descends)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from methodkit.tools.cure import unlearn as U
from methodkit.tools.cure.forget_run import forget
from methodkit.tools.cure.train import train


@pytest.fixture(scope="module")
def agent(tiny_ds):
    return train(tiny_ds, "td3bc", steps=60, hidden=32, seed=1)[0]


def test_gate_shape():
    c = np.linspace(-1, 1, 201)
    w = U.gate(c, c0=0.2, temp=0.1, w_min=0.1)
    assert np.all(np.diff(w) <= 0) and w.min() >= 0.1 and w.max() <= 1.0
    assert U.gate([0.2], 0.2, 0.1, 0.1)[0] == pytest.approx(0.55)
    assert U.gate([-1.0], 0.2, 0.1, 0.1)[0] == pytest.approx(1.0, abs=1e-4)
    assert U.gate([1.0], 0.2, 0.1, 0.1)[0] == pytest.approx(0.1, abs=1e-3)


def test_cosine_and_flat_grad(agent, tiny_ds):
    from methodkit.tools.cure.backbones import batch

    g = torch.randn(50)
    assert U.cosine(g, g) == pytest.approx(1.0) and U.cosine(g, -g) == pytest.approx(-1.0)
    params = U.critic_params(agent, "all")
    b = batch(tiny_ds.arrays, np.arange(0, 80), agent)
    full = U.flat_grad(agent, b, params)
    # the batch gradient is the mean of the per-half gradients (semi-gradient: the target is constant)
    halves = [U.flat_grad(agent, batch(tiny_ds.arrays, np.arange(k, k + 40), agent), params) for k in (0, 40)]
    torch.testing.assert_close(full, (halves[0] + halves[1]) / 2, rtol=1e-4, atol=1e-6)
    last2 = U.critic_params(agent, "last2")
    assert sum(p.numel() for p in last2) == 2 * (32 * 32 + 32 + 32 + 1)


def test_gate_is_calibrated_on_retained_trajectories(agent, tiny_ds):
    """Retained trajectories scored as forget data sit where the calibration set does: about 90% of
    them above c0 (gate below the midpoint), and the cosines of the same trajectories agree."""
    cfg = U.ForgetConfig(calib_trajs=12, grad_batches=2, grad_batch=256, score_heldout=True)
    retained = tiny_ds.ids_of("R")
    s = U.score(agent, tiny_ds, retained[:12], retained, cfg)
    _, c_cal, w_cal = s.of("calibration")
    assert s.c0 == pytest.approx(np.quantile(c_cal, 0.1)) and s.temp == pytest.approx(0.5 * c_cal.std())
    assert (w_cal < 0.55).mean() >= 0.85
    assert np.all((s.cosine >= -1) & (s.cosine <= 1))
    assert len(s.of("heldout")[0]) == int((tiny_ds.arrays["traj_split"] == 1).sum())
    t_cal = s.of("calibration")[0]
    both = np.intersect1d(t_cal, retained[:12])
    for t in both:  # a trajectory scored twice (as forget and as calibration) gets one cosine
        assert len(set(np.round(s.cosine[s.traj == t], 9))) == 1


def test_support_overlap_is_one_for_retained_copies(agent, tiny_ds):
    cfg = U.ForgetConfig()
    r = tiny_ds.ids_of("R")
    disjoint = tiny_ds.ids_of("F-disjoint")
    o_same = U.support_overlap(agent, tiny_ds, r[:4], r, cfg)
    o_dis = U.support_overlap(agent, tiny_ds, disjoint[:4], r, cfg)
    assert np.all((o_same >= 0) & (o_same <= 1))
    assert o_dis.mean() < o_same.mean()


def test_suppression_surrogate_descends(agent, tiny_ds):
    """cure-uniform (every gate 1): Q on forget actions above b(s) - m shrinks."""
    fid = tiny_ds.ids_of("F-disjoint")
    cfg = U.ForgetConfig(method="cure-uniform", steps=40, baseline_steps=50, batch_size=64, lambda_s=5.0)
    new, scores, res = forget(agent, tiny_ds, fid, cfg, original_steps=60)
    assert scores is None and res.steps == 40
    retained = np.setdiff1d(tiny_ds.train_ids(), fid)
    base, margin = U.fit_baseline(agent, tiny_ds, tiny_ds.rows_of(retained), cfg)
    from methodkit.tools.cure.backbones import batch

    b = batch(tiny_ds.arrays, tiny_ds.rows_of(fid), agent)
    with torch.no_grad():
        excess = lambda a: torch.relu(a.q(b["s"], b["a"]) - (base(b["s"]) - margin)).pow(2).mean().item()  # noqa: E731
        assert excess(new) < excess(agent)


@pytest.mark.parametrize("algo", ["iql", "cql"])
def test_every_backbone_runs_cure_and_keeps_the_input_model(tiny_ds, algo):
    base = train(tiny_ds, algo, steps=10, hidden=16)[0]
    before = {k: v.clone() for k, v in base.state_dict().items()}
    cfg = U.ForgetConfig(steps=6, baseline_steps=5, batch_size=32, calib_trajs=4, grad_batches=1, grad_batch=64)
    new, scores, res = forget(base, tiny_ds, tiny_ds.ids_of("F-mix"), cfg, original_steps=10)
    assert res.algo == algo and res.steps == 6 and np.isfinite(scores.gate).all()
    assert all(torch.equal(before[k], v) for k, v in base.state_dict().items())
    assert any(not torch.equal(before[k], v) for k, v in new.state_dict().items())
