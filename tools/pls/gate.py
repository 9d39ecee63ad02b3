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


def stable_rank(X: np.ndarray, w: np.ndarray | None = None) -> float:
    """||X_s||_F^2 / sigma_max(X_s)^2 for X standardised column-wise (zero-variance columns dropped).

    With weights the moments are weighted and the rows scaled by sqrt(w).
    """
    if w is None:
        mu, sd = X.mean(axis=0), X.std(axis=0)
    else:
        mu = (w @ X) / w.sum()
        sd = np.sqrt((w @ (X - mu) ** 2) / w.sum())
    keep = sd > 0
    if not keep.any():
        return 0.0
    Xs = (X[:, keep] - mu[keep]) / sd[keep]
    if w is not None:
        Xs = Xs * np.sqrt(w)[:, None]
    small = Xs.T @ Xs if Xs.shape[0] >= Xs.shape[1] else Xs @ Xs.T
    top = top_eigenvalue(small)
    return float(np.trace(small) / top) if top > 0 else 0.0


def top_eigenvalue(S: np.ndarray, max_iter: int = 100) -> float:
    """Largest eigenvalue of a PSD matrix S.

    Power iteration first (a few matrix-vector products when the top eigenvalue dominates, as
    in NIR spectra): accepted once the residual ||S v - lambda v|| <= 1e-8 lambda, where the
    Rayleigh quotient is exact to ~1e-16 relative. Otherwise the full eigvalsh.
    """
    v = S.sum(axis=1) + S.diagonal()  # positive start with weight on the dominant directions
    norm = np.linalg.norm(v)
    if norm > 0:
        v = v / norm
        for _ in range(max_iter):
            w = S @ v
            value = float(v @ w)
            if not value > 0:
                break
            if np.linalg.norm(w - value * v) <= 1e-8 * value:
                return value
            v = w / np.linalg.norm(w)
    return float(np.linalg.eigvalsh(S)[-1])


def check(X: np.ndarray, w: np.ndarray | None = None) -> Gate:
    """The gate; with observation weights the n clause uses the Kish effective n (sum w)^2 / sum w^2."""
    n, p = X.shape
    sr = stable_rank(X, w)
    n_eff = float(n) if w is None else float(w.sum() ** 2 / (w * w).sum())
    reasons = []
    if p < MIN_P:
        reasons.append(f"p = {p} <= {MIN_P - 1}")
    if n_eff < MIN_N:
        reasons.append(f"n = {n} < {MIN_N}" if w is None else f"Kish n_eff = {n_eff:.3g} < {MIN_N}")
    if sr < MIN_STABLE_RANK:
        reasons.append(f"stable rank {sr:.3g} < {MIN_STABLE_RANK:g}")
    return Gate(bool(reasons), "; ".join(reasons) or None, sr, n_eff)
