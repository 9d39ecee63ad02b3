"""When NB-asymptotic is not trusted (from plskit's calibration study; documented as such).

The gate looks at X only (never y): p <= 4, n < 25, or a stable rank ||X_s||_F^2 / ||X_s||_2^2
of the standardised X below 3 (a near-singular design such as NIR spectra). A fired gate
reroutes NB-asymptotic to NB-permutation unless the user forces it.
"""

from __future__ import annotations

from dataclasses import dataclass

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
        return {"fired": self.fired, "reason": self.reason, "stable_rank": self.stable_rank, "n_eff": self.n_eff}


def stable_rank(X: np.ndarray, w: np.ndarray | None = None) -> float:
    """||X_s||_F^2 / sigma_max(X_s)^2 for X standardised column-wise (zero-variance columns dropped).

    With weights the moments are weighted and the rows scaled by sqrt(w). sigma_max^2 by a few
    power steps on X_s itself when the top eigenvalue dominates (NIR: 3 steps), else from the
    small Gram matrix (`top_eigenvalue`).
    """
    from methodkit.tools.pls import kernels

    X = np.ascontiguousarray(X, dtype=np.float64)
    weights = np.ones(X.shape[0]) if w is None else np.ascontiguousarray(w, dtype=np.float64)
    Xs, frobenius = kernels.gate_standardised(X, weights)
    if Xs.shape[1] == 0:
        return 0.0
    top, converged = kernels.power_top_singular(Xs, 10, 1e-8)
    if not converged:
        top = top_eigenvalue(Xs.T @ Xs if Xs.shape[0] >= Xs.shape[1] else Xs @ Xs.T)
    return float(frobenius / top) if top > 0 else 0.0


def top_eigenvalue(S: np.ndarray, max_iter: int = 100) -> float:
    """Largest eigenvalue of a PSD matrix S.

    Power iteration first (a few matrix-vector products when the top eigenvalue dominates, as
    in NIR spectra): accepted once the residual ||S v - lambda v|| <= 1e-8 lambda, where the
    Rayleigh quotient is exact to ~1e-16 relative. Otherwise the full eigvalsh.
    """
    from methodkit.tools.pls import kernels

    S = np.ascontiguousarray(S, dtype=np.float64)
    value, converged = kernels.power_top_eigenvalue(S, max_iter, 1e-8)
    return float(value) if converged else float(np.linalg.eigvalsh(S)[-1])


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
