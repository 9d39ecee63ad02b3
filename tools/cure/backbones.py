"""Offline-RL backbones (TD3+BC, IQL, CQL) in torch, CORL-style, with per-sample losses.

Every agent exposes the pieces CURE composes: `critic_per_sample(b, target_noise)` (the backbone's
critic loss per transition: twin-Q TD, plus the V expectile for IQL and the conservative term for
CQL), `td_sq(b)` (the semi-gradient half squared TD error summed over the twin heads, for the
interference cosines), `actor_per_sample(b, bc_weight)` (the backbone's actor loss per transition with
its imitation term scaled by bc_weight), `q(s, a)` (min of the twin heads), `act(obs)` and one
ordinary `update(b)`. Observations are normalised inside the agent (mean/std of its training data).
"""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from methodkit.core.errors import DataError

ALGOS = ("td3bc", "iql", "cql")


def mlp(n_in: int, n_out: int, hidden: int, layers: int = 2) -> nn.Sequential:
    mods, d = [], n_in
    for _ in range(layers):
        mods += [nn.Linear(d, hidden), nn.ReLU()]
        d = hidden
    mods.append(nn.Linear(d, n_out))
    return nn.Sequential(*mods)


class Twin(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden):
        super().__init__()
        self.q1 = mlp(obs_dim + act_dim, 1, hidden)
        self.q2 = mlp(obs_dim + act_dim, 1, hidden)

    def forward(self, s, a):
        x = torch.cat([s, a], -1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)


class TanhGaussian(nn.Module):
    """SAC's tanh-squashed Gaussian policy (CQL)."""

    def __init__(self, obs_dim, act_dim, hidden):
        super().__init__()
        self.body = mlp(obs_dim, 2 * act_dim, hidden)
        self.act_dim = act_dim

    def forward(self, s):  # deterministic action
        mu, _ = self.body(s).chunk(2, -1)
        return torch.tanh(mu)

    def sample(self, s, gen=None):
        mu, log_std = self.body(s).chunk(2, -1)
        log_std = log_std.clamp(-5, 2)
        std = log_std.exp()
        eps = torch.randn(mu.shape, generator=gen)
        pre = mu + std * eps
        a = torch.tanh(pre)
        logp = (-0.5 * eps**2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        logp = logp - (2 * (math.log(2) - pre - F.softplus(-2 * pre))).sum(-1)
        return a, logp


class Deterministic(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden):
        super().__init__()
        self.body = mlp(obs_dim, act_dim, hidden)

    def forward(self, s):
        return torch.tanh(self.body(s))


def _polyak(target: nn.Module, source: nn.Module, tau: float) -> None:
    with torch.no_grad():
        for pt, ps in zip(target.parameters(), source.parameters()):
            pt.mul_(1 - tau).add_(ps, alpha=tau)


class Agent(nn.Module):
    """Base: normalisation, twin critic + target, actor + target, Adam optimisers, counters."""

    algo = "base"

    def __init__(self, obs_dim, act_dim, hidden=256, gamma=0.99, tau=0.005, lr=3e-4, seed=0):
        super().__init__()
        self.obs_dim, self.act_dim, self.hidden = obs_dim, act_dim, hidden
        self.gamma, self.tau, self.lr = gamma, tau, lr
        torch.manual_seed(seed)
        self.gen = torch.Generator().manual_seed(seed)
        self.register_buffer("obs_mean", torch.zeros(obs_dim))
        self.register_buffer("obs_std", torch.ones(obs_dim))
        self.critic = Twin(obs_dim, act_dim, hidden)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor = self._make_actor()
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.steps = 0
        self.make_optimisers()

    def _make_actor(self):
        return Deterministic(self.obs_dim, self.act_dim, self.hidden)

    def critic_modules(self) -> list[nn.Module]:
        return [self.critic]

    def critic_parameters(self):
        return [p for m in self.critic_modules() for p in m.parameters()]

    def make_optimisers(self):
        self.critic_opt = torch.optim.Adam(self.critic_parameters(), lr=self.lr)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=self.lr)

    def optimisers(self) -> dict:
        """Every optimiser by name: a checkpoint keeps each one's state."""
        return {"critic": self.critic_opt, "actor": self.actor_opt}

    def set_normaliser(self, obs: np.ndarray) -> None:
        self.obs_mean.copy_(torch.as_tensor(obs.mean(0)))
        self.obs_std.copy_(torch.as_tensor(obs.std(0) + 1e-3))

    def norm(self, s):
        return (s - self.obs_mean) / self.obs_std

    @torch.no_grad()
    def act(self, obs: np.ndarray) -> np.ndarray:
        s = self.norm(torch.as_tensor(obs, dtype=torch.float32))
        return self.actor(s).numpy()

    def q(self, s, a):
        q1, q2 = self.critic(s, a)
        return torch.minimum(q1, q2)

    # the pieces: overridden per backbone
    def target(self, b, target_noise=True):
        raise NotImplementedError

    def td_sq(self, b):
        """Half squared semi-gradient TD error per transition, summed over the twin heads."""
        y = self.target(b, target_noise=False)
        q1, q2 = self.critic(b["s"], b["a"])
        return 0.5 * ((q1 - y) ** 2 + (q2 - y) ** 2)

    def critic_per_sample(self, b, target_noise=True, q12=None, y=None):
        """q12: the twin heads at (b["s"], b["a"]), y: the TD target, where the caller has them already."""
        y = self.target(b, target_noise) if y is None else y
        q1, q2 = self.critic(b["s"], b["a"]) if q12 is None else q12
        return (q1 - y) ** 2 + (q2 - y) ** 2

    def actor_per_sample(self, b, bc_weight=None, pi=None):
        """pi: the deterministic action actor(b["s"]) where the caller has evaluated it already (a
        sampling actor, CQL's, ignores it)."""
        raise NotImplementedError

    def update_targets(self):
        _polyak(self.critic_target, self.critic, self.tau)
        _polyak(self.actor_target, self.actor, self.tau)

    def actor_due(self) -> bool:
        return True

    def step_critic(self, loss):
        self.critic_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.critic_opt.step()

    def step_actor(self, loss):
        self.actor_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.actor_opt.step()

    def update(self, b) -> dict:
        """One ordinary backbone update on batch b."""
        closs = self.critic_per_sample(b).mean()
        self.step_critic(closs)
        out = {"critic_loss": float(closs.detach())}
        if self.actor_due():
            aloss = self.actor_per_sample(b).mean()
            self.step_actor(aloss)
            out["actor_loss"] = float(aloss.detach())
            self.update_targets()
        self.steps += 1
        return out

    # persistence
    def config(self) -> dict:
        return {"algo": self.algo, "obs_dim": self.obs_dim, "act_dim": self.act_dim, "hidden": self.hidden,
                "gamma": self.gamma, "tau": self.tau, "lr": self.lr}  # fmt: skip


