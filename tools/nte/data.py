"""Image inputs of nte: NPZ files (x [, y]) or a named image set (`fashion-mnist:test`)."""

from __future__ import annotations

import numpy as np

from methodkit.core import images as image_sets
from methodkit.core.errors import DataError

CHANNEL_COUNTS = (1, 3, 4)  # grey, RGB, RGBA: anything else in axis 1 is a layout mistake


def from_dataset(spec: str, limit: int | None = None, offset: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """'name[:split]' -> (x float32 (N, 1, H, W) in [0, 1], y int64)."""
    name, _, split = spec.partition(":")
    x, y = image_sets.load_images(name, split or "test")
    end = None if limit is None else offset + limit
    x, y = x[offset:end], y[offset:end]
    if len(x) == 0:
        raise DataError(f"--dataset {spec}: no images left after --offset {offset} / --limit {limit}")
    return (x[:, None] / 255.0).astype(np.float32), y


def from_arrays(arrays: dict, name: str) -> tuple[np.ndarray, np.ndarray | None]:
    if "x" not in arrays:
        raise DataError(f"{name}: no array 'x' (keys: {', '.join(arrays) or 'none'}); images go in x, labels in y")
    x = arrays["x"]
    if x.ndim == 3:
        x = x[:, None]
    if x.ndim != 4:
        raise DataError(f"{name}: x must have shape (N, C, H, W) or (N, H, W), got {x.shape}")
    if x.shape[3] in CHANNEL_COUNTS and x.shape[1] not in CHANNEL_COUNTS:  # channels-last (N, H, W, C)
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    if x.shape[1] not in CHANNEL_COUNTS:
        raise DataError(
            f"{name}: x of shape {x.shape} has {x.shape[1]} channels; expected (N, C, H, W) with C 1, 3 or 4"
        )
    if len(x) == 0:
        raise DataError(f"{name}: x holds 0 images")
    if x.dtype == np.uint8:
        x = (x / 255.0).astype(np.float32)
    else:
        x = x.astype(np.float32)
        if not np.isfinite(x).all():
            raise DataError(f"{name}: x contains NaN or infinite values")
        if x.min() < 0 or x.max() > 1:
            raise DataError(f"{name}: float images must lie in [0, 1], got {x.min():.3g}..{x.max():.3g}")
    y = arrays.get("y")
    if y is not None and len(y) != len(x):
        raise DataError(f"{name}: {len(y)} labels for {len(x)} images")
    return x, None if y is None else np.asarray(y, dtype=np.int64)
