"""Varimax rotation of a direction basis (the "word-readable axes"), via statsmodels.

The held-out prediction depends on W only through span(W), so W -> W M leaves every
split correlation unchanged; the CLI recomputes the statistic in the rotated basis to
show it (rotation_delta).
"""

from __future__ import annotations

import warnings

import numpy as np


def varimax(W: np.ndarray, kaiser: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(W M, M) with M the orthogonal varimax rotation of the p x K basis W.

    Kaiser normalisation rotates the row-normalised loadings (each variable weighs the
    same whatever its communality), as R's varimax(normalize=TRUE) does.
    """
    from statsmodels.multivariate.factor_rotation import rotate_factors

    W = np.asarray(W, dtype=float)
    K = W.shape[1]
    if K == 1:
        return W.copy(), np.ones((1, 1))
    A = W
    if kaiser:
        h = np.sqrt((W * W).sum(axis=1))
        A = W / np.where(h > 0, h, 1.0)[:, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # statsmodels logs log10(0) at convergence
        _, M = rotate_factors(A, "varimax")
    return W @ M, M