class TD3BC(Agent):
    algo = "td3bc"

    def __init__(self, *args, alpha=2.5, policy_noise=0.2, noise_clip=0.5, policy_delay=2, **kw):
        self.alpha, self.policy_noise, self.noise_clip, self.policy_delay = alpha, policy_noise, noise_clip, policy_delay
        super().__init__(*args, **kw)

    def target(self, b, target_noise=True, parts=None):
        """parts: the sizes of the batches stacked in b; their smoothing noise is drawn batch by batch, in
        order, so one pass over a stack uses the random stream of one pass per batch."""
        with torch.no_grad():
            a2 = self.actor_target(b["s2"])
            if target_noise:
                draws = [torch.randn((n, a2.shape[1]), generator=self.gen) for n in (parts or [len(a2)])]
                noise = (torch.cat(draws) * self.policy_noise).clamp(-self.noise_clip, self.noise_clip)
                a2 = (a2 + noise).clamp(-1, 1)
            q1, q2 = self.critic_target(b["s2"], a2)
            return b["r"] + self.gamma * (1 - b["d"]) * torch.minimum(q1, q2)

    def actor_per_sample(self, b, bc_weight=None, pi=None):
        pi = self.actor(b["s"]) if pi is None else pi
        q = self.critic.q1(torch.cat([b["s"], pi], -1)).squeeze(-1)
        lam = self.alpha / q.abs().mean().detach().clamp_min(1e-6)
        bc = ((pi - b["a"]) ** 2).mean(-1)
        if bc_weight is not None:
            bc = bc * bc_weight
        return -lam * q + bc

    def actor_due(self) -> bool:
        return self.steps % self.policy_delay == 0


