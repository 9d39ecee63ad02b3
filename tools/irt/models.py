"""The three response models in the logistic metric (D = 1).

1PL: P = sigma(theta - b); 2PL: P = sigma(a (theta - b)); 3PL: P = c + (1 - c) sigma(a (theta - b)).
Estimators work on the unconstrained scale (log a, b, logit c); `free_mask` says which
of the three are free for a model (1PL fixes a = 1, 1PL/2PL fix c = 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MODELS = ("1pl", "2pl", "3pl")
MODEL_CODE = {"1pl": 1, "2pl": 2, "3pl": 3}


def free_mask(model: str) -> np.ndarray:
    """Which of (log a, b, logit c) are estimated under `model`."""
    return {
        "1pl": np.array([False, True, False]),
        "2pl": np.array([True, True, False]),
        "3pl": np.array([True, True, True]),
    }[model]


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=float)))


def logit(p):
    p = np.asarray(p, dtype=float)
    return np.log(p) - np.log1p(-p)


def prob(theta, a, b, c):
    """P(correct) for every (model n, item j): an N x J array."""
    theta = np.asarray(theta, dtype=float)[:, None]
    return np.asarray(c)[None, :] + (1.0 - np.asarray(c)[None, :]) * sigmoid(np.asarray(a)[None, :] * (theta - b))


@dataclass
class ItemParams:
    """Item parameters on the natural scale (a > 0 is not enforced: PSN may estimate a <= 0)."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray

    @classmethod
    def from_unconstrained(cls, la, b, lc, model: str) -> ItemParams:
        a = np.exp(la) if model != "1pl" else np.ones_like(b)
        c = sigmoid(lc) if model == "3pl" else np.zeros_like(b)
        return cls(np.asarray(a, float), np.asarray(b, float), np.asarray(c, float))
