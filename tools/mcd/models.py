"""Teacher and student transformers (core.nn), their presets, checkpoints and training windows."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from methodkit.core.errors import DataError

# (layers, width, heads). Teacher "base" and students "moderate"/"aggressive" are the sizes.
PRESETS = {
    "base": (4, 256, 4),
    "small": (4, 128, 4),
    "moderate": (2, 128, 4),
    "aggressive": (2, 64, 2),
    "tiny": (2, 32, 2),
    "micro": (2, 16, 2),
}


def model_config(preset: str, ctx: int, vocab_size: int, layers: int | None = None, width: int | None = None):
    from methodkit.core.nn.transformer import TransformerConfig

    n_layers, d_model, heads = PRESETS[preset]
    n_layers, d_model = layers or n_layers, width or d_model
    heads = heads if d_model % heads == 0 else 1
    return TransformerConfig(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=heads, max_len=ctx)


def build(cfg, seed: int):
    import torch

    from methodkit.core.nn.transformer import DecoderTransformer

    torch.manual_seed(seed)
    return DecoderTransformer(cfg)


def non_embedding_params(model) -> int:
    skip = {"embed.weight", "lm_head.weight"}
    return int(sum(p.numel() for n, p in model.named_parameters() if n not in skip))


def weights_sha(model) -> str:
    """SHA-256 over the state dict (names, shapes, bytes): what transcoders and graph caches are keyed by."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def save_model(path, model, *, tokenizer: dict, fingerprint: str, extra: dict | None = None) -> None:
    from methodkit.core import checkpoint

    cfg = model.cfg.to_dict()
    checkpoint.save(
        path,
        {k: v for k, v in model.state_dict().items()},
        config=cfg,
        spec={"model": cfg, "tokenizer": tokenizer},
        fingerprint=fingerprint,
        extra={"weights_sha256": weights_sha(model), "tokenizer": tokenizer, **(extra or {})},
    )


def load_model(path):
    """(model in eval mode, sidecar). A folder means FOLDER/model.safetensors."""
    from methodkit.core import checkpoint
    from methodkit.core.nn.transformer import DecoderTransformer, TransformerConfig

    path = Path(path)
    if path.is_dir():
        path = path / "model.safetensors"
    if path.suffix != ".safetensors":
        raise DataError(f"{path}: not a checkpoint (give a .safetensors file or the folder holding one)")
    tensors, sidecar = checkpoint.load(path)
    try:
        cfg = TransformerConfig(**sidecar["config"])
    except (KeyError, TypeError) as exc:
        raise DataError(f"{path}: sidecar has no transformer config ({exc})") from None
    model = DecoderTransformer(cfg)
    state = {k[6:] if k.startswith("model.") else k: v for k, v in tensors.items() if not k.startswith("optim.")}
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise DataError(f"{path}: tensors do not fit the config ({str(exc).splitlines()[0]})") from None
    model.eval()
    return model, sidecar


def tokenizer_of(sidecar: dict) -> dict:
    return sidecar.get("tokenizer") or sidecar.get("spec", {}).get("tokenizer") or {}


def require_same_tokenizer(teacher: dict, student: dict, where: str) -> None:
    """Descriptors live in vocabulary space: teacher and student must share one tokenizer."""
    if json.dumps(teacher, sort_keys=True) != json.dumps(student, sort_keys=True):
        raise DataError(
            f"{where}: tokenizer {student.get('kind')}/{student.get('vocab_size')} differs from the teacher's "
            f"{teacher.get('kind')}/{teacher.get('vocab_size')}; MCD needs one shared vocabulary"
        )


@dataclass
class Windows:
    """Fixed training windows of `ctx + 1` tokens cut from one split's stream (item i -> window i)."""

    stream: np.ndarray
    starts: np.ndarray
    ctx: int

    @classmethod
    def cut(cls, stream: np.ndarray, ctx: int, n: int, seed: int) -> Windows:
        room = len(stream) - ctx - 1
        if room <= 0:
            raise DataError(f"token stream of {len(stream)} tokens is shorter than one window of {ctx + 1}")
        starts = np.random.default_rng(np.random.SeedSequence([seed, 11])).integers(0, room, n)
        return cls(stream, np.sort(starts), ctx)

    def __len__(self) -> int:
        return len(self.starts)

    def batch(self, idx):
        import torch

        rows = np.stack([self.stream[s : s + self.ctx + 1] for s in self.starts[np.asarray(idx)]]).astype(np.int64)
        rows = torch.from_numpy(rows)
        return rows[:, :-1], rows[:, 1:]

    def sha(self) -> str:
        digest = hashlib.sha256(np.ascontiguousarray(self.stream).tobytes())
        digest.update(self.starts.tobytes())
        digest.update(str(self.ctx).encode())
        return digest.hexdigest()


def cross_entropy(model, windows: Windows, max_items: int = 256) -> float:
    import torch
    from torch.nn import functional as F

    idx = np.arange(min(len(windows), max_items))
    total, count = 0.0, 0
    with torch.no_grad():
        for chunk in np.array_split(idx, max(1, len(idx) // 32)):
            x, y = windows.batch(chunk)
            logits = model(x)
            total += float(F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum"))
            count += y.numel()
    return total / max(count, 1)


def ensure_folder(path: str | os.PathLike) -> Path:
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
