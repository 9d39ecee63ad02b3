"""Defenses: Spectral Signatures scoring (known answer), channel masking, fine-pruning, fine-tuning."""

from __future__ import annotations

import numpy as np
import torch

from methodkit.tools.dar import data
from methodkit.tools.dar.defenses import (
    DefenseConfig,
    channel_activity,
    fine_prune,
    fine_tune,
    mask_channels,
    spectral_scores,
)
from methodkit.tools.dar.victim import VictimConfig, fit


def test_spectral_scores_single_out_a_shifted_minority():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(600, 20))
    labels = np.repeat([0, 1], 300)
    poisoned = np.arange(0, 20)  # 20 of the 300 class-0 rows, shifted along one direction
    features[poisoned] += 8 * np.eye(20)[3]
    scores = spectral_scores(features, labels)
    top = np.argsort(-scores[:300])[:30]
    assert set(poisoned) <= set(top.tolist())
    # without the shift the same rows are not singled out
    plain = spectral_scores(features - 8 * np.isin(np.arange(600), poisoned)[:, None] * np.eye(20)[3], labels)
    assert len(set(poisoned) & set(np.argsort(-plain[:300])[:30].tolist())) < 10


def _tiny_model():
    x, y = data.load("mnist5k", "train", 300)
    model, _ = fit(x, y, VictimConfig(arch="cnn-xs", width=4, epochs=1, batch_size=32), 10)
    return model, x, y


def test_masking_pruning_and_fine_tuning():
    torch.manual_seed(0)
    model, x, y = _tiny_model()
    activity = channel_activity(model, x)
    assert activity.shape == (4,) and (activity >= 0).all()
    masked = mask_channels(model, np.array([0, 2]))
    assert (channel_activity(masked, x)[[0, 2]] == 0).all()
    assert np.allclose(channel_activity(masked, x)[[1, 3]], activity[[1, 3]], atol=1e-6)
    assert np.allclose(channel_activity(model, x), activity)  # the original is untouched
    cfg = DefenseConfig(epochs=1, max_drop=0.05)
    base = (model.predict(x) == y).mean()
    pruned, k = fine_prune(model, x, y, cfg)
    assert 0 <= k <= int(0.9 * 4)
    order = np.argsort(activity, kind="stable")
    assert (mask_channels(model, order[:k]).predict(x) == y).mean() >= base - 0.05
    before = [p.detach().clone() for p in model.net.parameters()]
    tuned = fine_tune(model, x, y, cfg)
    assert all(torch.equal(a, b) for a, b in zip(before, model.net.parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(before, tuned.net.parameters()))
