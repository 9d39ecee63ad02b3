"""The planner (a scaled-down end-to-end model) and its NAVSIM-style evaluation.

Vectorised scene (features.flat) -> MLP -> logits over the 16 vocabulary candidates, trained by cross-entropy
to the expert index through core.train. Each batch is rho real + (1 - rho) synthetic scenes; the synthetic
part is drawn from the selected set (resample) or from the selected set with per-sample weights (reweight).
Evaluation: the chosen candidate's 4 s plan, run by the low-level controller with the other agents
replaying their recorded futures, scored by the PDM scorer (precomputed per candidate in the pool).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np

from methodkit.core.errors import RunFailure

N_CANDIDATES = 16


@dataclass
class PlannerConfig:
    hidden: int = 256
    steps: int = 3000
    batch_size: int = 256
    lr: float = 1e-3
    rho: float = 0.5  # real share of every batch
    weight_decay: float = 1e-4
    expert_l2: float = 0.0  # weight of the L2 term on expert_traj (0: off, cross-entropy alone)


def build(in_dim: int, cfg: PlannerConfig):
    import torch

    return torch.nn.Sequential(
        torch.nn.Linear(in_dim, cfg.hidden), torch.nn.SiLU(), torch.nn.Linear(cfg.hidden, cfg.hidden),
        torch.nn.SiLU(), torch.nn.Linear(cfg.hidden, N_CANDIDATES),
    )  # fmt: skip


def per_sample_loss(model, x, y):
    import torch.nn.functional as tf

    return tf.cross_entropy(model(x), y, reduction="none")


def expected_plan(logits, plans):
    """The planner's soft plan [B, T, 2]: the softmax-weighted mean of the candidates' (x, y) plans [B, 16, T, 2]."""
    return (logits.softmax(1)[:, :, None, None] * plans).sum(1)


def expert_distance(logits, plans, expert):
    """Per-sample L2 term: mean over the plan's steps of the squared distance (m^2) between the soft plan
    and the expert's trajectory (x, y) [B, T, 2]."""
    return ((expected_plan(logits, plans) - expert) ** 2).sum(-1).mean(-1)


def plan_targets(arrays: dict):
    """(candidate (x, y) plans [N, 16, T, 2], expert (x, y) [N, T, 2]) of a pool, on the steps both hold."""
    t = min(arrays["cand_plans"].shape[2], arrays["expert_traj"].shape[1])
    return (np.asarray(arrays["cand_plans"][:, :, :t, :2], dtype=np.float32),
            np.asarray(arrays["expert_traj"][:, :t, :2], dtype=np.float32))  # fmt: skip


@dataclass
class TrainData:
    real_x: np.ndarray
    real_y: np.ndarray
    syn_x: np.ndarray  # the selected synthetic scenes (may be empty)
    syn_y: np.ndarray
    syn_w: np.ndarray | None = None  # per-sample weights (reweight); None: uniform resampling
    real_plans: tuple | None = None  # plan_targets of the real scenes (needed when expert_l2 > 0)
    syn_plans: tuple | None = None  # plan_targets of the selected synthetic scenes


def train(data: TrainData, cfg: PlannerConfig, seed: int, snapshots: int = 0, progress=None, init_state=None,
          log=None):  # fmt: skip
    """Train a planner; returns (model, states): `snapshots` copies of its weights spread over the run.
    `init_state` (a state dict) starts from those weights instead of the seeded init (--warm-start).
    A non-finite loss restores the weights the training started from (the seeded init, or `init_state`)
    and retries once at half the learning rate (logged); a second one raises RunFailure (exit 1)."""
    try:
        return _train_once(data, cfg, seed, snapshots, progress, init_state)
    except RunFailure as first:
        retry = replace(cfg, lr=cfg.lr / 2)
        if log is not None:
            log(f"planner: {_what(first)}; restarting from the starting weights once at lr {retry.lr:g}")
        try:
            return _train_once(data, retry, seed, snapshots, progress, init_state)
        except RunFailure as second:
            raise RunFailure(
                f"planner training: {_what(first)} at lr {cfg.lr:g}, and again after restarting from the starting "
                f"weights at lr {retry.lr:g} ({_what(second)}); the selected scenes' features may be damaged"
            ) from second


def _what(exc: RunFailure) -> str:
    return str(exc).split(";")[0]  # core.train's "non-finite loss (nan) at step N", without its advice


