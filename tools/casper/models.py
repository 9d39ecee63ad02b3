"""The small predictors Casper sits on: a 4-layer CNN for maps, an MLP digit classifier, a sum-digit head.

Kept here (not core/nn) because the shared blocks did not exist when this method was written.
"""

from __future__ import annotations

import torch
from torch import nn


class MapCNN(nn.Module):
    """(B, 3, 4n, 4n) uint8-scaled image -> (B, n, n) logit that the cell is on the path; fully convolutional."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.tile = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, width, 3, padding=1), nn.ReLU()
        )
        self.pool = nn.AvgPool2d(4)
        self.cell = nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, 1, 1))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.float() / 255.0
        return self.cell(self.pool(self.tile(x))).squeeze(1)


class DigitMLP(nn.Module):
    """8x8 scikit-learn digit (values 0..16) -> logits over `classes` digits (64-128-classes)."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, classes))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images.float() / 16.0)


class SumHead(nn.Module):
    """The column's two digit distributions -> logits of its sum digit (carry-blind; Casper fixes that)."""

    def __init__(self, base: int = 10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2 * base, 64), nn.ReLU(), nn.Linear(64, base))

    def forward(self, pa: torch.Tensor, pb: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([pa, pb], dim=-1))


def build(task: str) -> nn.Module:
    if task == "warcraft":
        return MapCNN()
    if task == "sudoku":
        return DigitMLP(classes=9)
    if task == "shidoku":
        return DigitMLP(classes=4)
    if task == "mnist-add":
        return nn.ModuleDict({"digit": DigitMLP(classes=10), "sum": SumHead()})
    raise ValueError(task)
