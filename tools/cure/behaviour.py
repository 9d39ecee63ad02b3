"""Behaviour policies learned at collect time: basic augmented random search (ARS V1-t, Mania et al.
2018) of a linear policy a = clip(M (s - mu) / sigma) with running state statistics. Its iterates give
the 'medium' policy (the last) and the 'early' policy (after a few iterations)."""

from __future__ import annotations

import numpy as np


class LinearPolicy:
    def __init__(self, M: np.ndarray, mu: np.ndarray, var: np.ndarray):
        self.M, self.mu, self.sd = M.copy(), mu.copy(), np.sqrt(var + 1e-8)

    def __call__(self, obs, t, rng):
        return self.M @ ((obs - self.mu) / self.sd)


def ars(env, iterations: int, seed: int, *, directions: int = 8, top: int = 4, horizon: int = 300,
        step_size: float = 0.02, noise: float = 0.03, early_at: int = 2, progress=None):  # fmt: skip
    """(early, medium) LinearPolicy after `early_at` and `iterations` ARS iterations."""
    rng = np.random.default_rng([seed, 61])
    od, ad = env.observation_space.shape[0], env.action_space.shape[0]
    M = np.zeros((ad, od))
    stats = {"mu": np.zeros(od), "var": np.ones(od), "n": 1}

    def rollout(Mx):
        obs, _ = env.reset(seed=int(rng.integers(2**31)))
        total = 0.0
        for _ in range(horizon):
            stats["n"] += 1
            d = obs - stats["mu"]
            stats["mu"] = stats["mu"] + d / stats["n"]
            stats["var"] = stats["var"] + (d * (obs - stats["mu"]) - stats["var"]) / stats["n"]
            a = np.clip(Mx @ ((obs - stats["mu"]) / np.sqrt(stats["var"] + 1e-8)), -1, 1)
            obs, r, term, trunc, _ = env.step(a)
            total += float(r)
            if term or trunc:
                break
        return total

    early = None
    for it in range(iterations):
        D = rng.normal(size=(directions, ad, od))
        plus = np.array([rollout(M + noise * d) for d in D])
        minus = np.array([rollout(M - noise * d) for d in D])
        best = np.argsort(-np.maximum(plus, minus))[:top]
        sd = np.concatenate([plus[best], minus[best]]).std() + 1e-8
        M = M + step_size / (top * sd) * np.einsum("k,kij->ij", plus[best] - minus[best], D[best])
        if it + 1 == early_at:
            early = LinearPolicy(M, stats["mu"], stats["var"])
        if progress:
            progress("behaviour (ARS)", it + 1, iterations)
    medium = LinearPolicy(M, stats["mu"], stats["var"])
    return early or medium, medium
