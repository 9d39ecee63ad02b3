"""Synthetic (X, y) from named geometries, for size and power studies.

iid: X ~ N(0, I).  toeplitzR: corr(x_i, x_j) = R^|i-j| (toeplitz0.5).  onefactor: one common
factor with loading 0.7 (corr 0.49 between any two columns; stable rank ~ 2, so the gate fires).
y = X beta + e with the first `active` coefficients equal, scaled so that var(X beta) / var(e) = snr;
snr = 0 gives y independent of X (the null).
"""

from __future__ import annotations

import re

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.core.memory import guard_memory

GEOMETRIES = ("iid", "toeplitz0.5", "onefactor")
FACTOR_LOADING = 0.7


def parse_geometry(name: str) -> tuple[str, float]:
    if name == "iid":
        return "iid", 0.0
    if name == "onefactor":
        return "onefactor", FACTOR_LOADING
    match = re.fullmatch(r"toeplitz(0?\.\d+|0)", name)
    if match:
        return "toeplitz", float(match.group(1))
    raise UsageError(f"--geometry '{name}': expected iid, onefactor or toeplitzR with 0 <= R < 1 (e.g. toeplitz0.5)")


def covariance(name: str, p: int) -> np.ndarray:
    kind, value = parse_geometry(name)
    if kind == "iid":
        return np.eye(p)
    if kind == "toeplitz":
        idx = np.arange(p)
        return value ** np.abs(idx[:, None] - idx[None, :])
    lam = np.full(p, value)
    return np.outer(lam, lam) + np.diag(1.0 - lam**2)


# float64 Z and X, the output frame's copy and its formatted text: about four doubles per cell.
BYTES_PER_CELL = 4 * 8


def simulate(
    geometry: str, n: int, p: int, *, active: int = 5, snr: float = 0.3, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """One draw of (X n x p, y n)."""
    if n < 2 or p < 1:
        raise UsageError(f"need n >= 2 and p >= 1, got n = {n}, p = {p}")
    if not 0 <= active <= p:
        raise UsageError(f"--active must be between 0 and p = {p}, got {active}")
    if snr < 0:
        raise UsageError(f"--snr must be >= 0, got {snr}")
    kind, value = parse_geometry(geometry)
    guard_memory(n * p * BYTES_PER_CELL, f"a {n:,} x {p:,} table", "-n/--rows or -p/--columns")
    Z = rng.standard_normal((n, p))
    if kind == "iid":
        X = Z
    elif kind == "toeplitz":
        # AR(1) columns: x_j = R x_{j-1} + sqrt(1 - R^2) z_j has exactly corr R^|i-j|
        X = np.empty_like(Z)
        X[:, 0] = Z[:, 0]
        for j in range(1, p):
            X[:, j] = value * X[:, j - 1] + np.sqrt(1.0 - value**2) * Z[:, j]
    else:
        f = rng.standard_normal((n, 1))
        X = value * f + np.sqrt(1.0 - value**2) * Z
    noise = rng.standard_normal(n)
    if snr == 0 or active == 0:
        return X, noise
    beta = np.zeros(p)
    beta[:active] = 1.0
    signal_var = float(beta @ covariance(geometry, p) @ beta)
    beta *= np.sqrt(snr / signal_var)
    return X, X @ beta + noise
