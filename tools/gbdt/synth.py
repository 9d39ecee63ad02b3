"""A small generated table for tests and the demo: two Gaussian classes plus an integer and a categorical column."""

from __future__ import annotations

import numpy as np
import pandas as pd


def tabular(n: int = 600, seed: int = 0, positive_share: float = 0.3) -> pd.DataFrame:
    """Columns x0..x3 (float, class-shifted, correlated), count (integer), colour (categorical), label (0/1)."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < positive_share).astype(int)
    cov = np.array([[1.0, 0.5, 0.2, 0.0], [0.5, 1.0, 0.3, 0.0], [0.2, 0.3, 1.0, 0.1], [0.0, 0.0, 0.1, 1.0]])
    shift = np.array([0.9, 0.6, 0.0, 0.4])
    X = rng.multivariate_normal(np.zeros(4), cov, size=n) + y[:, None] * shift
    count = rng.poisson(3 + 2 * y)
    colour = np.where(rng.random(n) < 0.5 + 0.2 * y, "red", np.where(rng.random(n) < 0.5, "green", "blue"))
    frame = pd.DataFrame({f"x{j}": np.round(X[:, j], 4) for j in range(4)})
    frame["count"] = count
    frame["colour"] = colour
    frame["label"] = y
    return frame
