"""Audit: return, return_ratio, forget-influence remaining (fir), membership AUC (mia_auc),
TrajAuditor-style Grubbs unlearn_rate against shadow copies, and cost_ratio."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass

import numpy as np
import torch

from methodkit.core.kernels.segments import grubbs_critical, grubbs_rows, roc_auc, segment_mean, segment_starts
from methodkit.tools.cure.backbones import Agent, batch
from methodkit.tools.cure.data import Dataset, make_env


@dataclass
class AuditConfig:
    episodes: int = 10
    max_episode_steps: int = 1000
    shadows: int = 4
    shadow_steps: int = 200
    perturb: float = 0.05
    perturb_samples: int = 8
    alpha: float = 0.05
    seed: int = 0


def evaluate_return(agent: Agent, env_id: str, episodes: int, max_steps: int, seed: int) -> tuple[float, float]:
    """Mean and std of the undiscounted return of the deterministic policy."""
    env = make_env(env_id)
    returns = []
    for k in range(episodes):
        obs, _ = env.reset(seed=seed * 1000 + k)
        total = 0.0
        for _ in range(max_steps):
            obs, r, term, trunc, _ = env.step(agent.act(obs[None])[0])
            total += float(r)
            if term or trunc:
                break
        returns.append(total)
    env.close()
    return float(np.mean(returns)), float(np.std(returns))


def _act(agent: Agent, obs: np.ndarray) -> np.ndarray:
    return agent.act(obs)


def fir(model: Agent, original: Agent, retrain: Agent, ds: Dataset, forget_ids, u: np.ndarray) -> float:
    """mean_s[(pi(s) - pi_ret(s)).u] / mean_s[(pi_0(s) - pi_ret(s)).u] over forget states where the style fired."""
    rows = ds.rows_of(forget_ids)
    rows = rows[ds.arrays["style_on"][rows]]
    if len(rows) == 0:
        return float("nan")
    obs = ds.arrays["observations"][rows]
    ret = _act(retrain, obs)
    num = ((_act(model, obs) - ret) @ u).mean()
    den = ((_act(original, obs) - ret) @ u).mean()
    return float(num / den) if abs(den) > 1e-9 else float("nan")


def per_traj_stats(agent: Agent, ds: Dataset, ids) -> tuple[np.ndarray, np.ndarray]:
    """Per-trajectory mean squared TD error and mean ||pi(s) - a||^2 (segment means over traj_id)."""
    rows = ds.rows_of(ids)
    with torch.no_grad():
        b = batch(ds.arrays, rows, agent)
        td = (2 * agent.td_sq(b)).numpy() / 2  # mean over the twin heads of delta^2
        bc = ((agent.actor(b["s"]) - b["a"]) ** 2).sum(-1).numpy()
    starts = segment_starts(ds.arrays["traj_id"][rows])
    return segment_mean(td, starts), segment_mean(bc, starts)


def mia_auc(agent: Agent, ds: Dataset, forget_ids, nonmember_ids, reference_ids) -> float:
    """AUC of -(z(mean delta^2) + z(mean ||pi - a||^2)) between forget and held-out non-member trajectories,
    z-scored on held-out reference (R) trajectories; 0.5 = undetectable."""
    ref_td, ref_bc = per_traj_stats(agent, ds, reference_ids)

    def member_score(ids):
        td, bc = per_traj_stats(agent, ds, ids)
        z = (td - ref_td.mean()) / (ref_td.std() + 1e-12) + (bc - ref_bc.mean()) / (ref_bc.std() + 1e-12)
        return -z

    pos, neg = member_score(forget_ids), member_score(nonmember_ids)
    return roc_auc(np.concatenate([pos, neg]), np.concatenate([np.ones(len(pos)), np.zeros(len(neg))]))


def value_samples(agent: Agent, ds: Dataset, traj: int, cfg: AuditConfig) -> np.ndarray:
    """Q over perturbed states of one trajectory (fixed perturbations: the same for every model)."""
    rows = np.arange(ds.starts[traj], ds.starts[traj + 1])
    g = np.random.default_rng([cfg.seed, 53, traj])
    obs = np.repeat(ds.arrays["observations"][rows], cfg.perturb_samples, 0)
    act = np.repeat(ds.arrays["actions"][rows], cfg.perturb_samples, 0)
    std = ds.arrays["observations"].std(0)
    obs = obs + g.normal(0, cfg.perturb, obs.shape).astype(np.float32) * std
    with torch.no_grad():
        s = agent.norm(torch.as_tensor(obs, dtype=torch.float32))
        return np.sort(agent.q(s, torch.as_tensor(act)).numpy())


def make_shadows(original: Agent, ds: Dataset, cfg: AuditConfig, exclude=(), progress=None) -> list[Agent]:
    """Cheap shadow copies: the original fine-tuned on its own training data with other seeds."""
    rows = ds.rows_of(np.setdiff1d(ds.train_ids(), np.asarray(list(exclude), dtype=np.int64)))
    shadows = []
    gen = original.gen
    original.gen = None
    for k in range(cfg.shadows):
        sh = copy.deepcopy(original)
        sh.gen = torch.Generator().manual_seed(cfg.seed * 100 + k + 1)
        sh.requires_grad_(True)
        sh.make_optimisers()
        rng = np.random.default_rng([cfg.seed, 59, k])
        for step in range(cfg.shadow_steps):
            sh.update(batch(ds.arrays, rows[rng.integers(0, len(rows), 256)], sh))
            if progress and (step % 50 == 0 or step == cfg.shadow_steps - 1):
                progress(f"shadow {k + 1}/{cfg.shadows}", step + 1, cfg.shadow_steps)
        sh.requires_grad_(False)
        shadows.append(sh)
    original.gen = gen
    return shadows


def unlearn_rate(model: Agent, original: Agent, shadows: list[Agent], ds: Dataset, forget_ids, cfg: AuditConfig):
    """Share of forget trajectories where the model's value-distribution distance to the original
    (Wasserstein-1 over perturbed states) is a Grubbs outlier above the shadows' distances."""
    n = len(shadows) + 1
    crit = grubbs_critical(n, cfg.alpha)
    rows = np.empty((len(forget_ids), n))
    for k, t in enumerate(forget_ids):
        ref = value_samples(original, ds, t, cfg)
        for j, agent in enumerate([*shadows, model]):
            rows[k, j] = np.abs(value_samples(agent, ds, t, cfg) - ref).mean()
    g, arg = grubbs_rows(rows)
    above = rows[:, -1] > rows[:, :-1].mean(1)  # an outlier below the shadows (the original itself) is no unlearning
    flagged = (g > crit) & (arg == n - 1) & above
    return float(flagged.mean()), rows


