"""Imitation pre-training (behaviour cloning) of the expert's vocabulary choice, through core.train."""

from __future__ import annotations

import numpy as np
import torch

from methodkit.core.train import TrainConfig, train
from methodkit.tools.craft import policy as pol


def run(obs: np.ndarray, y: np.ndarray, arch: str, cfg: TrainConfig, progress=lambda *a: None):
    """(model, {"loss", "accuracy", ...}): cross-entropy on the expert index."""
    torch.manual_seed(cfg.seed)
    model = pol.build(arch)
    pol.fit_normaliser(model, obs)
    x = torch.from_numpy(obs.astype(np.float32))
    t = torch.from_numpy(y.astype(np.int64))

    def loss_fn(m, idx):
        idx = torch.from_numpy(idx)
        return torch.nn.functional.cross_entropy(m(x[idx]), t[idx])

    result = train(model, loss_fn, len(y), cfg, progress=progress)
    with torch.no_grad():
        logits = model(x)
        acc = float((logits.argmax(-1) == t).float().mean())
        loss = float(torch.nn.functional.cross_entropy(logits, t))
    return model, {"loss": loss, "accuracy": acc, "train_loss": result.final_loss, "steps": cfg.steps,
                   "samples": int(len(y))}  # fmt: skip
