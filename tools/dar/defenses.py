"""Defenses run against a (possibly backdoored) teacher: fine-tuning, fine-pruning, Spectral Signatures.

- Fine-tuning (FT): a few epochs of plain CE on a small clean set the defender holds (5% of the train
  images with their true labels), at a tenth of the training learning rate.
- Fine-pruning (Liu et al. 2018): channels of the last convolution ranked by their mean activation on
  the clean set; the most dormant are masked (output forced to 0), as many as keep the clean-set
  accuracy within `max_drop` of the unpruned one (at most `max_ratio` of them), then FT.
- Spectral Signatures (Tran et al. 2018): per class, the penultimate representations of the images
  carrying that label are centred; the score is the squared projection on the top singular vector.
  The top 1.5 x budget scores of each class are flagged; the figure is the recall of relabelled images.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from methodkit.core.progress import ProgressCallback, silent
from methodkit.core.train import TrainConfig, train
from methodkit.tools.dar.choices import DEFENSES  # noqa: F401 (re-exported)
from methodkit.tools.dar.victim import Model, _tensor


@dataclass
class DefenseConfig:
    clean_share: float = 0.05
    epochs: float = 2
    lr_scale: float = 0.1
    batch_size: int = 128
    max_drop: float = 0.05
    max_ratio: float = 0.9
    flag_factor: float = 1.5


def clean_subset(n: int, share: float, seed: int) -> np.ndarray:
    """Indices of the defender's clean images (true labels): a seeded random share of the train set."""
    return np.sort(np.random.default_rng(seed + 7919).choice(n, max(1, int(round(share * n))), replace=False))


def _last_conv(net):
    import torch

    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    return convs[-1]


def fine_tune(model: Model, x_u8: np.ndarray, y: np.ndarray, cfg: DefenseConfig, seed: int = 0,
              progress: ProgressCallback = silent) -> Model:  # fmt: skip
    """A copy of `model` trained further with CE on (x, y) (clean images, true labels)."""
    import torch
    import torch.nn.functional as F

    out = Model(copy.deepcopy(model.net), dict(model.config))
    data = _tensor(x_u8, out.config)
    target = torch.from_numpy(y.astype(np.int64))
    steps = max(1, int(round(cfg.epochs * len(x_u8) / cfg.batch_size)))
    lr = model.config.get("train", {}).get("lr", 0.05) * cfg.lr_scale
    out.net.train()

    def loss_fn(net, idx):
        idx = torch.from_numpy(idx)
        return F.cross_entropy(net(data[idx]), target[idx])

    tc = TrainConfig(steps=steps, batch_size=min(cfg.batch_size, len(x_u8)), lr=lr, weight_decay=5e-4, warmup=0,
                     min_lr_ratio=0.0, clip=5.0, log_every=max(1, steps), seed=seed, optimizer="sgd")  # fmt: skip
    train(out.net, loss_fn, len(x_u8), tc, progress=progress)
    out.net.eval()
    return out


def channel_activity(model: Model, x_u8: np.ndarray) -> np.ndarray:
    """Mean activation (after ReLU) of each output channel of the last convolution on x."""
    import torch

    seen = []
    handle = _last_conv(model.net).register_forward_hook(lambda m, i, o: seen.append(torch.relu(o).mean(dim=(0, 2, 3))))
    try:
        model.logits(x_u8)
    finally:
        handle.remove()
    return torch.stack(seen).mean(0).numpy()


def mask_channels(model: Model, channels: np.ndarray) -> Model:
    """A copy of `model` whose last convolution outputs 0 on `channels` (kept through later training)."""
    import torch

    out = Model(copy.deepcopy(model.net), dict(model.config))
    conv = _last_conv(out.net)
    mask = torch.ones(conv.out_channels)
    mask[torch.as_tensor(np.asarray(channels, dtype=np.int64))] = 0.0
    conv.register_forward_hook(lambda m, i, o: o * mask.view(1, -1, 1, 1))
    return out


def fine_prune(model: Model, x_u8: np.ndarray, y: np.ndarray, cfg: DefenseConfig, seed: int = 0,
               progress: ProgressCallback = silent) -> tuple[Model, int]:  # fmt: skip
    """Prune the most dormant last-conv channels while clean accuracy stays within max_drop; then FT.
    Returns the defended model and the count of pruned channels."""
    order = np.argsort(channel_activity(model, x_u8), kind="stable")  # most dormant first
    base = float((model.predict(x_u8) == y).mean())
    lo, hi = 0, int(cfg.max_ratio * len(order))
    while lo < hi:  # the largest k whose pruned accuracy stays within max_drop (accuracy falls with k)
        k = (lo + hi + 1) // 2
        if float((mask_channels(model, order[:k]).predict(x_u8) == y).mean()) >= base - cfg.max_drop:
            lo = k
        else:
            hi = k - 1
    pruned = mask_channels(model, order[:lo])
    return fine_tune(pruned, x_u8, y, cfg, seed, progress), lo


def penultimate(model: Model, x_u8: np.ndarray, batch: int = 1024) -> np.ndarray:
    """Representations entering the final linear layer."""
    import torch

    body = model.net.body
    model.net.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(x_u8), batch):
            out.append(body[:-1](_tensor(x_u8[i : i + batch], model.config)).numpy())
    return np.concatenate(out)


def spectral_scores(features: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per class: squared projection of the centred representations on their top singular vector."""
    scores = np.zeros(len(labels))
    for c in np.unique(labels):
        rows = np.flatnonzero(labels == c)
        centred = features[rows] - features[rows].mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        scores[rows] = (centred @ vt[0]) ** 2
    return scores


def spectral_recall(model: Model, x_u8: np.ndarray, labels: np.ndarray, poisoned: np.ndarray, budget: int,
                    factor: float = 1.5) -> float:  # fmt: skip
    """Share of the poisoned indices among the top factor x budget scores of their (poisoned) class."""
    if len(poisoned) == 0:
        return float("nan")
    scores = spectral_scores(penultimate(model, x_u8), labels)
    flagged = set()
    for c in np.unique(labels):
        rows = np.flatnonzero(labels == c)
        flagged |= set(rows[np.argsort(-scores[rows], kind="stable")[: int(factor * budget)]].tolist())
    return float(np.mean([i in flagged for i in poisoned]))
