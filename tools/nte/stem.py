"""Stem geometry: the first layer as a linear map on image patches, in the pixel domain.

A model sees normalised pixels (x - m_c) / s_c, so on raw [0, 1] pixels its stem acts as
W' = W D^-1 with D = diag(s_c of each patch coordinate). Everything in nte works with W'.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError, UsageError


@dataclass(frozen=True)
class Stem:
    weight: np.ndarray  # (c_out, c_in, k_h, k_w)
    stride: int
    padding: int = 0
    mean: tuple = (0.0,)  # per input channel
    std: tuple = (1.0,)

    def __post_init__(self):
        w = np.asarray(self.weight)
        if w.ndim != 4:
            raise UsageError(f"stem weight must be 4-D (c_out, c_in, k_h, k_w), got shape {w.shape}")
        if w.shape[2] != w.shape[3]:
            raise UsageError(f"stem kernel must be square, got {w.shape[2]}x{w.shape[3]}")
        if self.stride <= 0 or self.padding < 0:
            raise UsageError(f"stride must be positive and padding >= 0 (got {self.stride}, {self.padding})")
        if len(self.mean) != w.shape[1] or len(self.std) != w.shape[1]:
            raise UsageError(f"normalisation needs {w.shape[1]} channel values, got mean {self.mean} std {self.std}")
        if min(self.std) <= 0:
            raise UsageError("--norm-std values must be positive")

    @property
    def kernel(self) -> int:
        return int(self.weight.shape[2])

    @property
    def channels(self) -> int:
        return int(self.weight.shape[1])

    @property
    def n(self) -> int:
        """Patch dimension c_in * k * k."""
        return int(np.prod(self.weight.shape[1:]))

    @property
    def overlapping(self) -> bool:
        return self.stride < self.kernel

    def pixel_matrix(self) -> np.ndarray:
        """W' (c_out, n) acting on raw-pixel patches."""
        w = np.asarray(self.weight, dtype=np.float64).reshape(self.weight.shape[0], -1)
        scale = np.repeat(np.asarray(self.std, dtype=np.float64), self.kernel * self.kernel)
        return w / scale[None, :]

    def sha256(self) -> str:
        h = hashlib.sha256(np.ascontiguousarray(self.weight, dtype=np.float32).tobytes())
        h.update(f"{self.stride},{self.padding},{self.mean},{self.std}".encode())
        return h.hexdigest()

    def output_side(self, side: int) -> int:
        """Patches per row for an image of `side` pixels; refuses sizes that leave pixels unencoded."""
        span = side + 2 * self.padding - self.kernel
        if span < 0 or span % self.stride > self.padding:
            raise DataError(
                f"image side {side} with kernel {self.kernel}, stride {self.stride}, padding {self.padding} "
                f"leaves {span % self.stride if span >= 0 else side} trailing pixels unencodable; crop or pad the images to fit"
            )
        return span // self.stride + 1

    def geometry(self) -> dict:
        return {
            "c_out": int(self.weight.shape[0]),
            "c_in": self.channels,
            "kernel": self.kernel,
            "stride": self.stride,
            "padding": self.padding,
            "mean": list(self.mean),
            "std": list(self.std),
        }


def unfold(images: np.ndarray, kernel: int, stride: int, padding: int = 0) -> np.ndarray:
    """(B, C, H, W) -> (B, L, C*k*k) patches, row-major over patch positions (NumPy reference)."""
    b, c, h, w = images.shape
    x = np.pad(images, ((0, 0), (0, 0), (padding, padding), (padding, padding))) if padding else images
    windows = np.lib.stride_tricks.sliding_window_view(x, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride]
    # windows: (B, C, Ho, Wo, k, k) -> (B, Ho*Wo, C*k*k)
    ho, wo = windows.shape[2], windows.shape[3]
    return windows.transpose(0, 2, 3, 1, 4, 5).reshape(b, ho * wo, c * kernel * kernel)


def fold_average(patches: np.ndarray, shape: tuple, kernel: int, stride: int, padding: int = 0) -> np.ndarray:
    """Inverse of unfold that AVERAGES overlapping copies (the official code sums them: too bright)."""
    b, c, h, w = shape
    hp, wp = h + 2 * padding, w + 2 * padding
    ho, wo = (hp - kernel) // stride + 1, (wp - kernel) // stride + 1
    total = np.zeros((b, c, hp, wp))
    count = np.zeros((hp, wp))
    blocks = patches.reshape(b, ho, wo, c, kernel, kernel)
    for i in range(ho):
        for j in range(wo):
            total[:, :, i * stride : i * stride + kernel, j * stride : j * stride + kernel] += blocks[:, i, j]
            count[i * stride : i * stride + kernel, j * stride : j * stride + kernel] += 1
    out = total / np.maximum(count, 1)
    return out[:, :, padding : padding + h, padding : padding + w]


def border_masks(
    channels: int, kernel: int, stride: int, padding: int, h: int, w: int
) -> tuple[np.ndarray, np.ndarray]:
    """Non-overlapping stems: (masks (T, n) bool of real-pixel coordinates, types (L,) per patch).

    Type 0 is the interior (all coordinates real); each distinct border pattern (top, left,
    corner...) gets its own type, so its restricted basis is computed once.
    """
    rows = (h + 2 * padding - kernel) // stride + 1
    cols = (w + 2 * padding - kernel) // stride + 1
    dy, dx = np.meshgrid(np.arange(kernel), np.arange(kernel), indexing="ij")
    full = np.ones(channels * kernel * kernel, dtype=bool)
    masks = [full]
    types = np.zeros(rows * cols, dtype=np.int64)
    for i in range(rows):
        for j in range(cols):
            y = i * stride - padding + dy
            x = j * stride - padding + dx
            inside = np.tile(((y >= 0) & (y < h) & (x >= 0) & (x < w)).ravel(), channels)
            for t, mask in enumerate(masks):
                if np.array_equal(mask, inside):
                    types[i * cols + j] = t
                    break
            else:
                masks.append(inside)
                types[i * cols + j] = len(masks) - 1
    return np.array(masks), types