def _train_once(data: TrainData, cfg: PlannerConfig, seed: int, snapshots: int, progress, init_state):
    import torch

    from methodkit.core import train as core_train

    torch.manual_seed(seed)
    model = build(data.real_x.shape[1], cfg)
    if init_state is not None:
        model.load_state_dict(init_state)
    rx, ry = torch.as_tensor(data.real_x), torch.as_tensor(data.real_y)
    sx, sy = torch.as_tensor(data.syn_x), torch.as_tensor(data.syn_y)
    n_syn = len(data.syn_y)
    rho = cfg.rho if n_syn else 1.0
    n_real_b = max(1, int(round(rho * cfg.batch_size)))
    n_syn_b = cfg.batch_size - n_real_b if n_syn else 0
    probs = None
    if data.syn_w is not None and n_syn:
        probs = np.asarray(data.syn_w, dtype=np.float64)
        probs = probs / probs.sum()
    counter = [0]
    l2 = cfg.expert_l2
    rp = re_ = sp = se = None
    if l2 > 0:
        if data.real_plans is None or (n_syn and data.syn_plans is None):
            raise ValueError("expert_l2 > 0 needs TrainData.real_plans and syn_plans (planner.plan_targets)")
        rp, re_ = (torch.as_tensor(a) for a in data.real_plans)
        if n_syn:
            sp, se = (torch.as_tensor(a) for a in data.syn_plans)

    def part(m, x, y, plans, expert, rows):
        if l2 == 0:
            return per_sample_loss(m, x[rows], y[rows]).mean()
        logits = m(x[rows])
        ce = torch.nn.functional.cross_entropy(logits, y[rows], reduction="none")
        return (ce + l2 * expert_distance(logits, plans[rows], expert[rows])).mean()

    def loss_fn(m, idx):
        step = counter[0]
        counter[0] += 1
        rng = np.random.default_rng([seed, step])
        r = torch.as_tensor(idx[:n_real_b] if len(idx) >= n_real_b else rng.integers(len(ry), size=n_real_b))
        loss = part(m, rx, ry, rp, re_, r) * (n_real_b / cfg.batch_size)
        if n_syn_b:
            s = torch.as_tensor(rng.choice(n_syn, size=n_syn_b, p=probs))
            loss = loss + part(m, sx, sy, sp, se, s) * (n_syn_b / cfg.batch_size)
        return loss

    states = []
    every = max(1, cfg.steps // snapshots) if snapshots else cfg.steps + 1

    def keep(m):
        states.append({k: v.detach().clone() for k, v in m.state_dict().items()})
        return {}

    tc = core_train.TrainConfig(
        steps=cfg.steps, batch_size=n_real_b, lr=cfg.lr, weight_decay=cfg.weight_decay, seed=seed,
        log_every=every, warmup=min(100, cfg.steps // 10),
    )  # fmt: skip
    core_train.train(model, loss_fn, len(ry), tc, evaluate=keep if snapshots else None,
                     progress=progress or core_train.silent)  # fmt: skip
    return model, states[-snapshots:] if snapshots else []


def choose(model, x: np.ndarray) -> np.ndarray:
    import torch

    model.eval()
    with torch.no_grad():
        return model(torch.as_tensor(x)).argmax(1).numpy().astype(np.int64)


def evaluate(choice: np.ndarray, cand_scores: np.ndarray) -> tuple[dict, np.ndarray]:
    """(summary x100: pdms and each sub-score, per-scene scores [N, 6]) of chosen candidates."""
    per = cand_scores[np.arange(len(choice)), choice]
    if not np.isfinite(per).all():
        raise RunFailure("PDMS evaluation produced a non-finite score; the pool's cand_scores are damaged")
    names = ("nc", "dac", "ttc", "ep", "comfort", "pdms")
    return {n: float(100 * per[:, i].mean()) for i, n in enumerate(names)}, per


def save(path, model, cfg: PlannerConfig, in_dim: int, extra: dict | None = None) -> None:
    from methodkit.core import checkpoint

    spec = {"model": "autoscale-planner", "in_dim": in_dim, "candidates": N_CANDIDATES, "hidden": cfg.hidden}
    checkpoint.save(path, dict(model.state_dict()), config={**asdict(cfg), "in_dim": in_dim}, spec=spec,
                    extra=extra)  # fmt: skip


def load(path):
    from methodkit.core import checkpoint

    tensors, side = checkpoint.load(path)
    conf = dict(side["config"])
    in_dim = conf.pop("in_dim")
    cfg = PlannerConfig(**conf)
    model = build(in_dim, cfg)
    model.load_state_dict(tensors)
    return model, cfg
