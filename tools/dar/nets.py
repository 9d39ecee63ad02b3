"""The issue's victim networks: cnn-s (teacher), cnn-xs (KD student), resnet8; `width` scales channels.
Plus the linear-probe setting: a user-supplied frozen TorchScript encoder with a trainable linear head
(`--backbone torchscript:PATH`; the issue's stand-in for CLIP, whose weights cannot be had offline)."""

from __future__ import annotations

import torch
from torch import nn

from methodkit.tools.dar.choices import ARCHS  # noqa: F401 (re-exported)


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


class FrozenBackbone(nn.Module):
    """A frozen TorchScript encoder (its outputs flattened to features) and a trainable linear head."""

    def __init__(self, encoder, features: int, classes: int):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(features, classes)

    def train(self, mode: bool = True):
        super().train(mode)
        self.encoder.eval()  # frozen: batch-norm statistics and dropout of the encoder never change
        return self

    def forward(self, x):
        with torch.no_grad():
            features = self.encoder(x).flatten(1)
        return self.head(features)


def load_backbone(spec: str, side: int):
    """`torchscript:PATH` -> (frozen encoder, feature count, path, file SHA-256)."""
    import hashlib

    from methodkit.core.errors import DataError, UsageError

    if not spec.startswith("torchscript:") or not spec[len("torchscript:") :]:
        raise UsageError(f"--backbone must be torchscript:PATH, got {spec!r}")
    path = spec[len("torchscript:") :]
    try:
        encoder = torch.jit.load(path, map_location="cpu")
        with open(path, "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
    except (OSError, RuntimeError, ValueError) as exc:
        raise DataError(f"{path}: cannot load as a TorchScript encoder ({str(exc).splitlines()[0][:120]})") from None
    encoder.eval()
    for p in encoder.parameters():
        p.requires_grad_(False)
    try:
        with torch.no_grad():
            probe = encoder(torch.zeros(2, 1, side, side))
    except Exception as exc:  # a foreign module: any error means it does not take (N, 1, side, side) images
        raise DataError(
            f"{path}: the encoder does not take (N, 1, {side}, {side}) images ({type(exc).__name__})"
        ) from None
    if not isinstance(probe, torch.Tensor) or probe.ndim < 2 or probe.shape[0] != 2:
        raise DataError(f"{path}: the encoder must return one feature tensor per image")
    return encoder, int(probe.flatten(1).shape[1]), path, digest


def build(arch: str, classes: int, side: int, width: int = 32) -> nn.Module:
    kinds = {"cnn-s": CnnS, "cnn-xs": CnnXS, "resnet8": ResNet8}
    return kinds[arch](classes, side, width)
