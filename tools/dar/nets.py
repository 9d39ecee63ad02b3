"""The issue's victim networks: cnn-s (teacher), cnn-xs (KD student), resnet8; `width` scales channels."""

from __future__ import annotations

import torch
from torch import nn

ARCHS = ("cnn-s", "cnn-xs", "resnet8")


class CnnS(nn.Module):
    """conv w - conv 2w - pool - conv 4w - pool - fc 8w (w = 32 in the issue)."""

    def __init__(self, classes: int, side: int, w: int = 32):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, w, 3, padding=1), nn.ReLU(), nn.Conv2d(w, 2 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * w, 4 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(4 * w * (side // 4) ** 2, 8 * w), nn.ReLU(), nn.Linear(8 * w, classes),
        )  # fmt: skip

    def forward(self, x):
        return self.body(x)


class CnnXS(nn.Module):
    """conv w/2 - conv w - pool - fc 4w (w = 32: conv16-conv32-pool-fc128)."""

    def __init__(self, classes: int, side: int, w: int = 32):
        super().__init__()
        h = max(w // 2, 1)
        self.body = nn.Sequential(
            nn.Conv2d(1, h, 3, padding=1), nn.ReLU(), nn.Conv2d(h, w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(w * (side // 2) ** 2, 4 * w), nn.ReLU(), nn.Linear(4 * w, classes),
        )  # fmt: skip

    def forward(self, x):
        return self.body(x)


class Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = (
            nn.Identity()
            if stride == 1 and cin == cout
            else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        )

    def forward(self, x):
        return torch.relu(self.b(self.a(x)) + self.skip(x))


class ResNet8(nn.Module):
    """Stem + three residual blocks of widths w/2, w, 2w (16/32/64 for w = 32), global pool, linear."""

    def __init__(self, classes: int, side: int, w: int = 32):
        super().__init__()
        a, b, c = max(w // 2, 1), w, 2 * w
        self.body = nn.Sequential(
            nn.Conv2d(1, a, 3, padding=1, bias=False), nn.BatchNorm2d(a), nn.ReLU(),
            Block(a, a, 1), Block(a, b, 2), Block(b, c, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, classes),
        )  # fmt: skip

    def forward(self, x):
        return self.body(x)


def build(arch: str, classes: int, side: int, width: int = 32) -> nn.Module:
    kinds = {"cnn-s": CnnS, "cnn-xs": CnnXS, "resnet8": ResNet8}
    return kinds[arch](classes, side, width)
