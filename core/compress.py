"""Compressors for activations and gradients sent between pipeline stages.

One API: `encode(x) -> payload` (a dict of NumPy arrays whose nbytes are the exact bytes on the
wire), `decode(payload) -> x_hat`, and `delta_update(a, m) -> payload` which compresses a - m and
adds the decoded message to the reference m in place (the error-feedback step, fused in Numba
for top-k and quantisation). Rows are samples: every compressor works per row of a 2-D float32
array. Specs: identity, topk:RHO, randk:RHO[:scaled], quant:BITS[:nearest], topk+quant:RHO:BITS,
lowrank:R.
"""

from __future__ import annotations

import math

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.core.kernels import compress as ck

QUANT_BITS = (1, 2, 4, 8)


def index_dtype(d: int):
    return np.uint16 if d <= 65536 else np.uint32


class Compressor:
    name = "base"

    def __init__(self, d: int):
        self.d = d

    def encode(self, x: np.ndarray) -> dict:
        raise NotImplementedError

    def decode(self, payload: dict) -> np.ndarray:
        raise NotImplementedError

    def delta_update(self, a: np.ndarray, m: np.ndarray) -> dict:
        """Compress a - m; m += decode(payload) in place; return the payload."""
        payload = self.encode(a - m)
        m += self.decode(payload)
        return payload

    @staticmethod
    def nbytes(payload: dict) -> int:
        return int(sum(v.nbytes for v in payload.values()))


class Identity(Compressor):
    name = "identity"

    def encode(self, x):
        return {"x": np.ascontiguousarray(x, dtype=np.float32)}

    def decode(self, payload):
        return payload["x"].copy()

    def delta_update(self, a, m):
        m[:] = a
        return {"x": np.ascontiguousarray(a, dtype=np.float32)}


class TopK(Compressor):
    name = "topk"

    def __init__(self, d: int, rho: float):
        super().__init__(d)
        self.k = max(1, math.ceil(rho * d))
        if self.k >= d:
            raise UsageError(f"topk:{rho} keeps k={self.k} of d={d} entries: choose rho < {(d - 1) / d:.3f}")

    def encode(self, x):
        x = np.ascontiguousarray(x, dtype=np.float32)
        zeros = np.zeros_like(x)
        idx, val = ck.delta_topk_update(x, zeros, self.k)
        return {"idx": idx.astype(index_dtype(self.d)), "val": val}

    def decode(self, payload):
        out = np.zeros((payload["idx"].shape[0], self.d), dtype=np.float32)
        ck.scatter_accumulate(out, payload["idx"].astype(np.int64), payload["val"])
        return out

    def delta_update(self, a, m):
        idx, val = ck.delta_topk_update(np.ascontiguousarray(a, dtype=np.float32), m, self.k)
        return {"idx": idx.astype(index_dtype(self.d)), "val": val}


class RandK(Compressor):
    """Random k of d per row from a seed both sides share (sent as 8 bytes); `scaled` is unbiased (d/k)."""

    name = "randk"

    def __init__(self, d: int, rho: float, seed: int = 0, scaled: bool = False):
        super().__init__(d)
        self.k = max(1, math.ceil(rho * d))
        if self.k >= d:
            raise UsageError(f"randk:{rho} keeps k={self.k} of d={d} entries: choose a smaller rho")
        self.scaled = scaled
        self.seed = seed
        self.calls = 0

    def _indices(self, rows: int, seed: int) -> np.ndarray:
        keys = np.random.default_rng(seed).random((rows, self.d))
        return np.sort(np.argpartition(keys, self.k - 1, axis=1)[:, : self.k], axis=1)

    def encode(self, x):
        seed = np.array([self.seed * 1_000_003 + self.calls], dtype=np.uint64)
        self.calls += 1
        idx = self._indices(x.shape[0], int(seed[0]))
        return {"seed": seed, "val": np.take_along_axis(np.asarray(x, dtype=np.float32), idx, axis=1)}

    def decode(self, payload):
        rows = payload["val"].shape[0]
        out = np.zeros((rows, self.d), dtype=np.float32)
        idx = self._indices(rows, int(payload["seed"][0]))
        factor = self.d / self.k if self.scaled else 1.0
        np.put_along_axis(out, idx, payload["val"] * factor, axis=1)
        return out


