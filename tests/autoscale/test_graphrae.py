"""Graph-RAE training is a function of its seed (CONVENTIONS: same --seed, same bytes on CPU)."""

from __future__ import annotations

import numpy as np


def test_graphrae_same_seed_same_weights_whatever_the_global_torch_state(small_pools):
    import torch

    from methodkit.tools.autoscale import features as F
    from methodkit.tools.autoscale import graphrae

    _, arrays, _ = small_pools
    train = {k: np.concatenate([arrays["real"][k], arrays["synth"][k]]) for k in arrays["real"] if k != "meta"}
    train = F.subset(train, np.arange(48))
    cfg = graphrae.RAEConfig(hidden=16, dim=8, epochs=0.5, batch_size=24)
    states = []
    for other in (1, 2):
        torch.manual_seed(other)  # whatever ran before in the process must not matter
        model, losses = graphrae.train(train, cfg, seed=5)
        states.append(({k: v.clone() for k, v in model.state_dict().items()}, losses))
    (a, la), (b, lb) = states
    assert la == lb
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    model, _ = graphrae.train(train, cfg, seed=6)
    assert not all(torch.equal(a[k], v) for k, v in model.state_dict().items())


def _tiny_train(small_pools):
    from methodkit.tools.autoscale import features as F
    from methodkit.tools.autoscale import graphrae

    _, arrays, _ = small_pools
    train = {k: np.concatenate([arrays["real"][k], arrays["synth"][k]]) for k in arrays["real"] if k != "meta"}
    return F.subset(train, np.arange(48)), graphrae.RAEConfig(hidden=16, dim=8, epochs=1.0, batch_size=24, lr=4e-3)


def _nan_on(monkeypatch, calls):
    """Graph-RAE's reconstruction loss is NaN on the given 0-based calls (one call per step)."""
    from methodkit.tools.autoscale import graphrae

    real, seen = graphrae.recon_loss, [0]

    def loss(m, g, z):
        seen[0] += 1
        out = real(m, g, z)
        return out * float("nan") if seen[0] - 1 in calls else out

    monkeypatch.setattr(graphrae, "recon_loss", loss)


def test_graphrae_nan_restarts_from_start_weights_at_half_lr(small_pools, monkeypatch):
    import torch

    from methodkit.tools.autoscale import graphrae

    train, cfg = _tiny_train(small_pools)  # 2 steps per attempt
    clean, clean_losses = graphrae.train(train, graphrae.RAEConfig(**{**cfg.__dict__, "lr": cfg.lr / 2}), seed=5)
    _nan_on(monkeypatch, {1})  # the first attempt's second step, after one update
    logged = []
    model, losses = graphrae.train(train, cfg, seed=5, log=logged.append)
    assert len(logged) == 1 and "non-finite loss (nan) at step 2 at lr 0.004" in logged[0] and "lr 0.002" in logged[0]
    assert losses == clean_losses and np.isfinite(losses["total_last"])
    for k, v in clean.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k


def test_graphrae_persistent_nan_fails_with_one_line(small_pools, monkeypatch):
    import pytest

    from methodkit.core.errors import RunFailure
    from methodkit.tools.autoscale import graphrae

    train, cfg = _tiny_train(small_pools)
    _nan_on(monkeypatch, set(range(100)))  # every step of every attempt
    logged = []
    with pytest.raises(RunFailure) as info:
        graphrae.train(train, cfg, seed=5, log=logged.append)
    msg = str(info.value)
    assert len(logged) == graphrae.RETRIES == 2 and "\n" not in msg
    assert msg.startswith("Graph-RAE training: non-finite loss (nan) at step 1 at lr 0.004, then ")
    assert "at lr 0.002, then" in msg and "at lr 0.001 (each restart" in msg
