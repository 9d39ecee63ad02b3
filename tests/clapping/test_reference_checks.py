"""clapping: each pipeline component against a plain reference (exactness, EF recursions, momentum, reuse).

These pin the pieces of issue §2 one by one, so a quality gap cannot hide a wiring bug:
- `none` through the pipeline equals ordinary single-process training of the composed model (the
  gradient crosses each link once, momentum is applied once per step, batch t is batch t // R);
- Clapping with the identity compressor equals `none` bit for bit (FU and FC);
- top-k with k = d is the identity; the EF residual and the tracked references follow their recursions;
- both ends of every link hold the same m and h after a run.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from methodkit.core import compress
from methodkit.core.kernels import compress as ck
from methodkit.core.train import batch_indices
from methodkit.tools.clapping import pipeline, tasks
from methodkit.tools.clapping.links import LinkEnd

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def digits():
    return tasks.digits_data(0)


def _cfg(algo, compressor="topk:0.05", reuse=3, steps=12, stages=3, **kw):
    return pipeline.RunConfig(
        task="digits", stages=stages, algo=algo, compressor=compressor, reuse=reuse, steps=steps, lr=0.3, **kw
    )


def _workers(cfg, data):
    modules = tasks.build_stages(cfg.task, data, cfg.stages, width=cfg.width, n_blocks=cfg.blocks, seed=cfg.seed)
    widths = pipeline.stage_widths(modules, data)
    transport = pipeline.LocalTransport()
    return modules, [pipeline.StageWorker(p, modules[p], cfg, data, widths, transport) for p in range(cfg.stages)]


def _train(workers, steps):
    for t in range(steps):
        states = [w.forward(t) for w in workers]
        for w, s in zip(reversed(workers), reversed(states)):
            w.backward(s)
        norm = pipeline.global_norm([w.grad_square() for w in workers]) if workers[0].cfg.clip else None
        for w, s in zip(workers, states):
            w.update(s, norm)


@pytest.mark.parametrize(
    "nesterov, schedule",
    [(False, {}), (True, {}), (False, {"warmup": 5, "clip": 0.2})],
    ids=["sgdm", "nesterov", "warmup-clip"],
)
def test_exact_pipeline_equals_single_process_training(digits, nesterov, schedule):
    cfg = _cfg("none", nesterov=nesterov, **schedule)
    modules, workers = _workers(cfg, digits)
    _train(workers, cfg.steps)
    # the same model, trained in one piece with torch's SGD: v = beta v + (1 - beta) g (dampened), theta -= lr v
    whole = torch.nn.Sequential(
        *tasks.build_stages(cfg.task, digits, cfg.stages, width=cfg.width, n_blocks=cfg.blocks, seed=cfg.seed)
    )
    opt = torch.optim.SGD(
        whole.parameters(), lr=cfg.lr, momentum=cfg.beta, dampening=0.0 if nesterov else cfg.beta, nesterov=nesterov
    )
    losses, clipped = [], 0
    for t in range(cfg.steps):
        ids = batch_indices(len(digits.x_train), cfg.batch, cfg.seed, t // cfg.reuse)  # lazy sampling: R steps each
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            whole(torch.from_numpy(digits.x_train[ids])), torch.from_numpy(digits.y_train[ids])
        )
        loss.backward()
        if cfg.clip:  # torch's own global-norm clipping and a linear warm-up of the lr
            clipped += float(torch.nn.utils.clip_grad_norm_(whole.parameters(), cfg.clip)) > cfg.clip
        for group in opt.param_groups:
            group["lr"] = cfg.lr * min(1.0, (t + 1) / cfg.warmup) if cfg.warmup else cfg.lr
        opt.step()
        losses.append(float(loss.detach()))
    np.testing.assert_allclose(workers[-1].losses, losses, rtol=1e-5)
    assert not cfg.clip or 0 < clipped < cfg.steps  # the clipping case really clips, and not every step
    for piece, reference in zip(modules, whole):
        for a, b in zip(piece.parameters(), reference.parameters()):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("algo", ["clapping-fu", "clapping-fc"])
def test_clapping_with_the_identity_compressor_is_exact(digits, algo):
    exact = pipeline.simulate(_cfg("none"), digits)
    tracked = pipeline.simulate(_cfg(algo, compressor="identity"), digits)
    assert tracked.train_loss == exact.train_loss
    assert tracked.val_loss == exact.val_loss
    assert tracked.total_bytes == exact.total_bytes


def test_topk_with_k_equal_to_d_is_the_identity():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 40)).astype(np.float32)
    m = rng.standard_normal((5, 40)).astype(np.float32)
    m0 = m.copy()
    idx, val = ck.delta_topk_update(a, m, 40)
    np.testing.assert_array_equal(idx, np.tile(np.arange(40), (5, 1)))
    np.testing.assert_array_equal(val, a - m0)
    np.testing.assert_allclose(m, a, atol=1e-6)


@pytest.mark.parametrize("spec", ["topk:0.1", "quant:2", "randk:0.2"])
def test_ef_step_residual_follows_its_recursion(spec):
    """e_{t+1} = e_t + x_t - C(e_t + x_t), and the receiver gets C(e_t + x_t)."""
    sender = LinkEnd("ef-step", spec, 30, index=0, seed=2)
    receiver = LinkEnd("ef-step", spec, 30, index=0, seed=2)
    shadow = compress.parse(spec, 30, seed=2 * 7919)  # the same compressor state, replayed
    rng = np.random.default_rng(5)
    e = np.zeros((4, 30), np.float32)
    for _ in range(5):
        x = rng.standard_normal((4, 30)).astype(np.float32)
        got = receiver.receive_activation(sender.send_activation(x, 0, np.arange(4)), 0, np.arange(4))
        sent = shadow.decode(shadow.encode(e + x))
        np.testing.assert_array_equal(got, sent)
        e = e + x - sent
        np.testing.assert_allclose(sender.e_fwd, e, atol=1e-6)


@pytest.mark.parametrize("algo", ["clapping-fu", "clapping-fc"])
def test_tracked_reference_follows_m_plus_c_of_a_minus_m(algo):
    """Within a round: m_{s+1} = m_s + C(a_s - m_s) on both ends (FU: m_0 = a_0 exactly; FC: from 0)."""
    sender, receiver = (LinkEnd(algo, "topk:0.1", 30, index=0, seed=3) for _ in range(2))
    shadow = compress.parse("topk:0.1", 30)
    rng = np.random.default_rng(6)
    a = rng.standard_normal((4, 30)).astype(np.float32)
    m = np.zeros_like(a)
    for s in range(4):
        a = a + 0.1 * rng.standard_normal(a.shape).astype(np.float32)
        got = receiver.receive_activation(sender.send_activation(a, s, np.arange(4)), s, np.arange(4))
        m = a.copy() if (algo == "clapping-fu" and s == 0) else m + shadow.decode(shadow.encode(a - m))
        np.testing.assert_allclose(got, m, atol=1e-6)
        np.testing.assert_array_equal(sender.m, receiver.m)


@pytest.mark.parametrize("algo", ["clapping-fu", "clapping-fc"])
def test_both_ends_of_every_link_agree_after_training(digits, algo):
    cfg = _cfg(algo, compressor="quant:2", steps=7)
    _, workers = _workers(cfg, digits)
    _train(workers, cfg.steps)
    for p in range(cfg.stages - 1):
        low, up = workers[p].lower[0], workers[p + 1].upper[0]
        np.testing.assert_array_equal(low.m, up.m)
        np.testing.assert_array_equal(low.h, up.h)
        assert np.abs(low.h).sum() > 0  # the gradient reference really was fed


def test_non_finite_activations_stop_before_reaching_a_compressor(digits):
    from methodkit.core.errors import RunFailure

    cfg = _cfg("naive", stages=2, steps=1)
    modules, workers = _workers(cfg, digits)
    with torch.no_grad():
        next(modules[0].parameters())[0, 0] = float("nan")
    with pytest.raises(RunFailure, match="non-finite activations at stage 0, step 1"):
        workers[0].forward(0)
