"""Training the teacher (next-token LM through core.train) and its transcoders (frozen activations)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from methodkit.core.progress import silent
from methodkit.core.train import TrainConfig, train
from methodkit.tools.mcd import models
from methodkit.tools.mcd import transcoder as T


def train_lm(model, windows: models.Windows, val: models.Windows, cfg: TrainConfig, run_dir, spec, progress=silent,
             resume: bool = False):
    def loss_fn(m, idx):
        x, y = windows.batch(idx)
        return F.cross_entropy(m(x).flatten(0, 1), y.flatten())

    def evaluate(m):
        return {"val_ce": models.cross_entropy(m, val, 128)}

    return train(model, loss_fn, len(windows), cfg, run_dir=run_dir, spec=spec, model_config=model.cfg.to_dict(),
                 evaluate=evaluate, progress=progress, resume=resume)  # fmt: skip


@dataclass
class TranscoderResult:
    rows: list
    seconds: float


def train_transcoders(model, tcs: T.TranscoderSet, windows, val, cfg: TrainConfig, progress=silent):
    """Fit every layer's transcoder on the frozen model's MLP input/output; metrics on `val` windows."""
    x0, _ = windows.batch(np.arange(min(len(windows), 64)))
    for tc, (x, y) in zip(tcs.layers, T.mlp_io(model, x0)):
        T.init_from_data(tc, x, y)

    def loss_fn(m, idx):
        x, _ = windows.batch(idx)
        return sum(tc.loss(xi, yi) for tc, (xi, yi) in zip(m.layers, T.mlp_io(model, x)))

    for p in model.parameters():
        p.requires_grad_(False)
    result = train(tcs, loss_fn, len(windows), cfg, progress=progress)
    tcs.eval()
    xv, _ = val.batch(np.arange(min(len(val), 64)))
    rows = []
    for layer, (tc, (xi, yi)) in enumerate(zip(tcs.layers, T.mlp_io(model, xv))):
        rows.append({"layer": layer, **T.metrics(tc, xi, yi), "n_features": tc.cfg.n_features, "k": tc.cfg.k})
    return TranscoderResult(rows, result.seconds)


def token_subset(stream: np.ndarray, vocab_size: int, size: int = 1024) -> torch.Tensor:
    """The fixed token subset S of the descriptors: the `size` most frequent tokens (sorted ids)."""
    counts = np.bincount(stream.astype(np.int64), minlength=vocab_size)
    top = np.argsort(-counts, kind="stable")[: min(size, int((counts > 0).sum()))]
    return torch.from_numpy(np.sort(top))
