"""Text to token ids and back: UTF-8 bytes (uint8 ids) or a byte-level BPE trained on a corpus.

Both expose the same small interface (encode, decode, vocab_size, dtype, spec). `spec()` is what a
checkpoint sidecar records: the kind, the vocabulary size and a SHA-256 of the tokenizer's canonical
JSON, so a model is never paired with a tokenizer it was not trained with.

The BPE goes through Hugging Face's `tokenizers` package (pip install 'methodkit[text]'): a
byte-level pre-tokenizer (GPT-2's), so every string round-trips and nothing is ever unknown.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from methodkit.core.errors import DataError, require

END_OF_TEXT = "<|endoftext|>"  # the BPE's one special token (id 0): a document separator for callers


def _ids_dtype(vocab_size: int):
    return np.uint8 if vocab_size <= 2**8 else np.uint16 if vocab_size <= 2**16 else np.uint32


class ByteTokenizer:
    """UTF-8 bytes as ids 0-255; decoding replaces an invalid byte sequence with U+FFFD."""

    kind = "bytes"
    vocab_size = 256
    dtype = np.uint8

    def encode(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy()

    def encode_batch(self, texts: Iterable[str]) -> list[np.ndarray]:
        return [self.encode(text) for text in texts]

    def decode(self, ids) -> str:
        return np.asarray(ids, dtype=np.uint8).tobytes().decode("utf-8", errors="replace")

    @property
    def sha256(self) -> str:
        return hashlib.sha256(b"methodkit byte tokenizer: UTF-8, ids 0-255").hexdigest()

    def spec(self) -> dict:
        return {"kind": self.kind, "vocab_size": self.vocab_size, "sha256": self.sha256}


class BPETokenizer:
    """A byte-level BPE (a `tokenizers.Tokenizer`); build one with `train` or `load`."""

    kind = "bpe"

    def __init__(self, tokenizer):
        self._tok = tokenizer
        self.vocab_size = tokenizer.get_vocab_size()
        self.dtype = _ids_dtype(self.vocab_size)
        self.end_of_text = tokenizer.token_to_id(END_OF_TEXT)

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, *, min_frequency: int = 2) -> BPETokenizer:
        """Learn merges on `texts` (pass the training split only, so no held-out text shapes them)."""
        tk = require("tokenizers", "text")
        if vocab_size < 257:
            raise DataError(f"BPE vocabulary size {vocab_size} is below 257 (256 bytes and {END_OF_TEXT})")
        tokenizer = tk.Tokenizer(tk.models.BPE())
        tokenizer.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = tk.decoders.ByteLevel()
        trainer = tk.trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=[END_OF_TEXT],
            initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tokenizer.train_from_iterator(list(texts), trainer=trainer)
        return cls(tokenizer)

    def encode(self, text: str) -> np.ndarray:
        return np.asarray(self._tok.encode(text).ids, dtype=self.dtype)

    def encode_batch(self, texts: Iterable[str]) -> list[np.ndarray]:
        return [np.asarray(e.ids, dtype=self.dtype) for e in self._tok.encode_batch(list(texts))]

    def decode(self, ids) -> str:
        return self._tok.decode(np.asarray(ids).tolist(), skip_special_tokens=False)

    def to_json(self) -> str:
        """The tokenizer as canonical JSON (sorted keys), the text that is saved and hashed."""
        return json.dumps(json.loads(self._tok.to_str()), sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.to_json().encode("utf-8")).hexdigest()

    def spec(self) -> dict:
        return {"kind": self.kind, "vocab_size": self.vocab_size, "sha256": self.sha256}

    def save(self, path: str | os.PathLike, *, force: bool = False) -> None:
        from methodkit.core.io import atomic_write

        with atomic_write(path, force=force) as handle:
            handle.write((self.to_json() + "\n").encode("utf-8"))

    @classmethod
    def load(cls, path: str | os.PathLike, *, expected_sha256: str | None = None) -> BPETokenizer:
        """Read a saved tokenizer; with `expected_sha256` (from a checkpoint), refuse any other one."""
        tk = require("tokenizers", "text")
        path = Path(path)
        if not path.is_file():
            raise DataError(f"{path}: no such tokenizer file")
        try:
            tokenizer = cls(tk.Tokenizer.from_str(path.read_text(encoding="utf-8")))
        except Exception as exc:  # tokenizers raises a bare Exception for malformed JSON
            raise DataError(f"{path}: not a tokenizers JSON file ({str(exc).splitlines()[0]})") from None
        if expected_sha256 is not None and tokenizer.sha256 != expected_sha256:
            raise DataError(
                f"{path}: tokenizer sha256 {tokenizer.sha256[:16]} does not match the checkpoint's "
                f"{expected_sha256[:16]}; pass the tokenizer the model was trained with"
            )
        return tokenizer


def make_tokenizer(kind: str, train_texts: Iterable[str] = ()) -> ByteTokenizer | BPETokenizer:
    """'bytes', 'bpe:N' (a BPE of N ids trained on `train_texts`) or the path of a saved BPE."""
    if kind == "bytes":
        return ByteTokenizer()
    if kind.startswith("bpe:"):
        try:
            size = int(kind[4:])
        except ValueError:
            raise DataError(f"tokenizer '{kind}': the vocabulary size after 'bpe:' is not an integer") from None
        return BPETokenizer.train(train_texts, size)
    return BPETokenizer.load(kind)
