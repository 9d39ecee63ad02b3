"""The key: an orthonormal basis N of the stem's (low-sensitivity) null space.

SVD W' = U S V^T (full matrices). Rank r = c_out when n > c_out and no --tau is given
(the exact null space of a wide stem), otherwise r = #{s_i > tau * s_1}
(or > tau_abs with the official absolute threshold). N = V[:, r:] (n x k).
A full-rank stem has no null space: the min_dim smallest right singular vectors are used
and fidelity then holds only up to s_{r+1} (reported as `sigma_leak`).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import DataError, RunFailure, UsageError
from methodkit.tools.nte.stem import Stem


@dataclass
class Key:
    basis: np.ndarray  # N, (n, k), orthonormal columns
    singular_values: np.ndarray  # of W'
    rank: int
    geometry: dict
    stem_sha256: str
    tau: float | None
    fallback: bool = False  # True when the stem had no null space and min_dim vectors were taken
    warnings: list = field(default_factory=list)
    mode: str = "svd"  # svd | jacobian (experimental, data-dependent)
    layer: str | None = None  # jacobian mode: the layer whose sensitivity defines the subspace

    @property
    def k(self) -> int:
        return int(self.basis.shape[1])

    @property
    def sigma_leak(self) -> float:
        """Largest singular value of W' inside span(N): 0 for an exact null space."""
        s = self.singular_values
        return float(s[self.rank]) if self.rank < s.size else 0.0

    def sha256(self) -> str:
        import hashlib

        return hashlib.sha256(np.ascontiguousarray(self.basis, dtype=np.float64).tobytes()).hexdigest()

    def to_dict(self) -> dict:
        return {
            "n": int(self.basis.shape[0]),
            "k": self.k,
            "rank": self.rank,
            "tau": self.tau,
            "fallback": self.fallback,
            "sigma_leak": self.sigma_leak,
            "sigma_max": float(self.singular_values[0]),
            "stem_sha256": self.stem_sha256,
            "key_sha256": self.sha256(),
            "geometry": self.geometry,
            "mode": self.mode,
            "layer": self.layer,
        }

    def to_npz_bytes(self) -> bytes:
        buffer = io.BytesIO()
        meta = {**self.to_dict(), "warnings": self.warnings}
        np.savez(
            buffer,
            basis=self.basis,
            singular_values=self.singular_values,
            meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
        )
        return buffer.getvalue()

    @classmethod
    def from_arrays(cls, arrays: dict, name: str = "key") -> Key:
        for required in ("basis", "singular_values", "meta"):
            if required not in arrays:
                raise DataError(f"{name}: not an nte key (array '{required}' missing); make one with 'nte-encode key'")
        meta = json.loads(arrays["meta"].tobytes().decode())
        return cls(
            basis=np.asarray(arrays["basis"], dtype=np.float64),
            singular_values=np.asarray(arrays["singular_values"], dtype=np.float64),
            rank=int(meta["rank"]),
            geometry=meta["geometry"],
            stem_sha256=meta["stem_sha256"],
            tau=meta["tau"],
            fallback=bool(meta["fallback"]),
            warnings=list(meta.get("warnings", [])),
            mode=meta.get("mode", "svd"),
            layer=meta.get("layer"),
        )


def extract_key(
    stem: Stem, *, tau: float | None = None, tau_abs: float | None = None, min_dim: int = 1, strict: bool = False
) -> Key:
    """Null-space key of `stem` (see module doc)."""
    if tau is not None and tau <= 0:
        raise UsageError(f"--tau must be positive, got {tau}")
    if tau_abs is not None and tau_abs <= 0:
        raise UsageError(f"--tau-abs must be positive, got {tau_abs}")
    if min_dim < 1:
        raise UsageError(f"--min-dim must be at least 1, got {min_dim}")
    w = stem.pixel_matrix()
    c_out, n = w.shape
    _, s, vt = np.linalg.svd(w, full_matrices=True)
    sigma = np.zeros(n)
    sigma[: s.size] = s
    if tau_abs is not None:
        rank = int(np.sum(s > tau_abs))
    elif tau is not None:
        rank = int(np.sum(s > tau * s[0]))
    elif n > c_out:
        rank = c_out
    else:
        rank = int(np.sum(s > 1e-6 * s[0]))  # numerical rank: full for a generic square/tall stem
    warnings = []
    fallback = False
    if rank >= n:
        message = (
            f"stem W' ({c_out}x{n}) has full rank {n}: no null space; using the {min_dim} least-sensitive "
            f"direction(s) (fidelity holds only up to sigma={s[-1]:.3g})"
        )
        if strict:
            raise RunFailure(message + "; drop --strict or pass --tau")
        warnings.append(message)
        rank = n - min_dim
        fallback = True
    basis = vt[rank:].T.copy()
    return Key(
        basis, sigma, rank, stem.geometry(), stem.sha256(), tau if tau_abs is None else tau_abs, fallback, warnings
    )


def restricted_basis(basis: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Orthonormal basis of {v in span(basis) : v = 0 outside `valid`} (n, k_valid).

    For border patches of a padded non-overlapping stem: padded coordinates are fixed by the
    model, so noise may only use the real pixels. With C the orthonormal complement of N,
    v lies in span N iff C^T v = 0, so the restricted space is null(C[valid]^T) embedded in R^n;
    for an exact null-space key this equals null(W'[:, valid]).
    """
    n, k = basis.shape
    if valid.all():
        return basis
    q, _ = np.linalg.qr(np.hstack([basis, np.eye(n)]))
    complement = q[:, k:n]  # orthonormal complement of span(basis)
    sub = complement[valid].T  # (n - k, n_valid)
    _, s, vt = np.linalg.svd(sub, full_matrices=True)
    rank = int(np.sum(s > 1e-9 * max(s[0] if s.size else 1.0, 1.0)))
    inside = vt[rank:].T  # (n_valid, k_valid)
    out = np.zeros((n, inside.shape[1]))
    out[valid] = inside
    return out