class Quant(Compressor):
    name = "quant"

    def __init__(self, d: int, bits: int, seed: int = 0, stochastic: bool = True):
        super().__init__(d)
        if bits not in QUANT_BITS:
            raise UsageError(f"quant bits must be one of {QUANT_BITS}, got {bits}")
        self.bits, self.seed, self.stochastic, self.calls = bits, seed, stochastic, 0

    def _next_seed(self) -> int:
        self.calls += 1
        return self.seed * 1_000_003 + self.calls

    def encode(self, x):
        packed, scale = ck.quant_pack(
            np.ascontiguousarray(x, dtype=np.float32), self.bits, self._next_seed(), self.stochastic
        )
        return {"codes": packed, "scale": scale}

    def decode(self, payload):
        out = np.empty((payload["codes"].shape[0], self.d), dtype=np.float32)
        ck.unpack_accumulate(payload["codes"], payload["scale"], self.bits, self.d, out, False)
        return out

    def delta_update(self, a, m):
        packed, scale = ck.delta_quant_pack(
            np.ascontiguousarray(a, dtype=np.float32), m, self.bits, self._next_seed(), self.stochastic
        )
        return {"codes": packed, "scale": scale}


class TopKQuant(Compressor):
    """Top-k selection, then the kept values quantised to `bits`."""

    name = "topk+quant"

    def __init__(self, d: int, rho: float, bits: int, seed: int = 0):
        super().__init__(d)
        self.topk = TopK(d, rho)
        self.quant = Quant(self.topk.k, bits, seed)

    def encode(self, x):
        sparse = self.topk.encode(x)
        coded = self.quant.encode(sparse["val"])
        return {"idx": sparse["idx"], **coded}

    def decode(self, payload):
        values = self.quant.decode({"codes": payload["codes"], "scale": payload["scale"]})
        return self.topk.decode({"idx": payload["idx"], "val": values})


class LowRank(Compressor):
    """PowerSGD-style rank-r: one power iteration with a warm-started Q; sends P (rows x r) and Q (d x r)."""

    name = "lowrank"

    def __init__(self, d: int, rank: int, seed: int = 0):
        super().__init__(d)
        if not 1 <= rank < d:
            raise UsageError(f"lowrank:{rank} needs 1 <= r < d={d}")
        self.rank = rank
        self.q = np.random.default_rng(seed).standard_normal((d, rank)).astype(np.float32)

    def encode(self, x):
        x = np.asarray(x, dtype=np.float32)
        p, _ = np.linalg.qr(x @ self.q)
        q = x.T @ p
        self.q = q.astype(np.float32)  # warm start for the next call
        return {"p": p.astype(np.float32), "q": self.q.copy()}

    def decode(self, payload):
        return payload["p"] @ payload["q"].T


def parse(spec: str, d: int, seed: int = 0) -> Compressor:
    """Build a compressor for rows of width d from a spec string (see module doc)."""
    parts = spec.split(":")
    name = parts[0]
    try:
        if name == "identity" and len(parts) == 1:
            return Identity(d)
        if name == "topk" and len(parts) == 2:
            return TopK(d, float(parts[1]))
        if name == "randk" and len(parts) in (2, 3):
            return RandK(d, float(parts[1]), seed, scaled=len(parts) == 3 and parts[2] == "scaled")
        if name == "quant" and len(parts) in (2, 3):
            return Quant(d, int(parts[1]), seed, stochastic=not (len(parts) == 3 and parts[2] == "nearest"))
        if name == "topk+quant" and len(parts) == 3:
            return TopKQuant(d, float(parts[1]), int(parts[2]), seed)
        if name == "lowrank" and len(parts) == 2:
            return LowRank(d, int(parts[1]), seed)
    except ValueError:
        pass
    raise UsageError(
        f"--compressor: cannot read '{spec}' (use identity, topk:RHO, randk:RHO[:scaled], quant:BITS[:nearest], "
        "topk+quant:RHO:BITS, lowrank:R)"
    )


def contraction(x: np.ndarray, x_hat: np.ndarray) -> float:
    """delta = 1 - ||C(x) - x||^2 / ||x||^2 (1 for exact, 0 for sending nothing)."""
    norm = float((x.astype(np.float64) ** 2).sum())
    return 1.0 if norm == 0 else 1.0 - float(((x_hat - x).astype(np.float64) ** 2).sum()) / norm
