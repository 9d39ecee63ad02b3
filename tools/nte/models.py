"""The model zoo: small Fashion-MNIST classifiers whose first layer is an explicit patch stem.

Each architecture is stem (conv k x k / stride s, padding p, c channels) -> ReLU -> two conv
blocks (conv 3x3 -> BatchNorm -> ReLU) -> global average pooling -> linear; `mlp` is a
whole-image stem -> ReLU -> linear -> BatchNorm -> ReLU -> linear. BatchNorm (our reading of
"conv block") lets 3 epochs on 20k images reach ~.85-.9 clean accuracy; without it the models
stayed at .60-.76, under-trained and robust to noise in a way trained models are not.
`forward_patches` runs the network from an unfolded patch tensor (flat-mode ciphertexts).
Normalisation (x - m) / s is part of the model, so the pixel-domain stem is W / s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from methodkit.core.errors import DataError
from methodkit.tools.nte.stem import Stem

# name -> (kernel, stride, padding, channels)
ARCHS = {
    "pcnn-p4c8": (4, 4, 0, 8),
    "pcnn-p4c16": (4, 4, 0, 16),
    "pcnn-p7c24": (7, 7, 0, 24),
    "cnn3c16": (3, 1, 1, 16),
    "cnn5s2c12": (5, 2, 2, 12),
    "mlp": (28, 28, 0, 64),
}
FASHION_MEAN, FASHION_STD = 0.2860, 0.3530


@dataclass
class ModelConfig:
    arch: str
    seed: int
    image_size: int = 28
    mean: float = FASHION_MEAN
    std: float = FASHION_STD
    width: int = 32
    frozen_stem: bool = False  # True for the misalignment family (stem set, body retrained)
    batchnorm: bool = True

    def to_dict(self) -> dict:
        return asdict(self)


class StemNet(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.arch not in ARCHS:
            raise DataError(f"unknown architecture '{cfg.arch}' (known: {', '.join(ARCHS)})")
        self.cfg = cfg
        kernel, stride, padding, channels = ARCHS[cfg.arch]
        self.stem = nn.Conv2d(1, channels, kernel, stride, padding)
        self.out_side = (cfg.image_size + 2 * padding - kernel) // stride + 1
        w = cfg.width
        if cfg.arch == "mlp":
            norm1 = [nn.BatchNorm1d(128)] if cfg.batchnorm else []
            self.body = nn.Sequential(
                nn.ReLU(), nn.Flatten(), nn.Linear(channels, 128), *norm1, nn.ReLU(), nn.Linear(128, 10)
            )
        else:
            norm1 = [nn.BatchNorm2d(w)] if cfg.batchnorm else []
            norm2 = [nn.BatchNorm2d(w)] if cfg.batchnorm else []
            self.body = nn.Sequential(
                nn.ReLU(),
                nn.Conv2d(channels, w, 3, padding=1),
                *norm1,
                nn.ReLU(),
                nn.Conv2d(w, w, 3, padding=1, stride=2 if self.out_side > 8 else 1),
                *norm2,
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Linear(w, 10),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: raw pixels in [0, 1], (B, 1, H, W)."""
        return self.body(self.stem((x - self.cfg.mean) / self.cfg.std))

    def forward_patches(self, patches: torch.Tensor) -> torch.Tensor:
        """patches: raw-pixel patches (B, L, n) unfolded with mean padding (flat-mode ciphertext)."""
        weight = self.stem.weight.reshape(self.stem.out_channels, -1)
        features = ((patches - self.cfg.mean) / self.cfg.std) @ weight.T + self.stem.bias
        b = patches.shape[0]
        side = self.out_side
        return self.body(features.transpose(1, 2).reshape(b, -1, side, side))

    def stem_spec(self) -> Stem:
        _, stride, padding, _ = ARCHS[self.cfg.arch]
        return Stem(
            self.stem.weight.detach().cpu().numpy().astype(np.float64),
            stride,
            padding,
            (self.cfg.mean,),
            (self.cfg.std,),
        )

    def body_lipschitz(self, iterations: int = 30) -> float:
        """Product of spectral norms of the later linear/conv layers (a loose upper bound on L_h)."""
        bound = 1.0
        for layer in self.body:
            if isinstance(layer, nn.Linear):
                bound *= float(torch.linalg.matrix_norm(layer.weight.detach(), ord=2))
            elif isinstance(layer, nn.Conv2d):
                bound *= _conv_spectral_norm(layer, self.out_side, iterations)
            elif isinstance(layer, nn.modules.batchnorm._BatchNorm):  # eval mode: a per-channel scale
                scale = layer.weight.detach() / torch.sqrt(layer.running_var + layer.eps)
                bound *= float(scale.abs().max())
        return bound


def _conv_spectral_norm(layer: nn.Conv2d, side: int, iterations: int) -> float:
    """Power iteration on the conv operator (with its transpose) at input size side x side."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, layer.in_channels, side, side, generator=g)
    with torch.no_grad():
        for _ in range(iterations):
            y = nn.functional.conv2d(x, layer.weight, None, layer.stride, layer.padding)
            x = nn.functional.conv_transpose2d(
                y, layer.weight, None, layer.stride, layer.padding, output_padding=_output_padding(layer, side, y)
            )
            x = x / x.norm()
        y = nn.functional.conv2d(x, layer.weight, None, layer.stride, layer.padding)
    return float(y.norm())


def _output_padding(layer: nn.Conv2d, side: int, y: torch.Tensor) -> int:
    s, p, k = layer.stride[0], layer.padding[0], layer.kernel_size[0]
    return side - ((y.shape[-1] - 1) * s - 2 * p + k)


def build(cfg: ModelConfig) -> StemNet:
    torch.manual_seed(cfg.seed)
    return StemNet(cfg)
