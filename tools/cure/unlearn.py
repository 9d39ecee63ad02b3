"""CURE: retained baseline (step A), overlap-interference gate (step B), gated unlearning (step C),
and the baselines that share its step budget (retrain, finetune, neggrad, random-reward, trajdeleter,
cure-uniform, cure-noactor). The run that composes them, with its checkpoints: tools/cure/forget_run.py."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn

from methodkit.tools.cure.backbones import Agent, batch, mlp
from methodkit.tools.cure.data import Dataset

METHODS = ("cure", "retrain", "finetune", "neggrad", "random-reward", "trajdeleter", "cure-uniform", "cure-noactor")
BASELINES = ("expectile", "qmu")
GRAD_LAYERS = ("all", "last2")


@dataclass
class ForgetConfig:
    method: str = "cure"
    steps: int | None = None  # default: 5% of the original's steps
    batch_size: int = 256
    baseline: str = "expectile"
    baseline_steps: int = 2000
    expectile: float = 0.7
    kappa: float = 0.5
    lambda_s: float = 1.0
    lambda_a: float = 0.1
    lambda_r: float = 0.5
    rho: float | None = None  # default 0.25 * act_dim
    lambda_p: float = 0.1
    w_min: float = 0.1
    c0: float | None = None
    temp: float | None = None
    calib_trajs: int = 50
    grad_batches: int = 8
    grad_batch: int = 1024
    grad_layers: str = "all"
    rescore_every: int = 0
    neggrad_weight: float = 0.25
    overlap_ref: int = 20000
    score_heldout: bool = True
    seed: int = 0
    device: str = "cpu"  # cuda: the support-overlap 1-NN on CuPy (core/kernels/nn_xp.py)


@dataclass
class Scores:
    """Per-trajectory cosines and gates for the forget set and the scored reference groups."""

    traj: np.ndarray
    role: np.ndarray  # "forget", "calibration", "heldout"
    cosine: np.ndarray
    gate: np.ndarray
    overlap: np.ndarray
    c0: float
    temp: float
    warnings: list = field(default_factory=list)

    def of(self, role: str):
        m = self.role == role
        return self.traj[m], self.cosine[m], self.gate[m]


@dataclass
class ForgetResult:
    method: str
    algo: str
    steps: int
    seconds: float
    forget_trajectories: int
    retained_trajectories: int
    lambda_s: float
    rollbacks: int
    c0: float | None
    temp: float | None
    gate_histogram: list | None
    gate_means: dict | None
    warnings: list

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- step B: interference cosines


def critic_params(agent: Agent, layers: str = "all") -> list:
    """Critic parameters scored by the cosines: all, or the last two linear layers of each network."""
    if layers == "all":
        return agent.critic_parameters()
    out = []
    for module in agent.critic_modules():
        for seq in [m for m in module.modules() if isinstance(m, nn.Sequential)]:
            linears = [m for m in seq if isinstance(m, nn.Linear)]
            for lin in linears[-2:]:
                out += list(lin.parameters())
    return out


def flat_grad(agent: Agent, b: dict, params: list) -> torch.Tensor:
    """Gradient of the mean semi-gradient half squared TD error of batch b w.r.t. params, flattened."""
    loss = agent.td_sq(b).mean()
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, params)])


def cosine(u: torch.Tensor, v: torch.Tensor) -> float:
    return float(torch.dot(u, v) / (u.norm() * v.norm() + 1e-12))


def gate(c: np.ndarray, c0: float, temp: float, w_min: float) -> np.ndarray:
    """w = w_min + (1 - w_min) * sigmoid((c0 - c) / T): 1 for anti-aligned trajectories, ~w_min for aligned ones."""
    z = np.clip((c0 - np.asarray(c, float)) / max(temp, 1e-12), -60, 60)
    return w_min + (1 - w_min) / (1 + np.exp(-z))


def score(agent: Agent, ds: Dataset, forget_ids, retained_ids, cfg: ForgetConfig, progress=None) -> Scores:
    """Step B: cosine(g_tau, g_R) for every forget trajectory, the calibration set and held-out trajectories."""
    progress = progress or (lambda *a: None)
    rng = np.random.default_rng([cfg.seed, 23])
    retained_ids = np.asarray(retained_ids)
    n_cal = min(cfg.calib_trajs, max(1, len(retained_ids) // 4))
    calib = np.sort(rng.choice(retained_ids, n_cal, replace=False))
    ref_rows = ds.rows_of(np.setdiff1d(retained_ids, calib))
    params = critic_params(agent, cfg.grad_layers)
    warnings = []
    g_r = torch.zeros(sum(p.numel() for p in params))
    for k in range(cfg.grad_batches):
        rows = ref_rows[rng.integers(0, len(ref_rows), cfg.grad_batch)]
        g_r += flat_grad(agent, batch(ds.arrays, rows, agent), params) / cfg.grad_batches
        progress("score g_R", k + 1, cfg.grad_batches)
    if float(g_r.norm()) == 0.0:
        warnings.append("zero-norm retained gradient g_R: every cosine is 0")
    heldout = ds.arrays["traj_split"].nonzero()[0] if cfg.score_heldout else np.zeros(0, np.int64)
    groups = [("forget", np.asarray(forget_ids)), ("calibration", calib), ("heldout", heldout)]
    traj, role, cos = [], [], []
    total, done, zero = sum(len(g) for _, g in groups), 0, 0
    for name, ids in groups:
        for t in ids:
            rows = np.arange(ds.starts[t], ds.starts[t + 1])
            g = flat_grad(agent, batch(ds.arrays, rows, agent), params)
            if float(g.norm()) == 0.0:
                zero += 1
            traj.append(int(t))
            role.append(name)
            cos.append(cosine(g, g_r))
            done += 1
            if done % 25 == 0 or done == total:
                progress("score trajectories", done, total)
    if zero:
        warnings.append(f"{zero} trajectories with a zero-norm TD gradient: cosine set to 0")
    cos = np.asarray(cos)
    role = np.asarray(role)
    c_cal = cos[role == "calibration"]
    c0 = float(np.quantile(c_cal, 0.10)) if cfg.c0 is None else cfg.c0
    temp = float(0.5 * c_cal.std()) if cfg.temp is None else cfg.temp
    if temp <= 0:
        temp = 1e-3
        warnings.append("calibration cosines have zero spread: temperature set to 1e-3")
    w = gate(cos, c0, temp, cfg.w_min)
    return Scores(np.asarray(traj), role, cos, w, np.full(len(cos), np.nan), c0, temp, warnings)


def support_overlap(agent: Agent, ds: Dataset, query_ids, retained_ids, cfg: ForgetConfig) -> np.ndarray:
    """o_tau: share of a trajectory's transitions whose nearest retained (s||a) lies within the median
    retained leave-one-trajectory-out nearest-neighbour radius (normalised space, blocked Numba 1-NN;
    with cfg.device "cuda" the CuPy twin core.kernels.nn_xp.nn1_xp, the reference kept on the GPU)."""
    from methodkit.core.kernels.segments import nn1

    nearest, on_device = nn1, np.asarray
    if cfg.device == "cuda":
        import functools

        import cupy

        from methodkit.core.kernels.nn_xp import nn1_xp

        nearest, on_device = functools.partial(nn1_xp, xp=cupy), cupy.asarray

    rng = np.random.default_rng([cfg.seed, 29])
    ref_rows = ds.rows_of(retained_ids)
    if len(ref_rows) > cfg.overlap_ref:
        ref_rows = np.sort(rng.choice(ref_rows, cfg.overlap_ref, replace=False))
    x = np.concatenate([ds.arrays["observations"], ds.arrays["actions"]], 1)
    mu, sd = x[ref_rows].mean(0), x[ref_rows].std(0) + 1e-6
    ref = ((x[ref_rows] - mu) / sd).astype(np.float32)
    ref_nn = on_device(ref)
    tid = ds.arrays["traj_id"].astype(np.int64)
    probe = np.sort(rng.choice(len(ref_rows), min(2000, len(ref_rows)), replace=False))
    d_ref, _ = nearest(ref[probe], ref_nn, tid[ref_rows][probe], tid[ref_rows])
    radius = float(np.median(d_ref[np.isfinite(d_ref)]))
    if len(query_ids) == 0:
        return np.empty(0)
    rows = np.concatenate([np.arange(ds.starts[t], ds.starts[t + 1]) for t in query_ids])
    d, _ = nearest(((x[rows] - mu) / sd).astype(np.float32), ref_nn, tid[rows], tid[ref_rows])  # one call
    lengths = np.array([ds.starts[t + 1] - ds.starts[t] for t in query_ids])
    return np.add.reduceat((d <= radius).astype(np.float64), np.cumsum(lengths) - lengths) / lengths


# ---------------------------------------------------------------- step A: retained baseline


class Baseline(nn.Module):
    """b(s): expectile V_R(s) of Q_0 on D_r, or Q_0(s, mu_R(s)) with a BC policy mu_R."""

    def __init__(self, kind, agent0: Agent):
        super().__init__()
        self.kind = kind
        self.agent0 = agent0
        if kind == "expectile":
            self.net = copy.deepcopy(agent0.value) if hasattr(agent0, "value") else mlp(agent0.obs_dim, 1, agent0.hidden)
        else:
            self.net = mlp(agent0.obs_dim, agent0.act_dim, agent0.hidden)
        self.net.requires_grad_(True)  # a copy of a frozen V_0 (IQL warm start) must train

    def forward(self, s):
        if self.kind == "expectile":
            return self.net(s).squeeze(-1)
        return self.agent0.q(s, torch.tanh(self.net(s)))


def fit_baseline(agent0: Agent, ds: Dataset, rows_r: np.ndarray, cfg: ForgetConfig, progress=None):
    """Step A: the baseline network and the margin m = kappa * std(Q_0 on D_r)."""
    progress = progress or (lambda *a: None)
    base = Baseline(cfg.baseline, agent0)
    opt = torch.optim.Adam(base.net.parameters(), lr=3e-4)
    rng = np.random.default_rng([cfg.seed, 31])
    for step in range(cfg.baseline_steps):
        b = batch(ds.arrays, rows_r[rng.integers(0, len(rows_r), cfg.batch_size)], agent0)
        if cfg.baseline == "expectile":
            with torch.no_grad():
                q = agent0.q(b["s"], b["a"])
            diff = q - base(b["s"])
            loss = (torch.abs(cfg.expectile - (diff < 0).float()) * diff**2).mean()
        else:
            loss = ((torch.tanh(base.net(b["s"])) - b["a"]) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 200 == 0 or step == cfg.baseline_steps - 1:
            progress("baseline", step + 1, cfg.baseline_steps)
    base.requires_grad_(False)
    with torch.no_grad():
        probe = rows_r[:: max(1, len(rows_r) // 8192)]
        b = batch(ds.arrays, probe, agent0)
        margin = float(cfg.kappa * agent0.q(b["s"], b["a"]).std())
    return base, margin


# ---------------------------------------------------------------- step C and the baselines


def _cat(b1: dict, b2: dict) -> dict:
    return {k: torch.cat([b1[k], b2[k]]) for k in b1}


def _snapshot(agent: Agent) -> dict:
    return {"state": copy.deepcopy(agent.state_dict()), "steps": agent.steps}


def _restore(agent: Agent, snap: dict) -> None:
    agent.load_state_dict(snap["state"])
    agent.steps = snap["steps"]
    agent.make_optimisers()


class FrozenTerms:
    """The terms of step C that read frozen networks, per dataset row, evaluated once in fixed chunks:
    Q_0(s, a) and pi_0(s) on the retained rows (the anchors), b(s) on the forget rows (the suppression's
    baseline). A batch that carries its "rows" reads them here instead of a forward pass every step; the
    values are those forward passes' (on other row groupings, so equal up to float32 rounding)."""

    def __init__(self, agent, agent0, base, arrays, rows_r, rows_f, chunk: int = 4096):
        n = len(arrays["rewards"])
        self.q0 = torch.full((n,), float("nan"))
        self.pi0 = torch.full((n, agent0.act_dim), float("nan"))
        self.b = torch.full((n,), float("nan"))
        with torch.no_grad():
            for k in range(0, len(rows_r), chunk):
                rows = rows_r[k : k + chunk]
                b = batch(arrays, rows, agent)
                self.q0[rows] = agent0.q(b["s"], b["a"])
                self.pi0[rows] = agent0.actor(b["s"])
            for k in range(0, len(rows_f) if base is not None else 0, chunk):
                rows = rows_f[k : k + chunk]
                self.b[rows] = base(batch(arrays, rows, agent)["s"])


