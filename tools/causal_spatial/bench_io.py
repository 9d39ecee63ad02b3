"""Reading a generated benchmark folder: items, meta, images, sensors, scene specs."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from methodkit.core import io
from methodkit.core.errors import DataError

ITEM_KEYS = ("id", "task", "level", "question", "options", "answer", "not_sure")


def load_items(bench: str | Path) -> list[dict]:
    folder = Path(bench)
    path = folder / "items.jsonl"
    if not path.is_file():
        raise DataError(f"{folder}: no items.jsonl (expected a folder written by 'causal-spatial generate')")
    items = io.read_jsonl(path)
    for i, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise DataError(f"{path}: line {i}: expected a JSON object")
        missing = [k for k in ITEM_KEYS if k not in item]
        if missing:
            raise DataError(f"{path}: line {i}: missing key '{missing[0]}'")
    return items


def load_meta(bench: str | Path) -> dict:
    path = Path(bench) / "meta.json"
    if not path.is_file():
        raise DataError(f"{bench}: no meta.json")
    return io.read_json(path)


def image(bench: str | Path, item: dict) -> np.ndarray:
    from PIL import Image

    if not item.get("image"):
        raise DataError(f"{item['id']}: the benchmark has no images (generated with --gl none)")
    path = Path(bench) / item["image"]
    try:
        with Image.open(path) as pic:
            return np.asarray(pic.convert("RGB"))
    except OSError as exc:
        raise DataError(f"{path}: cannot read image ({exc})") from None


def sensors(bench: str | Path, item: dict) -> dict:
    if not item.get("sensors"):
        raise DataError(f"{item['id']}: no sensors (depth, instance ids, K, T); COW 'perceive' needs them")
    arrays = io.read_arrays(Path(bench) / item["sensors"])
    for key in ("depth", "ids", "K", "T"):
        if key not in arrays:
            raise DataError(f"{Path(bench) / item['sensors']}: missing array '{key}'")
    return arrays


def scene_spec(bench: str | Path, item: dict) -> dict:
    return io.read_json(Path(bench) / item["scene"])["spec"]
