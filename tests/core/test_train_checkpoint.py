"""core.train and core.checkpoint: schedule, seeded order, resume equals uninterrupted, non-finite stop."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch

from methodkit.core import checkpoint
from methodkit.core.errors import DataError, RunFailure
from methodkit.core.train import TrainConfig, batch_indices, learning_rate, train


def test_learning_rate_schedule_known_points():
    cfg = TrainConfig(steps=110, lr=1.0, warmup=10, min_lr_ratio=0.1)
    assert learning_rate(0, cfg) == pytest.approx(0.1)
    assert learning_rate(9, cfg) == pytest.approx(1.0)
    assert learning_rate(10, cfg) == pytest.approx(1.0)
    assert learning_rate(60, cfg) == pytest.approx(0.55)  # half-way down the cosine
    assert learning_rate(110, cfg) == pytest.approx(0.1)
    rates = [learning_rate(s, cfg) for s in range(10, 110)]
    assert all(a >= b for a, b in zip(rates, rates[1:]))


def test_batch_order_is_a_permutation_per_epoch_and_reproducible():
    n, bs = 20, 5
    epoch0 = np.concatenate([batch_indices(n, bs, 7, s) for s in range(4)])
    assert sorted(epoch0) == list(range(n))
    assert not np.array_equal(epoch0, np.concatenate([batch_indices(n, bs, 7, s) for s in range(4, 8)]))
    np.testing.assert_array_equal(batch_indices(n, bs, 7, 5), batch_indices(n, bs, 7, 5))


def _problem(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(64, 3, generator=g)
    w = torch.tensor([1.5, -2.0, 0.5])
    y = x @ w + 0.01 * torch.randn(64, generator=g)

    def loss_fn(model, idx):
        idx = torch.as_tensor(idx)
        return ((model(x[idx]).squeeze(-1) - y[idx]) ** 2).mean()

    return loss_fn, w


def test_training_fits_and_logs(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    loss_fn, w = _problem()
    cfg = TrainConfig(steps=300, batch_size=16, lr=0.05, warmup=10, log_every=100)
    result = train(model, loss_fn, 64, cfg, run_dir=tmp_path, spec={"task": "linreg"})
    assert result.final_loss < 1e-2
    np.testing.assert_allclose(model.weight.detach().numpy()[0], w.numpy(), atol=0.05)
    rows = list(csv.DictReader(open(tmp_path / "log.csv")))
    assert [int(r["step"]) for r in rows] == [100, 200, 300]
    sidecar = json.loads((tmp_path / "model.json").read_text())
    assert sidecar["step"] == 300 and sidecar["spec_hash"] == checkpoint.spec_hash({"task": "linreg"})


def test_resume_gives_the_same_weights_as_one_run(tmp_path):
    loss_fn, _ = _problem()
    cfg = TrainConfig(steps=60, batch_size=8, lr=0.02, warmup=5, log_every=10, checkpoint_every=20)
    torch.manual_seed(1)
    straight = torch.nn.Linear(3, 1)
    train(straight, loss_fn, 64, cfg, run_dir=tmp_path / "a")

    torch.manual_seed(1)
    first = torch.nn.Linear(3, 1)
    short = TrainConfig(**{**cfg.__dict__, "steps": 60})
    # interrupt after 40 steps: run a 40-step prefix by stopping via a loss that raises
    calls = {"n": 0}

    def interrupting(model, idx):
        calls["n"] += 1
        if calls["n"] > 40:
            raise KeyboardInterrupt
        return loss_fn(model, idx)

    with pytest.raises(KeyboardInterrupt):
        train(first, interrupting, 64, short, run_dir=tmp_path / "b")
    resumed = torch.nn.Linear(3, 1)
    result = train(resumed, loss_fn, 64, short, run_dir=tmp_path / "b", resume=True)
    assert result.resumed_from == 40
    torch.testing.assert_close(resumed.weight, straight.weight, rtol=0, atol=0)
    torch.testing.assert_close(resumed.bias, straight.bias, rtol=0, atol=0)


def test_non_finite_loss_stops_and_keeps_last_good(tmp_path):
    loss_fn, _ = _problem()
    calls = {"n": 0}

    def exploding(model, idx):
        calls["n"] += 1
        loss = loss_fn(model, idx)
        return loss * float("nan") if calls["n"] == 7 else loss

    model = torch.nn.Linear(3, 1)
    with pytest.raises(RunFailure, match=r"non-finite loss \(nan\) at step 7; last good checkpoint \(step 6\)"):
        train(model, exploding, 64, TrainConfig(steps=20, batch_size=8), run_dir=tmp_path)
    tensors, sidecar = checkpoint.load(tmp_path / "model.safetensors")
    assert sidecar["step"] == 6
    assert torch.isfinite(tensors["model.weight"]).all()


def test_checkpoint_spec_mismatch_names_both_hashes(tmp_path):
    path = tmp_path / "m.safetensors"
    checkpoint.save(path, {"w": torch.ones(2)}, config={"d": 2}, spec={"vocab": 10})
    tensors, sidecar = checkpoint.load(path, expected_spec={"vocab": 10})
    assert torch.equal(tensors["w"], torch.ones(2)) and sidecar["config"] == {"d": 2}
    with pytest.raises(DataError) as info:
        checkpoint.load(path, expected_spec={"vocab": 11})
    assert checkpoint.spec_hash({"vocab": 10}) in info.value.message
    assert checkpoint.spec_hash({"vocab": 11}) in info.value.message
    with pytest.raises(DataError, match="no such checkpoint"):
        checkpoint.load(tmp_path / "nope.safetensors")


@pytest.mark.parametrize(
    "sidecar, words", [(b"\xff\xfe{}", "not UTF-8"), (b"{nope", "invalid JSON"), (b"[1, 2]", "JSON object")]
)
def test_a_broken_sidecar_is_a_data_error_naming_it(tmp_path, sidecar, words):
    path = tmp_path / "m.safetensors"
    checkpoint.save(path, {"w": torch.ones(2)}, config={}, spec={})
    checkpoint.sidecar_path(path).write_bytes(sidecar)
    with pytest.raises(DataError, match=words) as info:
        checkpoint.load(path)
    assert checkpoint.sidecar_path(path).name in info.value.message


def test_sgd_with_momentum_fits_too():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    loss_fn, w = _problem()
    result = train(model, loss_fn, 64, TrainConfig(steps=300, batch_size=16, lr=0.05, optimizer="sgd", beta1=0.9))
    assert result.final_loss < 1e-2
    with pytest.raises(Exception, match="optimizer must be one of"):
        TrainConfig(steps=1, optimizer="lion")
