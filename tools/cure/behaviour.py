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


# ---------------------------------------------------------------- online TD3 (Fujimoto et al. 2018)


class ActorPolicy:
    """A trained TD3 actor as a behaviour policy: a = actor(normalised obs), deterministic."""

    def __init__(self, agent):
        import copy

        self.agent = copy.deepcopy(agent)

    def __call__(self, obs, t, rng):
        return self.agent.act(np.asarray(obs, np.float32)[None])[0]


def online_td3(env, steps: int, seed: int, *, hidden: int = 256, batch_size: int = 256, start: int | None = None,
               expl_noise: float = 0.1, early_at: float = 0.2, progress=None):  # fmt: skip
    """(early, medium) ActorPolicy of a TD3 agent trained online for `steps` environment steps.

    One gradient update per environment step after `start` uniform-random steps (default: a tenth of
    the budget, at least 1,000 and at most 10,000); the state normaliser is fixed from those random
    steps; exploration adds N(0, expl_noise) to the actor's action. TD targets stop at termination,
    not at the time limit. `early` is the actor after `early_at` of the steps, `medium` the last.
    """
    from methodkit.tools.cure.backbones import TD3, batch

    od, ad = env.observation_space.shape[0], env.action_space.shape[0]
    start = min(steps, start if start is not None else int(np.clip(steps // 10, 1000, 10000)))
    rng = np.random.default_rng([seed, 67])
    agent = TD3(od, ad, hidden=hidden, seed=seed)
    buf = {k: np.zeros((steps, n), np.float32) for k, n in (("observations", od), ("actions", ad),
                                                           ("next_observations", od))}  # fmt: skip
    buf["rewards"], buf["terminals"] = np.zeros(steps, np.float32), np.zeros(steps, bool)
    obs, _ = env.reset(seed=int(rng.integers(2**31)))
    early = None
    for t in range(steps):
        if t < start:
            a = rng.uniform(-1, 1, ad)
        else:
            a = agent.act(obs.astype(np.float32)[None])[0] + rng.normal(0, expl_noise, ad)
        a = np.clip(a, -1, 1).astype(np.float32)
        nxt, r, term, trunc, _ = env.step(a)
        buf["observations"][t], buf["actions"][t], buf["next_observations"][t] = obs, a, nxt
        buf["rewards"][t], buf["terminals"][t] = r, term
        obs = nxt
        if term or trunc:
            obs, _ = env.reset(seed=int(rng.integers(2**31)))
        if t + 1 == start:
            agent.set_normaliser(buf["observations"][:start])
        if t + 1 >= start:
            agent.update(batch(buf, rng.integers(0, t + 1, batch_size), agent))
        if early is None and t + 1 >= early_at * steps and t + 1 >= start:
            early = ActorPolicy(agent)
        if progress and ((t + 1) % 1000 == 0 or t + 1 == steps):
            progress("behaviour (online TD3)", t + 1, steps)
    return early or ActorPolicy(agent), ActorPolicy(agent)
