"""When NB-asymptotic is not trusted (from plskit's calibration study; documented as such).

The gate looks at X only (never y): p <= 4, n < 25, or a stable rank ||X_s||_F^2 / ||X_s||_2^2
of the standardised X below 3 (a near-singular design such as NIR spectra). A fired gate
reroutes NB-asymptotic to NB-permutation unless the user forces it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

MIN_P = 5
MIN_N = 25
MIN_STABLE_RANK = 3.0


@dataclass
class Gate:
    fired: bool
    reason: str | None
    stable_rank: float
    n_eff: float

    def to_dict(self) -> dict:
        return asdict(self)


def stable_rank(X: np.ndarray) -> float:
    """||X_s||_F^2 / sigma_max(X_s)^2 for X standardised column-wise (zero-variance columns dropped)."""
    sd = X.std(axis=0)
    keep = sd > 0
    if not keep.any():
        return 0.0
    Xs = (X[:, keep] - X[:, keep].mean(axis=0)) / sd[keep]
    small = Xs.T @ Xs if Xs.shape[0] >= Xs.shape[1] else Xs @ Xs.T
    top = float(np.linalg.eigvalsh(small)[-1])
    return float(np.trace(small) / top) if top > 0 else 0.0


def check(X: np.ndarray) -> Gate:
    n, p = X.shape
    sr = stable_rank(X)
    reasons = []
    if p < MIN_P:
        reasons.append(f"p = {p} <= {MIN_P - 1}")
    if n < MIN_N:
        reasons.append(f"n = {n} < {MIN_N}")
    if sr < MIN_STABLE_RANK:
        reasons.append(f"stable rank {sr:.3g} < {MIN_STABLE_RANK:g}")
    return Gate(bool(reasons), "; ".join(reasons) or None, sr, float(n))
