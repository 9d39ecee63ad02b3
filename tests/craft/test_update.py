"""The mechanism: one update raises the policy's expected proxy advantage, the residual lowers a bad action."""

from __future__ import annotations

import copy

import numpy as np
import torch

from methodkit.tools.craft import finetune


def _trainer(model, routes, **kw):
    cfg = finetune.FinetuneConfig(iterations=1, episodes=6, epochs=4, minibatch=512, lr=1e-3, seed=0, **kw)
    return finetune.Trainer(copy.deepcopy(model), "mlp", routes, cfg), cfg


def test_proxy_update_raises_expected_advantage(batch):
    model, routes, d = batch
    trainer, cfg = _trainer(model, routes, method="proxy-only")
    extra = finetune.advantages(d, cfg, finetune.Stats(), np.random.default_rng(0))
    obs = torch.from_numpy(d.obs)
    with torch.no_grad():
        before = (torch.softmax(trainer.model(obs), -1).numpy() * extra["adv"]).sum(1).mean()
    trainer.update(d, extra, 0)
    with torch.no_grad():
        after = (torch.softmax(trainer.model(obs), -1).numpy() * extra["adv"]).sum(1).mean()
    assert after > before + 0.05


def test_residual_pushes_down_actions_that_did_worse_than_predicted(batch):
    model, routes, d = batch
    trainer, cfg = _trainer(model, routes, method="craft", lambda_res=1.0)
    extra = finetune.advantages(d, cfg, finetune.Stats(), np.random.default_rng(0))
    assert extra["critical"].any()
    # isolate the residual term: no proxy advantage, no KL
    extra = {**extra, "adv": np.zeros_like(extra["adv"])}
    trainer.cfg.beta = 0.0
    obs = torch.from_numpy(d.obs)
    rows = np.arange(len(d))
    with torch.no_grad():
        p0 = torch.softmax(trainer.model(obs), -1).numpy()[rows, d.action]
    trainer.update(d, extra, 0)
    with torch.no_grad():
        p1 = torch.softmax(trainer.model(obs), -1).numpy()[rows, d.action]
    neg = extra["critical"] & (extra["adv_res"] < -0.5)
    pos = extra["critical"] & (extra["adv_res"] > 0.5)
    assert neg.any()
    assert (
        np.mean(np.log(p1[neg]) - np.log(p0[neg])) < np.mean(np.log(p1[pos]) - np.log(p0[pos]))
        if pos.any()
        else (np.mean(np.log(p1[neg]) - np.log(p0[neg])) < 0)
    )


def test_ema_teacher_follows_slowly(batch):
    model, routes, d = batch
    trainer, cfg = _trainer(model, routes, method="craft", ema=0.9)
    extra = finetune.advantages(d, cfg, finetune.Stats(), np.random.default_rng(0))
    w0 = trainer.teacher.head.weight.detach().clone()
    s0 = trainer.model.head.weight.detach().clone()
    trainer.update(d, extra, 0)
    moved_teacher = float((trainer.teacher.head.weight - w0).abs().sum())
    moved_student = float((trainer.model.head.weight - s0).abs().sum())
    assert 0 < moved_teacher < moved_student


def test_adv_floor_divides_near_ties_by_the_floor(batch):
    model, routes, d = batch
    plain = finetune.advantages(d, finetune.FinetuneConfig(method="craft"), finetune.Stats(), np.random.default_rng(0))
    cfg = finetune.FinetuneConfig(method="craft", adv_floor=0.1)
    floored = finetune.advantages(d, cfg, finetune.Stats(), np.random.default_rng(0))
    s = floored["proxy"]
    std = s.std(axis=1)
    small = (std < 0.1) & (std > 1e-9)
    assert small.any()
    want = (s[small] - s[small].mean(1, keepdims=True)) / (0.1 + 1e-6)
    np.testing.assert_allclose(floored["adv"][small], want, atol=1e-9)
    assert np.abs(floored["adv"][small]).max() < np.abs(plain["adv"][small]).max()
