"""8-bit PNG folders: ciphertexts that survive as ordinary image files (`encode --png DIR`).

A folder holds 000000.png, 000001.png, ... (grey or RGB), `labels.txt` (one label per line, when
known) and `meta.json` (key and stem hashes, PSNR, seed). Writing quantises to uint8 and clips to
[0, 1]; the certificate of such a ciphertext includes that residual. The folder is written under a
temporary name and renamed at the end, so a failed run leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from methodkit.core.errors import DataError, UsageError


def quantise(x: np.ndarray) -> np.ndarray:
    """float images in any range -> uint8 (clip to [0, 1], round)."""
    return np.round(np.clip(x, 0.0, 1.0) * 255.0).astype(np.uint8)


def write_png_dir(folder: str | os.PathLike, images: np.ndarray, labels=None, meta=None, force=False) -> None:
    from PIL import Image

    target = Path(folder)
    if target.exists() and not force:
        raise UsageError(f"{target}: exists; pass --force to replace it")
    if images.ndim != 4 or images.shape[1] not in (1, 3):
        raise DataError(f"PNG needs 1 or 3 channels, got images of shape {images.shape}")
    pixels = quantise(images) if images.dtype != np.uint8 else images
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent if str(target.parent) else "."))
    try:
        for i, image in enumerate(pixels):
            array = image[0] if image.shape[0] == 1 else image.transpose(1, 2, 0)
            Image.fromarray(array).save(staging / f"{i:06d}.png", optimize=False)
        if labels is not None:
            (staging / "labels.txt").write_text("".join(f"{int(v)}\n" for v in labels))
        (staging / "meta.json").write_text(json.dumps(meta or {}, indent=1))
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def read_png_dir(folder: str | os.PathLike) -> tuple[np.ndarray, np.ndarray | None, dict]:
    """(x float32 (N, C, H, W) in [0, 1], labels or None, meta dict) from a PNG folder."""
    from PIL import Image

    path = Path(folder)
    files = sorted(p for p in path.iterdir() if p.suffix.lower() == ".png")
    if not files:
        raise DataError(f"{path}: no .png files")
    arrays = []
    for file in files:
        try:
            with Image.open(file) as image:
                mode = "L" if image.mode in ("1", "L", "I;16", "I", "P", "LA") else "RGB"
                array = np.asarray(image.convert(mode))
        except OSError as exc:
            raise DataError(f"{file}: not a readable PNG ({exc})") from None
        arrays.append(array[None] if array.ndim == 2 else array.transpose(2, 0, 1))
        if arrays[-1].shape != arrays[0].shape:
            raise DataError(f"{file}: shape {arrays[-1].shape} differs from {files[0].name}'s {arrays[0].shape}")
    x = (np.stack(arrays) / 255.0).astype(np.float32)
    labels = None
    if (path / "labels.txt").exists():
        lines = (path / "labels.txt").read_text().split()
        if len(lines) != len(x):
            raise DataError(f"{path / 'labels.txt'}: {len(lines)} labels for {len(x)} images")
        try:
            labels = np.array([int(v) for v in lines], dtype=np.int64)
        except ValueError:
            raise DataError(f"{path / 'labels.txt'}: labels must be integers") from None
    meta = json.loads((path / "meta.json").read_text()) if (path / "meta.json").exists() else {}
    return x, labels, meta
