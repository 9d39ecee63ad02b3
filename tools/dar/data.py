"""Image sets for dar: NPZ files (x, y) or built-in sets (fashion-mnist, mnist5k, synthetic)."""

from __future__ import annotations

import numpy as np

from methodkit.core import images as shipped
from methodkit.core.errors import DataError

BUILTIN = ("fashion-mnist", "mnist5k", "synthetic")


def as_uint8(x: np.ndarray, name: str) -> np.ndarray:
    """(N, H, W) grey uint8; float images must lie in [0, 1]; the last axis of (N, H, W, 1) is dropped."""
    if x.ndim == 4 and x.shape[-1] == 1:
        x = x[..., 0]
    if x.ndim != 3:
        raise DataError(f"{name}: x must have shape (N, H, W) (grey images), got {x.shape}")
    if x.dtype == np.uint8:
        return x
    if not np.issubdtype(x.dtype, np.floating):
        raise DataError(f"{name}: x has dtype {x.dtype}; use uint8 or float in [0, 1]")
    if not np.isfinite(x).all():
        raise DataError(f"{name}: x contains NaN or infinite values")
    if x.min() < 0 or x.max() > 1:
        raise DataError(f"{name}: float pixels must lie in [0, 1], got {x.min():.3g}..{x.max():.3g}")
    return np.rint(x * 255).astype(np.uint8)


def from_arrays(arrays: dict, name: str, classes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    for key in ("x", "y"):
        if key not in arrays:
            raise DataError(f"{name}: array '{key}' missing (keys: {', '.join(arrays) or 'none'})")
    x = as_uint8(arrays["x"], name)
    if len(x) == 0:
        raise DataError(f"{name}: x holds 0 images")
    y = np.asarray(arrays["y"])
    if y.ndim != 1 or len(y) != len(x):
        raise DataError(f"{name}: y must be one label per image ({len(x)}), got shape {y.shape}")
    if not np.issubdtype(y.dtype, np.integer) or y.min() < 0 or (classes is not None and y.max() >= classes):
        raise DataError(f"{name}: labels must be integers in 0..{(classes or 10) - 1}")
    return x, y.astype(np.int64)


def synthetic(n: int, seed: int, classes: int = 10, side: int = 28, planted: float = 0.02):
    """Blurred random class shapes plus a planted natural pattern: a bright 3x3 blob at (4, 20) in a
    `planted` share of images, spread uniformly over the classes (ground truth for discover)."""
    from scipy import ndimage

    rng = np.random.default_rng(seed)
    prototypes = ndimage.gaussian_filter(rng.random((classes, side, side)), (0, 2, 2))
    prototypes = (prototypes - prototypes.min()) / (prototypes.max() - prototypes.min())
    y = rng.integers(0, classes, n)
    x = prototypes[y] * 0.6 + 0.25 * ndimage.gaussian_filter(rng.random((n, side, side)), (0, 1, 1))
    x[:, 3:8, 19:24] *= 0.3  # a dark neighbourhood makes the blob a distinct cell
    blob = rng.random(n) < planted
    x[blob, 4:7, 20:23] = 0.95
    return np.clip(np.rint(x * 255), 0, 255).astype(np.uint8), y.astype(np.int64), blob


def load(name: str, split: str, limit: int | None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    if name == "synthetic":
        # one draw (same class prototypes) split 6000 / 2000: the test images follow the train distribution
        x, y, _ = synthetic(8000, seed)
        x, y = (x[:6000], y[:6000]) if split == "train" else (x[6000:], y[6000:])
    elif name in ("fashion-mnist", "mnist5k"):
        x, y = shipped.load_images("mnist-5k" if name == "mnist5k" else name, split)
    else:
        raise DataError(f"unknown --dataset '{name}' (known: {', '.join(BUILTIN)})")
    return (x[:limit], y[:limit]) if limit else (x, y)
