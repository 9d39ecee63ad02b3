"""Learned attacks: a denoiser trained on synthetic NTE-like noise, and retraining the attacker's model.

denoiser: a small residual conv network trained on public clean images plus synthetic noise drawn
in the `geig` subspace estimate at the noise level the attacker measures (tr S_nte - tr S_clean per
patch), then applied to the ciphertexts. retrain: the attacker trains a fresh model of its own
architecture on clean training data passed through the same reconstruction, so its training and
test inputs match (the issue's strongest attack).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from methodkit.core.progress import ProgressCallback, silent
from methodkit.core.train import TrainConfig, train
from methodkit.tools.nte import attacks
from methodkit.tools.nte.models import ModelConfig, StemNet
from methodkit.tools.nte.stem import fold_average


class Denoiser(nn.Module):
    """x_hat = y - net(y): predicts the noise (residual learning), three 3x3 conv layers."""

    def __init__(self, channels: int = 1, width: int = 32):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(channels, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, channels, 3, padding=1),
        )

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return y - self.net(y)


def synthetic_noise(
    shape: tuple, subspace: np.ndarray, energy: float, kernel: int, stride: int, seed: int, layout: str = "shared"
):
    """Noise images: Z S^T scaled to `energy` per patch, fold-averaged (B, C, H, W).

    layout "shared": one z per image at every patch (the encoder's default); "patch": Z per patch.
    """
    b, c, h, w = shape
    rows, cols = (h - kernel) // stride + 1, (w - kernel) // stride + 1
    rng = np.random.default_rng(np.random.SeedSequence([seed, 31337]))
    z = rng.standard_normal((b, 1 if layout == "shared" else rows * cols, subspace.shape[1]))
    z = np.broadcast_to(z, (b, rows * cols, subspace.shape[1]))
    patches = z @ subspace.T * np.sqrt(energy / subspace.shape[1])
    return fold_average(patches, shape, kernel, stride).astype(np.float32)


def train_denoiser(
    x_nte: np.ndarray,
    public: np.ndarray,
    kernel: int,
    stride: int,
    *,
    k: int | None = None,
    epochs: int = 3,
    seed: int = 0,
    layout: str = "shared",
    progress: ProgressCallback = silent,
) -> tuple[Callable[[np.ndarray], np.ndarray], dict]:
    """Fit the denoiser on public + synthetic noise of the encoder's `layout`; returns (images -> images, report)."""
    k = k or kernel * kernel * public.shape[1] // 2
    subspace = attacks.geig_subspace(x_nte, public, kernel, stride, k)
    energy = attacks.noise_energy_per_patch(x_nte, public, kernel, stride)
    noisy = public + synthetic_noise(public.shape, subspace, energy, kernel, stride, seed, layout)
    torch.manual_seed(seed)
    net = Denoiser(public.shape[1])
    inputs, targets = torch.from_numpy(noisy), torch.from_numpy(public.astype(np.float32))

    def loss_fn(model, idx):
        idx = torch.as_tensor(idx)
        return nn.functional.mse_loss(model(inputs[idx]), targets[idx])

    steps = epochs * max(len(public) // 64, 1)
    train(
        net,
        loss_fn,
        len(public),
        TrainConfig(steps=steps, batch_size=64, lr=2e-3, warmup=steps // 20, log_every=max(steps // 5, 1), seed=seed),
        progress=lambda phase, done, total: progress("train denoiser", done, total),
    )
    net.eval()

    def apply(x: np.ndarray) -> np.ndarray:
        out = []
        with torch.no_grad():
            for start in range(0, len(x), 1000):
                chunk = torch.from_numpy(np.ascontiguousarray(x[start : start + 1000], dtype=np.float32))
                out.append(net(chunk).clamp(0, 1).numpy())
        return np.concatenate(out)

    return apply, {"k": k, "noise_energy_per_patch": energy, "layout": layout}


def retrain(
    model: StemNet,
    reconstruct: Callable[[np.ndarray], np.ndarray],
    x_train: np.ndarray,
    y_train: np.ndarray,
    *,
    epochs: int = 3,
    seed: int | None = None,
    progress: ProgressCallback = silent,
) -> StemNet:
    """A fresh model of `model`'s architecture trained on reconstruct(x_train)."""
    from methodkit.tools.nte.zoo import fit

    cfg = ModelConfig(**{**model.cfg.to_dict(), "frozen_stem": False})
    if seed is not None:
        cfg.seed = seed
    restored = np.concatenate([reconstruct(x_train[i : i + 2000]) for i in range(0, len(x_train), 2000)])
    return fit(cfg, restored.astype(np.float32), y_train, epochs=epochs, progress=progress)