class Unlearner:
    """One gradient step of any method, on a retained batch br and a forget batch bf with gates wf.
    With `frozen` (FrozenTerms) and batches that carry "rows", the frozen networks are not re-run."""

    def __init__(self, agent, agent0, cfg, base=None, margin=0.0, frozen: FrozenTerms | None = None):
        self.agent, self.agent0, self.cfg, self.base, self.margin = agent, agent0, cfg, base, margin
        self.frozen = frozen
        self.lambda_s = cfg.lambda_s
        self.rho = cfg.rho if cfg.rho is not None else 0.25 * agent.act_dim

    def _q0(self, b):
        if self.frozen is not None and "rows" in b:
            return self.frozen.q0[b["rows"]]
        with torch.no_grad():
            return self.agent0.q(b["s"], b["a"])

    def _pi0(self, b):
        if self.frozen is not None and "rows" in b:
            return self.frozen.pi0[b["rows"]]
        with torch.no_grad():
            return self.agent0.actor(b["s"])

    def _base(self, b):
        if self.frozen is not None and "rows" in b:
            return self.frozen.b[b["rows"]]
        with torch.no_grad():
            return self.base(b["s"])

    def step(self, br: dict, bf: dict, wf: torch.Tensor, phase: int = 0) -> tuple[float, float]:
        ag, cfg, m = self.agent, self.cfg, self.cfg.method
        n_r = len(br["r"])
        if m in ("cure", "cure-uniform", "cure-noactor"):
            # one twin-critic pass on B_r and B_f stacked serves all four terms; for TD3+BC one target pass
            # too, with the smoothing noise drawn per batch (B_r then B_f: the random stream is unchanged)
            s, a = torch.cat([br["s"], bf["s"]]), torch.cat([br["a"], bf["a"]])
            q1, q2 = ag.critic(s, a)
            q12_r, q12_f = (q1[:n_r], q2[:n_r]), (q1[n_r:], q2[n_r:])
            kw_r = kw_f = {}
            if ag.algo == "td3bc":  # one target pass on B_r u B_f, its noise drawn for B_r then B_f
                y = ag.target(_cat(br, bf), parts=(n_r, len(bf["r"])))
                kw_r, kw_f = {"y": y[:n_r]}, {"y": y[n_r:]}
            if ag.algo == "iql":  # IQL's Q_target(s, a), shared by its V loss and its AWR weights
                with torch.no_grad():
                    self._qt = torch.minimum(*ag.critic_target(s, a))
                kw_r, kw_f = {"qt": self._qt[:n_r]}, {"qt": self._qt[n_r:]}
            b_f, q0 = self._base(bf), self._q0(br)
            loss = ag.critic_per_sample(br, q12=q12_r, **kw_r).mean()
            q_f = torch.minimum(*q12_f)
            loss = loss + self.lambda_s * (wf * torch.relu(q_f - (b_f - self.margin)) ** 2).mean()
            loss = loss + ((1 - wf) * ag.critic_per_sample(bf, q12=q12_f, **kw_f)).mean()
            loss = loss + cfg.lambda_a * ((torch.minimum(*q12_r) - q0) ** 2).mean()
        elif m == "neggrad":
            loss = ag.critic_per_sample(br).mean() - cfg.neggrad_weight * ag.critic_per_sample(bf).mean()
        elif m == "trajdeleter" and phase == 1:
            q0 = self._q0(br)
            q1, q2 = ag.critic(br["s"], br["a"])
            loss = ((q1 - q0) ** 2 + (q2 - q0) ** 2).mean()
        elif m in ("random-reward", "trajdeleter"):
            loss = ag.critic_per_sample(_cat(br, bf)).mean()
        else:  # finetune
            loss = ag.critic_per_sample(br).mean()
        ag.step_critic(loss)
        aloss = torch.zeros(())
        if ag.actor_due():
            aloss = self._actor_loss(br, bf, wf, n_r, phase)
            ag.step_actor(aloss)
            ag.update_targets()
        ag.steps += 1
        with torch.no_grad():
            qmax = float(ag.q(br["s"], br["a"]).abs().max())
        return float(loss.detach()) + float(aloss.detach()), qmax

    def _actor_loss(self, br, bf, wf, n_r, phase):
        ag, cfg, m = self.agent, self.cfg, self.cfg.method
        if m in ("cure", "cure-uniform"):
            both, bc_w = _cat(br, bf), torch.cat([torch.ones(n_r), 1 - wf])
            if ag.algo == "iql":  # the critic step left Q_target unchanged: its pass on B_r u B_f serves
                return ag.actor_per_sample(both, bc_weight=bc_w, qt=self._qt).mean()
            pi = ag.actor(both["s"])  # one actor pass: the backbone loss, the repel and the anchor terms
            loss = ag.actor_per_sample(both, bc_weight=bc_w, pi=pi).mean()
            pi_r, pi_f = pi[:n_r], pi[n_r:]
            loss = loss + cfg.lambda_r * (wf * torch.relu(self.rho - ((pi_f - bf["a"]) ** 2).sum(-1))).mean()
            return loss + cfg.lambda_p * ((pi_r - self._pi0(br)) ** 2).sum(-1).mean()
        if m == "cure-noactor" and ag.algo == "iql":
            return ag.actor_per_sample(_cat(br, bf), qt=self._qt).mean()
        if m == "cure-noactor" or m in ("random-reward",) or (m == "trajdeleter" and phase == 0):
            return ag.actor_per_sample(_cat(br, bf)).mean()
        if m == "trajdeleter":
            pi0 = self._pi0(br)
            return ag.actor_per_sample(br).mean() + ((ag.actor(br["s"]) - pi0) ** 2).sum(-1).mean()
        return ag.actor_per_sample(br).mean()  # finetune, neggrad