@dataclass
class ModelAudit:
    model: str
    method: str
    return_mean: float
    return_std: float
    return_ratio: float | None
    fir: float | None
    mia_auc: float
    unlearn_rate: float | None
    seconds: float | None
    cost_ratio: float | None

    def to_dict(self) -> dict:
        return asdict(self)


def audit(models: dict, meta: dict, original: Agent, ds: Dataset, forget_ids, cfg: AuditConfig, *,
          retrain: Agent | None = None, retrain_seconds: float | None = None, contributor: str | None = None,
          exclude=(), progress=None):  # fmt: skip
    """Audit named models (name -> agent; meta: name -> metadata) on one forget set; returns (rows, per-traj)."""
    progress = progress or (lambda *a: None)
    forget_ids = np.asarray(forget_ids)
    contrib = ds.traj_contributor()
    split = ds.arrays["traj_split"]
    fc = np.bincount(contrib[forget_ids]).argmax() if contributor is None else ds.contributor_id(contributor)
    nonmember = np.flatnonzero((contrib == fc) & (split == 1))
    ref_c = 0 if fc != 0 else 1
    reference = np.flatnonzero((contrib == ref_c) & (split == 1))
    if len(reference) < 2:
        reference = np.flatnonzero(split == 1)
    u = np.asarray(ds.meta["style_u"].get(ds.meta["contributors"][fc], np.zeros(ds.meta["act_dim"])))
    shadows = make_shadows(original, ds, cfg, exclude, progress) if cfg.shadows >= 2 else []
    rows, per_traj = [], {"traj_id": forget_ids}
    base_return = None
    for k, (name, agent) in enumerate(models.items()):
        progress("audit", k, len(models))
        r_mean, r_std = evaluate_return(agent, ds.meta["env"], cfg.episodes, cfg.max_episode_steps, cfg.seed)
        if agent is original:
            base_return = r_mean
        f = fir(agent, original, retrain, ds, forget_ids, u) if retrain is not None and u.any() else None
        auc = mia_auc(agent, ds, forget_ids, nonmember, reference) if len(nonmember) else float("nan")
        rate = None
        if shadows:
            rate, dist = unlearn_rate(agent, original, shadows, ds, forget_ids, cfg)
            per_traj[f"{name}:w1"] = dist[:, -1]
        td, bc = per_traj_stats(agent, ds, forget_ids)
        per_traj[f"{name}:td2"], per_traj[f"{name}:bc2"] = td, bc
        seconds = meta[name].get("seconds")
        cost = seconds / retrain_seconds if retrain_seconds and seconds is not None else None
        rows.append(ModelAudit(name, meta[name].get("method", "train"), r_mean, r_std, None, f, auc, rate, seconds, cost))
    if base_return is None:
        base_return = evaluate_return(original, ds.meta["env"], cfg.episodes, cfg.max_episode_steps, cfg.seed)[0]
    for row in rows:
        row.return_ratio = row.return_mean / base_return if abs(base_return) > 1e-9 else None
    progress("audit", len(models), len(models))
    return rows, per_traj
