"""Small image classifiers (MLP and CNN) for 28x28 / 8x8 grey-scale sets, sized for a laptop CPU."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn


@dataclass
class ClassifierConfig:
    arch: str  # one of ARCHITECTURES
    in_channels: int = 1
    image_size: int = 28
    n_classes: int = 10
    width: int = 32  # channels of the first conv layer / hidden units / 4 of the MLP
    dropout: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


class MLP(nn.Module):
    def __init__(self, cfg: ClassifierConfig):
        super().__init__()
        hidden = 4 * cfg.width
        self.features = nn.Sequential(
            nn.Flatten(),
            nn.Linear(cfg.in_channels * cfg.image_size**2, hidden),
            nn.ReLU(),
            nn.Dropout(cfg.dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
        )
        self.head = nn.Linear(hidden, cfg.n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class SmallCNN(nn.Module):
    """Two conv blocks (conv-BN-ReLU-pool), global average pooling, linear head."""

    def __init__(self, cfg: ClassifierConfig):
        super().__init__()
        w = cfg.width
        self.features = nn.Sequential(
            nn.Conv2d(cfg.in_channels, w, 3, padding=1),
            nn.BatchNorm2d(w),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(w, 2 * w, 3, padding=1),
            nn.BatchNorm2d(2 * w),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Dropout(cfg.dropout),
        )
        self.head = nn.Linear(2 * w, cfg.n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class WideCNN(nn.Module):
    """Three conv blocks with a dense head: a different inductive bias from SmallCNN (for transfer studies)."""

    def __init__(self, cfg: ClassifierConfig):
        super().__init__()
        w = cfg.width
        side = cfg.image_size // 4
        self.features = nn.Sequential(
            nn.Conv2d(cfg.in_channels, w, 5, padding=2),
            nn.ReLU(),
            nn.Conv2d(w, w, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(w, 2 * w, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(2 * w * side * side, 4 * w),
            nn.ReLU(),
            nn.Dropout(cfg.dropout),
        )
        self.head = nn.Linear(4 * w, cfg.n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


ARCHITECTURES = {"mlp": MLP, "cnn": SmallCNN, "widecnn": WideCNN}


def build_classifier(cfg: ClassifierConfig) -> nn.Module:
    try:
        return ARCHITECTURES[cfg.arch](cfg)
    except KeyError:
        raise ValueError(f"unknown architecture {cfg.arch!r} (known: {', '.join(ARCHITECTURES)})") from None