class TD3(TD3BC):
    """Online TD3 (no behaviour-cloning term): the behaviour policy `collect --behaviour td3` trains."""

    algo = "td3"

    def actor_per_sample(self, b, bc_weight=None, pi=None):
        pi = self.actor(b["s"]) if pi is None else pi
        return -self.critic.q1(torch.cat([b["s"], pi], -1)).squeeze(-1)


class IQL(Agent):
    algo = "iql"

    def __init__(self, *args, expectile=0.7, beta=3.0, **kw):
        self.expectile, self.beta = expectile, beta
        super().__init__(*args, **kw)

    def _make_actor(self):
        self.value = mlp(self.obs_dim, 1, self.hidden)
        return Deterministic(self.obs_dim, self.act_dim, self.hidden)

    def critic_modules(self):
        return [self.critic, self.value]

    def v(self, s):
        return self.value(s).squeeze(-1)

    def target(self, b, target_noise=True):
        with torch.no_grad():
            return b["r"] + self.gamma * (1 - b["d"]) * self.v(b["s2"])

    def td_sq(self, b):
        y = self.target(b)
        q1, q2 = self.critic(b["s"], b["a"])
        return 0.5 * ((q1 - y) ** 2 + (q2 - y) ** 2)

    def critic_per_sample(self, b, target_noise=True, q12=None, qt=None):
        """qt: min of the target twin at (b["s"], b["a"]) where the caller has evaluated it already."""
        if qt is None:
            with torch.no_grad():
                qt = torch.minimum(*self.critic_target(b["s"], b["a"]))
        diff = qt - self.v(b["s"])
        v_loss = torch.abs(self.expectile - (diff < 0).float()) * diff**2
        return v_loss + super().critic_per_sample(b, q12=q12)

    def actor_per_sample(self, b, bc_weight=None, pi=None, qt=None):
        with torch.no_grad():
            if qt is None:
                qt = torch.minimum(*self.critic_target(b["s"], b["a"]))
            adv = qt - self.v(b["s"])
            w = torch.exp(self.beta * adv).clamp(max=100.0)
            if bc_weight is not None:
                w = w * bc_weight
        pi = self.actor(b["s"]) if pi is None else pi
        return w * ((pi - b["a"]) ** 2).sum(-1)

    def update_targets(self):
        _polyak(self.critic_target, self.critic, self.tau)


class CQL(Agent):
    algo = "cql"

    def __init__(self, *args, cql_alpha=5.0, n_actions=10, **kw):
        self.cql_alpha, self.n_actions = cql_alpha, n_actions
        super().__init__(*args, **kw)
        self.log_alpha = nn.Parameter(torch.zeros(()))
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=self.lr)

    def _make_actor(self):
        return TanhGaussian(self.obs_dim, self.act_dim, self.hidden)

    def target(self, b, target_noise=True):
        with torch.no_grad():
            if target_noise:
                a2, logp = self.actor.sample(b["s2"], self.gen)
            else:
                a2, logp = self.actor(b["s2"]), torch.zeros(len(b["s2"]))
            q = torch.minimum(*self.critic_target(b["s2"], a2)) - self.log_alpha.exp() * logp
            return b["r"] + self.gamma * (1 - b["d"]) * q

    def critic_per_sample(self, b, target_noise=True, q12=None):
        q1, q2 = self.critic(b["s"], b["a"]) if q12 is None else q12  # shared by the TD and conservative terms
        td = super().critic_per_sample(b, target_noise, q12=(q1, q2))
        s, n, k = b["s"], len(b["s"]), self.n_actions
        rep = s.repeat_interleave(k, 0)
        a_rand = torch.rand((n * k, self.act_dim), generator=self.gen) * 2 - 1
        with torch.no_grad():
            a_pi, logp = self.actor.sample(rep, self.gen)
        q1r, q2r = self.critic(rep, a_rand)
        q1p, q2p = self.critic(rep, a_pi)
        log_u = self.act_dim * math.log(0.5)
        cat1 = torch.cat([(q1r - log_u).view(n, k), (q1p - logp).view(n, k)], 1)
        cat2 = torch.cat([(q2r - log_u).view(n, k), (q2p - logp).view(n, k)], 1)
        cons = (torch.logsumexp(cat1, 1) - q1) + (torch.logsumexp(cat2, 1) - q2)
        return td + self.cql_alpha * cons

    def actor_per_sample(self, b, bc_weight=None, pi=None):
        a, logp = self.actor.sample(b["s"], self.gen)
        loss = self.log_alpha.exp().detach() * logp - self.q(b["s"], a)
        if self.training_alpha:
            a_loss = -(self.log_alpha * (logp.detach() - self.act_dim)).mean()  # target entropy -act_dim
            self.alpha_opt.zero_grad(set_to_none=True)
            a_loss.backward()
            self.alpha_opt.step()
        return loss

    training_alpha = True

    def optimisers(self) -> dict:
        return {**super().optimisers(), "alpha": self.alpha_opt}

    def update_targets(self):
        _polyak(self.critic_target, self.critic, self.tau)


