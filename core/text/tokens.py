"""Token files: a corpus encoded once, split by document, stored as NPZ through core.io.

An NPZ token file holds
- `ids`: every document's token ids, concatenated (uint8 for bytes, uint16/uint32 for a BPE);
- `offsets`: int64 (n_documents + 1,), document i is ids[offsets[i]:offsets[i+1]];
- `split`: uint8 (n_documents,), 0 train, 1 val, 2 test;
- `meta`: a JSON string: the corpus name, the tokenizer's spec (kind, vocab_size, sha256), the seed.

The split is by document, seeded, and identical documents (the same text after stripping) always
fall in the same split, so no held-out text is also seen in training.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError

SPLITS = ("train", "val", "test")


def split_documents(texts: Sequence[str], *, val: float = 0.1, test: float = 0.0, seed: int = 0) -> np.ndarray:
    """Split code (0 train, 1 val, 2 test) per document: a seeded shuffle of the distinct texts.

    Each held-out split gets round(fraction * distinct texts) of them, at least one when its fraction
    is positive; every copy of a text goes where the text goes.
    """
    from methodkit.core.rng import generator

    if val < 0 or test < 0 or val + test >= 1:
        raise DataError(f"split fractions val={val} test={test}: each must be >= 0 and together below 1")
    keys = [hashlib.sha256(text.strip().encode("utf-8")).digest() for text in texts]
    distinct = sorted(set(keys))  # sorted: the order is a function of the texts, not of their order of arrival
    n = len(distinct)
    n_val = max(1, round(val * n)) if val > 0 else 0
    n_test = max(1, round(test * n)) if test > 0 else 0
    if n - n_val - n_test < 1:
        raise DataError(
            f"{len(texts)} documents ({n} distinct) cannot be split val={val} test={test} with one left to train on"
        )
    order = generator(seed).permutation(n)
    code_of = np.zeros(n, dtype=np.uint8)
    code_of[order[:n_val]] = 1
    code_of[order[n_val : n_val + n_test]] = 2
    index = {key: i for i, key in enumerate(distinct)}
    return np.array([code_of[index[key]] for key in keys], dtype=np.uint8)


@dataclass
class TokenFile:
    ids: np.ndarray
    offsets: np.ndarray
    split: np.ndarray
    meta: dict

    def __post_init__(self):
        n = len(self.split)
        if self.offsets.shape != (n + 1,) or self.offsets[0] != 0 or self.offsets[-1] != len(self.ids):
            raise DataError(f"token file: {n} documents but offsets do not span the {len(self.ids)} ids")
        if np.any(np.diff(self.offsets) < 0):
            raise DataError("token file: document offsets decrease")

    @property
    def n_documents(self) -> int:
        return len(self.split)

    def document(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i] : self.offsets[i + 1]]

    def documents(self, split: str) -> list[np.ndarray]:
        code = _split_code(split)
        return [self.document(i) for i in np.flatnonzero(self.split == code)]

    def stream(self, split: str, separator: int | None = None) -> np.ndarray:
        """One split's documents end to end (with `separator` between them, e.g. the BPE's end-of-text id)."""
        docs = self.documents(split)
        if separator is not None:
            sep = np.array([separator], dtype=self.ids.dtype)
            docs = [part for doc in docs for part in (doc, sep)][:-1]
        return np.concatenate(docs) if docs else np.zeros(0, dtype=self.ids.dtype)

    def n_tokens(self, split: str | None = None) -> int:
        lengths = np.diff(self.offsets)
        return int(lengths.sum() if split is None else lengths[self.split == _split_code(split)].sum())

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the ids, offsets, split and tokenizer hash: the data fingerprint a checkpoint records."""
        digest = hashlib.sha256()
        for array in (self.ids, self.offsets, self.split):
            digest.update(str(array.dtype).encode())
            digest.update(np.ascontiguousarray(array).tobytes())
        digest.update(self.meta.get("tokenizer", {}).get("sha256", "").encode())
        return digest.hexdigest()

    def save(self, path: str | os.PathLike, *, force: bool = False) -> None:
        from methodkit.core.io import write_arrays

        write_arrays(
            path,
            {"ids": self.ids, "offsets": self.offsets, "split": self.split, "meta": np.array(json.dumps(self.meta))},
            force=force,
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> TokenFile:
        from methodkit.core.io import read_arrays

        arrays = read_arrays(path)
        missing = [key for key in ("ids", "offsets", "split", "meta") if key not in arrays]
        if missing:
            raise DataError(f"{path}: not a token file (no {', '.join(missing)} array)")
        return cls(arrays["ids"], arrays["offsets"].astype(np.int64), arrays["split"], json.loads(str(arrays["meta"])))


def _split_code(split: str) -> int:
    if split not in SPLITS:
        raise DataError(f"unknown split '{split}' (known: {', '.join(SPLITS)})")
    return SPLITS.index(split)


def encode_corpus(texts: Sequence[str], tokenizer, split: np.ndarray, *, meta: dict | None = None) -> TokenFile:
    """Encode every document with `tokenizer` into one TokenFile (split codes from split_documents)."""
    encoded = tokenizer.encode_batch(texts)
    lengths = np.array([len(ids) for ids in encoded], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = np.concatenate(encoded).astype(tokenizer.dtype) if encoded else np.zeros(0, dtype=tokenizer.dtype)
    return TokenFile(ids, offsets, np.asarray(split, dtype=np.uint8), {**(meta or {}), "tokenizer": tokenizer.spec()})


def build(corpus, tokenizer: str = "bytes", *, val: float = 0.1, test: float = 0.0, seed: int = 0):
    """(TokenFile, tokenizer) for a Corpus: split by document, a BPE trained on the training split only."""
    from methodkit.core.text.tokenize import make_tokenizer

    split = split_documents(corpus.texts, val=val, test=test, seed=seed)
    train_texts = [text for text, code in zip(corpus.texts, split) if code == 0]
    tok = make_tokenizer(tokenizer, train_texts)
    meta = {"corpus": corpus.name, "seed": seed, "val": val, "test": test}
    return encode_corpus(corpus.texts, tok, split, meta=meta), tok
