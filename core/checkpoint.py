"""Model checkpoints: safetensors for the tensors, a JSON sidecar for everything else.

The sidecar holds the model config, a fingerprint of the training data, library
versions and a hash of the caller's *spec* (whatever must match for the tensors to
mean the same thing: vocabulary, state layout, architecture). Loading refuses a
checkpoint whose spec hash differs from the caller's, naming both hashes.
Nothing is pickled.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from methodkit.core.errors import DataError
from methodkit.core.io import atomic_write, jsonable


def spec_hash(spec: dict) -> str:
    """A stable short hash of a JSON-able spec (key order does not matter)."""
    text = json.dumps(jsonable(spec), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def sidecar_path(path: str | os.PathLike) -> Path:
    return Path(path).with_suffix(".json")


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in ("methodkit", "torch", "numpy", "safetensors"):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            pass
    return out


def save(
    path: str | os.PathLike,
    tensors: dict,
    *,
    config: dict,
    spec: dict,
    fingerprint: str | None = None,
    extra: dict | None = None,
) -> None:
    """Write `path` (.safetensors) and its sidecar atomically; each replaces an older one."""
    import torch
    from safetensors.torch import save as to_bytes

    payload = to_bytes({k: v.detach().to("cpu").contiguous() for k, v in tensors.items() if torch.is_tensor(v)})
    sidecar = {
        "config": config,
        "spec": spec,
        "spec_hash": spec_hash(spec),
        "data_fingerprint": fingerprint,
        "versions": _versions(),
        **(extra or {}),
    }
    with atomic_write(path, force=True) as handle:
        handle.write(payload)
    with atomic_write(sidecar_path(path), force=True) as handle:
        handle.write((json.dumps(jsonable(sidecar), indent=1, sort_keys=True) + "\n").encode())


def load(path: str | os.PathLike, *, expected_spec: dict | None = None, device: str = "cpu") -> tuple[dict, dict]:
    """(tensors, sidecar); a missing file or a spec mismatch is a DataError (exit 2)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    side = sidecar_path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such checkpoint")
    if not side.is_file():
        raise DataError(f"{path}: sidecar {side.name} is missing; a checkpoint needs both files")
    try:
        sidecar = json.loads(side.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise DataError(f"{side}: byte {exc.start}: not UTF-8 text; a sidecar is a JSON file") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{side}: line {exc.lineno}: invalid JSON ({exc.msg})") from None
    if not isinstance(sidecar, dict):
        raise DataError(f"{side}: a sidecar is a JSON object, not {type(sidecar).__name__}")
    if expected_spec is not None:
        want = spec_hash(expected_spec)
        have = sidecar.get("spec_hash")
        if have != want:
            raise DataError(
                f"{path}: checkpoint spec {have} does not match this run's spec {want}; "
                "it was trained for other data or another model layout"
            )
    try:
        tensors = load_file(str(path), device=device)
    except (SafetensorError, OSError) as exc:
        raise DataError(f"{path}: not a safetensors file ({exc})") from None
    return tensors, sidecar