AGENTS = {"td3bc": TD3BC, "iql": IQL, "cql": CQL}


def make_agent(algo: str, obs_dim: int, act_dim: int, hidden: int = 256, seed: int = 0, **kw) -> Agent:
    if algo not in AGENTS:
        raise DataError(f"unknown --algo {algo!r}; choose one of {', '.join(ALGOS)}")
    return AGENTS[algo](obs_dim, act_dim, hidden=hidden, seed=seed, **kw)


def batch(ds_arrays: dict, rows: np.ndarray, agent: Agent, rewards=None, with_rows: bool = False) -> dict:
    """A torch batch of the given transition rows (observations normalised by the agent); with_rows adds
    the row indices ("rows"), through which step C reads its precomputed terms (unlearn.FrozenTerms)."""
    a = ds_arrays
    r = a["rewards"][rows] if rewards is None else rewards[rows]
    extra = {"rows": torch.as_tensor(rows)} if with_rows else {}
    with torch.no_grad():
        return {
            **extra,
            "s": agent.norm(torch.as_tensor(a["observations"][rows])),
            "a": torch.as_tensor(a["actions"][rows]),
            "r": torch.as_tensor(np.asarray(r, np.float32)),
            "s2": agent.norm(torch.as_tensor(a["next_observations"][rows])),
            "d": torch.as_tensor(a["terminals"][rows].astype(np.float32)),
        }


# ---------------------------------------------------------------- safetensors with __metadata__


def save_model(path, agent: Agent, info: dict, force: bool = False) -> None:
    """The agent's tensors with `__metadata__` {"cure": JSON of config + info}, written atomically."""
    from safetensors.torch import save as to_bytes

    from methodkit.core.io import atomic_write

    tensors = {k: v.detach().contiguous().clone() for k, v in agent.state_dict().items()}
    meta = {"cure": json.dumps({**agent.config(), **info}, sort_keys=True)}
    payload = to_bytes(tensors, metadata=meta)
    with atomic_write(path, binary=True, force=force) as handle:
        handle.write(payload)


def model_sha256(path) -> str:
    import hashlib

    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def load_model(path, algo: str | None = None) -> tuple[Agent, dict]:
    """(agent, metadata); a file that is not a cure-unlearn model or of another --algo is a DataError."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            raw = (handle.metadata() or {}).get("cure")
            tensors = {k: handle.get_tensor(k) for k in handle.keys()}
    except (SafetensorError, OSError, ValueError) as exc:
        raise DataError(f"{path}: not a safetensors model ({str(exc).splitlines()[0][:80]})") from None
    if raw is None:
        raise DataError(f"{path}: no cure-unlearn metadata; models come from 'cure-unlearn train'")
    meta = json.loads(raw)
    if algo is not None and meta["algo"] != algo:
        raise DataError(f"{path}: a {meta['algo']} model, not {algo}; pass --algo {meta['algo']}")
    agent = make_agent(meta["algo"], meta["obs_dim"], meta["act_dim"], hidden=meta["hidden"],
                       gamma=meta["gamma"], tau=meta["tau"], lr=meta["lr"])  # fmt: skip
    try:
        agent.load_state_dict(tensors)
    except RuntimeError:
        raise DataError(f"{path}: tensors do not fit a {meta['algo']} model of its metadata") from None
    agent.steps = int(meta.get("steps", 0))
    return agent, meta
