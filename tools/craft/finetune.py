"""On-policy post-training of a vocabulary policy: CRAFT and its baselines and ablations.

Per iteration: `episodes` routes driven with actions sampled from pi_old; for every decision
the group of candidates is scored by the counterfactual proxy (proxy.group_scores) and
normalised into A(m); the executed window is scored for real (proxy.realised_scores), and
on interaction-critical windows (kernels.critical_events) the residual
A_res = clip((R - S(a) - b) / max(std_G, sigma), -3, 3) corrects the proxy where it was
wrong. Loss = L_proxy + lambda_res L_res + beta g(s) KL(teacher || student) - eta H, with
dual-clip ratios, `epochs` passes over minibatches, and an EMA teacher updated after every
optimiser step. The RL loop has its own schedule (collect, score, several epochs over the
fresh batch) so it does not go through core.train.train, whose one-pass schedule over a
fixed data set does not fit; it reuses core.train's optimiser-state checkpoint helpers.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from methodkit.core import checkpoint
from methodkit.core.errors import DataError, RunFailure, UsageError
from methodkit.core.progress import silent
from methodkit.core.train import _optimizer_tensors, _restore_optimizer
from methodkit.tools.craft import collect, evaluate, kernels, losses, proxy, suites
from methodkit.tools.craft.policy import N_ACTIONS, OBS_DIM

METHODS = (
    "craft", "bc", "closed-loop-ppo", "proxy-only", "craft-no-res", "craft-res-all", "craft-no-kl", "craft-refkl",
)  # fmt: skip
KL_GATES = ("none", "adv")


@dataclass
class FinetuneConfig:
    method: str = "craft"
    iterations: int = 100
    episodes: int = 32
    epochs: int = 4
    minibatch: int = 512
    lr: float = 1e-4
    clip: float = 0.2
    dual_clip: float = 3.0
    ema: float = 0.995
    beta: float = 0.05
    lambda_res: float = 1.0
    entropy: float = 0.001
    group_size: int = 16
    proxy_futures: str = "cv"
    kl_dir: str = "fwd"
    kl_gate: str = "none"
    gamma: float = 0.99
    gae_lambda: float = 0.95
    value_coef: float = 0.5
    kl_limit: float = 10.0
    critical_events: tuple = tuple(kernels.CRITICAL_NAMES.values())  # which flags make a window critical
    adv_floor: float = 0.0  # ours: Â = (S - mean) / max(std_G, adv_floor); 0 = the paper's plain std
    eval_every: int = 0
    seed: int = 0

    def __post_init__(self):
        if self.method not in METHODS:
            raise UsageError(f"--method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if not 2 <= self.group_size <= N_ACTIONS:
            raise UsageError(f"--group-size must lie in [2, {N_ACTIONS}], got {self.group_size}")
        if self.proxy_futures not in proxy.FUTURES:
            raise UsageError(f"--proxy-futures must be one of {', '.join(proxy.FUTURES)}")
        if self.kl_dir not in losses.KL_DIRECTIONS or self.kl_gate not in KL_GATES:
            raise UsageError("bad --kl-dir or --kl-gate")
        unknown = set(self.critical_events) - set(kernels.CRITICAL_NAMES.values())
        if unknown or not self.critical_events:
            known = ", ".join(kernels.CRITICAL_NAMES.values())
            raise UsageError(
                f"--critical-events: unknown event {sorted(unknown)[0] if unknown else ''!r} (known: {known})"
            )
        self.critical_events = tuple(self.critical_events)
        for name in ("iterations", "episodes", "epochs", "minibatch"):
            if getattr(self, name) <= 0:
                raise UsageError(f"--{name} must be positive")

    # what each method uses
    @property
    def uses_proxy(self) -> bool:
        return self.method.startswith("craft") or self.method == "proxy-only"

    @property
    def uses_residual(self) -> bool:
        return self.method in ("craft", "craft-res-all", "craft-no-kl", "craft-refkl")

    @property
    def kl_target(self) -> str | None:
        if self.method in ("craft", "craft-no-res", "craft-res-all"):
            return "ema"
        if self.method in ("proxy-only", "craft-refkl"):
            return "frozen"
        return None


@dataclass
class FinetuneResult:
    iterations: int
    decisions: int
    seconds: float
    last: dict
    history: list = field(default_factory=list)
    lr_halved: bool = False
    resumed_from: int = 0

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "history"}


class ValueNet(torch.nn.Module):
    def __init__(self, norm):
        super().__init__()
        self.norm = copy.deepcopy(norm)
        self.body = torch.nn.Sequential(
            torch.nn.Linear(OBS_DIM, 256), torch.nn.Tanh(), torch.nn.Linear(256, 256), torch.nn.Tanh(),
            torch.nn.Linear(256, 1),
        )  # fmt: skip

    def forward(self, obs):
        return self.body(self.norm(obs))[:, 0]


@dataclass
class Stats:
    """Running means of the residual on non-critical states and of the group std (resumable)."""

    delta_sum: float = 0.0
    delta_n: int = 0
    std_sum: float = 0.0
    std_n: int = 0

    def update(self, delta_noncritical: np.ndarray, std: np.ndarray) -> None:
        self.delta_sum += float(delta_noncritical.sum())
        self.delta_n += int(delta_noncritical.size)
        self.std_sum += float(std.sum())
        self.std_n += int(std.size)

    @property
    def baseline(self) -> float:
        return self.delta_sum / self.delta_n if self.delta_n else 0.0

    @property
    def sigma(self) -> float:
        return self.std_sum / self.std_n if self.std_n else 1.0


def scorer_module(device: str):
    """The array module the proxy scorer runs on for a resolved device: None (the Numba kernel) on 'cpu',
    cupy on 'cuda' (core.backend.array_module)."""
    if device == "cpu":
        return None
    from methodkit.core.backend import array_module

    return array_module(device)


def advantages(d, cfg: FinetuneConfig, stats: Stats, rng: np.random.Generator, xp=None) -> dict:
    """Proxy group advantages, residual advantages and critical flags of a batch of decisions
    (xp: the scorer's array module, None for the Numba kernel; see scorer_module)."""
    n = len(d)
    s, sub, group_max = proxy.group_scores(d, cfg.proxy_futures, xp)
    mask = np.ones((n, N_ACTIONS), dtype=bool)
    if cfg.group_size < N_ACTIONS:
        mask[:] = False
        for i in range(n):  # k candidates sampled from pi_old without replacement
            p = d.probs[i] / d.probs[i].sum()
            mask[i, rng.choice(N_ACTIONS, cfg.group_size, replace=False, p=np.maximum(p, 1e-12) / p.sum())] = True
    count = mask.sum(1, keepdims=True)
    mean = (s * mask).sum(1, keepdims=True) / count
    std = np.sqrt((((s - mean) ** 2) * mask).sum(1) / count[:, 0])
    flat = std < 1e-9
    adv = np.where(flat[:, None] | ~mask, 0.0, (s - mean) / (np.maximum(std, cfg.adv_floor)[:, None] + 1e-6))
    rows = np.arange(n)
    executed = s[rows, d.action]
    conflict = (sub.nc[rows, d.action] < 1.0) | (sub.ttc[rows, d.action] == 0.0)
    r, _ = proxy.realised_scores(d, group_max, xp)
    delta = r - executed
    flags = kernels.critical_events(
        d.ego, d.ego_size, d.agents, d.agent_speed, d.present, d.collided, conflict, collect.FRAME_S
    )
    wanted = sum(bit for bit, name in kernels.CRITICAL_NAMES.items() if name in cfg.critical_events)
    critical = (flags & wanted) != 0 if cfg.method != "craft-res-all" else np.ones(n, dtype=bool)
    stats.update(delta[(flags & wanted) == 0], std)
    scale = np.maximum(std, stats.sigma)
    adv_res = np.where(critical, np.clip((delta - stats.baseline) / np.maximum(scale, 1e-6), -3.0, 3.0), 0.0)
    return {
        "adv": adv, "mask": mask, "weights": np.where(mask, d.probs if cfg.group_size == N_ACTIONS else 1.0, 0.0)
        / np.where(mask, d.probs if cfg.group_size == N_ACTIONS else 1.0, 0.0).sum(1, keepdims=True),
        "adv_res": adv_res, "critical": critical, "flags": flags, "flat": flat, "proxy": s, "realised": r,
        "delta": delta,
    }  # fmt: skip


class Trainer:
    def __init__(self, model, arch: str, routes: list[dict], cfg: FinetuneConfig, eval_routes=None,
                 device: str = "cpu"):  # fmt: skip
        self.model, self.arch, self.cfg = model, arch, cfg
        self.xp = scorer_module(device)
        self.routes = routes
        self.scenes, self.ids = suites.scenes(routes)
        self.families = [r["family"] for r in routes]
        self.eval_routes = eval_routes
        self.teacher = copy.deepcopy(model).eval()
        for p in self.teacher.parameters():
            p.requires_grad_(False)
        self.value = ValueNet(model.norm) if cfg.method == "closed-loop-ppo" else None
        params = list(model.parameters()) + (list(self.value.parameters()) if self.value else [])
        self.params = params
        self.optimizer = torch.optim.Adam(params, lr=cfg.lr)
        self.stats = Stats()
        self.history: list[dict] = []
        self.iteration = 0
        self.lr_halved = False

    # ---- checkpoints (model, teacher, value, optimiser, running statistics, log)
    def state(self) -> tuple[dict, dict]:
        tensors = {f"model.{k}": v for k, v in self.model.state_dict().items()}
        tensors.update({f"teacher.{k}": v for k, v in self.teacher.state_dict().items()})
        if self.value is not None:
            tensors.update({f"value.{k}": v for k, v in self.value.state_dict().items()})
        tensors.update(_optimizer_tensors(self.optimizer))
        tensors = {k: v.detach().clone() for k, v in tensors.items()}  # a snapshot, not live references
        extra = {"iteration": self.iteration, "stats": asdict(self.stats), "history": list(self.history),
                 "lr": self.optimizer.param_groups[0]["lr"], "lr_halved": self.lr_halved}  # fmt: skip
        return tensors, extra

    def save(self, path: Path, spec: dict) -> None:
        tensors, extra = self.state()
        checkpoint.save(path, tensors, config={"arch": self.arch}, spec=spec, extra=extra)

    def load(self, path: Path, spec: dict) -> None:
        tensors, side = checkpoint.load(path, expected_spec=spec)
        for prefix, module in (("model.", self.model), ("teacher.", self.teacher), ("value.", self.value)):
            if module is not None:
                module.load_state_dict({k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)})
        _restore_optimizer(self.optimizer, {k: v for k, v in tensors.items() if k.startswith("optim.")})
        for group in self.optimizer.param_groups:
            group["lr"] = side["lr"]
        self.iteration = int(side["iteration"])
        self.stats = Stats(**side["stats"])
        self.history = list(side["history"])
        self.lr_halved = bool(side["lr_halved"])

    # ---- one iteration
    def collect(self, it: int):
        rng = np.random.default_rng([self.cfg.seed, it, 1])
        pick = rng.choice(len(self.scenes), size=min(self.cfg.episodes, len(self.scenes)), replace=False)
        gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
        self.model.eval()
        return collect.run(
            self.model, [self.scenes[i] for i in pick], [self.ids[i] for i in pick],
            [self.families[i] for i in pick], sample=True, generator=gen, comfort=False,
        )  # fmt: skip

    def update(self, d, extra: dict, it: int) -> dict:
        cfg = self.cfg
        n = len(d)
        obs = torch.from_numpy(d.obs)
        action = torch.from_numpy(d.action)
        logp_old = torch.from_numpy(np.log(np.maximum(d.probs, 1e-12))).float()
        adv = torch.from_numpy(extra.get("adv", np.zeros((n, N_ACTIONS)))).float()
        weights = torch.from_numpy(extra.get("weights", np.zeros((n, N_ACTIONS)))).float()
        adv_res = torch.from_numpy(extra.get("adv_res", np.zeros(n))).float()
        critical = torch.from_numpy(extra.get("critical", np.zeros(n, dtype=bool)))
        ppo_adv = torch.from_numpy(extra["ppo_adv"]).float() if "ppo_adv" in extra else None
        returns = torch.from_numpy(extra["returns"]).float() if "returns" in extra else None
        use_res = cfg.uses_residual and bool(critical.any())
        rng = np.random.default_rng([cfg.seed, it, 2])
        sums = {"loss": 0.0, "l_proxy": 0.0, "l_res": 0.0, "kl": 0.0, "entropy": 0.0, "l_value": 0.0}
        steps = 0
        self.model.train()
        for _ in range(cfg.epochs):
            order = rng.permutation(n)
            for start in range(0, n, cfg.minibatch):
                idx = torch.from_numpy(order[start : start + cfg.minibatch])
                logp = torch.log_softmax(self.model(obs[idx]), dim=-1)
                ratio = torch.exp(logp - logp_old[idx])
                loss = torch.zeros(())
                terms = {}
                if cfg.uses_proxy:
                    surrogate = losses.dual_clip(ratio, adv[idx], cfg.clip, cfg.dual_clip)
                    terms["l_proxy"] = -(weights[idx] * surrogate).sum(-1).mean()
                    loss = loss + terms["l_proxy"]
                ra = ratio.gather(1, action[idx, None])[:, 0]
                if use_res:
                    crit = critical[idx].float()
                    res = losses.dual_clip(ra, adv_res[idx], cfg.clip, cfg.dual_clip)
                    terms["l_res"] = -(crit * res).sum() / crit.sum().clamp(min=1.0)
                    loss = loss + cfg.lambda_res * terms["l_res"]
                if ppo_adv is not None:
                    a = ppo_adv[idx]
                    terms["l_proxy"] = -losses.dual_clip(ra, a, cfg.clip, cfg.dual_clip).mean()
                    terms["l_value"] = ((self.value(obs[idx]) - returns[idx]) ** 2).mean()
                    loss = loss + terms["l_proxy"] + cfg.value_coef * terms["l_value"]
                with torch.no_grad():
                    teacher_logp = torch.log_softmax(self.teacher(obs[idx]), dim=-1)
                kl_state = losses.kl(teacher_logp, logp, cfg.kl_dir)
                if cfg.kl_target is not None:
                    gate = torch.ones_like(kl_state)
                    if cfg.kl_gate == "adv":
                        a_tot = adv[idx].clone()
                        a_tot.scatter_add_(1, action[idx, None], adv_res[idx, None])
                        drift = ((logp.exp() - teacher_logp.exp()).detach() * a_tot).sum(-1)
                        gate = torch.where(drift <= 0, 1.0, 0.1)
                    loss = loss + cfg.beta * (gate * kl_state).mean()
                ent = losses.entropy(logp).mean()
                loss = loss - cfg.entropy * ent
                kl_value = float(kl_state.mean().detach())
                if not math.isfinite(float(loss.detach())) or kl_value > cfg.kl_limit:
                    raise _Diverged(f"loss {float(loss.detach()):.4g}, KL {kl_value:.4g}")
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.params, 1.0)
                self.optimizer.step()
                if cfg.kl_target == "ema":
                    with torch.no_grad():
                        for pt, ps in zip(self.teacher.parameters(), self.model.parameters(), strict=True):
                            pt.mul_(cfg.ema).add_(ps.detach(), alpha=1.0 - cfg.ema)
                steps += 1
                sums["loss"] += float(loss.detach())
                sums["kl"] += kl_value
                sums["entropy"] += float(ent.detach())
                for k, v in terms.items():
                    sums[k] += float(v.detach())
        self.model.eval()
        return {k: v / max(steps, 1) for k, v in sums.items()} | {"updates": steps, "residual_used": use_res}

    def iterate(self, it: int) -> dict:
        began = time.monotonic()
        cfg = self.cfg
        episodes = self.collect(it)
        d = episodes.decisions
        extra: dict = {}
        row: dict = {"iteration": it + 1, "decisions": len(d), "train_ds": episodes.summary["ds"],
                     "train_sr": episodes.summary["sr"]}  # fmt: skip
        if cfg.uses_proxy or cfg.uses_residual:
            extra = advantages(d, cfg, self.stats, np.random.default_rng([cfg.seed, it, 3]), self.xp)
            row.update(
                n_critical=int(extra["critical"].sum()), n_flat=int(extra["flat"].sum()),
                proxy_mean=float(extra["proxy"].mean()), realised_mean=float(extra["realised"].mean()),
                residual_mean=float(extra["delta"].mean()), residual_baseline=self.stats.baseline,
                **{f"crit_{k}": v for k, v in kernels.flag_counts(extra["flags"]).items()},
            )  # fmt: skip
        if cfg.method == "closed-loop-ppo":
            order = np.lexsort((d.frame, d.env))
            with torch.no_grad():
                value = self.value(torch.from_numpy(d.obs)).double().numpy()
            adv_o, ret_o = losses.gae(d.reward[order], value[order], d.last[order], cfg.gamma, cfg.gae_lambda)
            adv = np.empty_like(adv_o)
            ret = np.empty_like(ret_o)
            adv[order], ret[order] = adv_o, ret_o
            extra = {"ppo_adv": (adv - adv.mean()) / (adv.std() + 1e-8), "returns": ret}
            row["reward_mean"] = float(d.reward.mean())
        row.update(self.update(d, extra, it))
        if cfg.eval_every and (it + 1) % cfg.eval_every == 0 and self.eval_routes:
            row["eval_ds"] = evaluate.run(self.model, self.eval_routes)["summary"]["ds"]
        row["seconds"] = round(time.monotonic() - began, 3)
        return row


class _Diverged(Exception):
    pass


def run(model, arch: str, routes, cfg: FinetuneConfig, *, eval_routes=None, run_dir=None, resume=False,
        progress=silent, parent: str | None = None, device: str = "cpu") -> tuple[torch.nn.Module, FinetuneResult]:  # fmt: skip
    """Fine-tune `model` in place on `routes`; returns it and the per-iteration history. `device` (resolved,
    'cpu' or 'cuda') is where the proxy scorer runs; the networks stay on the CPU."""
    torch.manual_seed(cfg.seed)
    trainer = Trainer(model, arch, routes, cfg, eval_routes, device)
    spec = {"arch": arch, "config": asdict(cfg), "routes": suites.fingerprint(routes), "parent": parent}
    ckpt = Path(run_dir) / "checkpoint.safetensors" if run_dir else None
    start = 0
    if ckpt is not None:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        if resume and ckpt.exists():
            trainer.load(ckpt, spec)
            start = trainer.iteration
        elif resume:
            raise UsageError(f"--resume: no checkpoint in {run_dir}")
    began = time.monotonic()
    if cfg.method == "bc":
        return model, FinetuneResult(0, 0, 0.0, {}, [])
    progress("finetune", start, cfg.iterations)
    last_good = trainer.state()
    it = start
    while it < cfg.iterations:
        try:
            row = trainer.iterate(it)
        except _Diverged as exc:
            if trainer.lr_halved:
                raise RunFailure(
                    f"fine-tuning diverged again at iteration {it + 1} ({exc}) after halving the learning rate; "
                    "the input policy is unchanged" + (f"; last checkpoint kept in {ckpt}" if ckpt else "")
                ) from None
            _restore(trainer, last_good)
            trainer.lr_halved = True
            for group in trainer.optimizer.param_groups:
                group["lr"] *= 0.5
            continue
        trainer.history.append(row)
        it += 1
        trainer.iteration = it
        last_good = trainer.state()
        if ckpt is not None:
            trainer.save(ckpt, spec)
        progress("finetune", it, cfg.iterations)
    decisions = sum(r["decisions"] for r in trainer.history)
    result = FinetuneResult(cfg.iterations, decisions, time.monotonic() - began, trainer.history[-1] if
                            trainer.history else {}, trainer.history, trainer.lr_halved, start)  # fmt: skip
    return model, result


def _restore(trainer: Trainer, saved: tuple[dict, dict]) -> None:
    tensors, extra = saved
    for prefix, module in (("model.", trainer.model), ("teacher.", trainer.teacher), ("value.", trainer.value)):
        if module is not None:
            module.load_state_dict({k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)})
    _restore_optimizer(trainer.optimizer, {k: v for k, v in tensors.items() if k.startswith("optim.")})
    trainer.stats = Stats(**extra["stats"])


def check_routes(routes) -> None:
    if not routes:
        raise DataError("the training suite has no routes")


def config_from_options(options: dict, seed: int) -> FinetuneConfig:
    """finetune's FinetuneConfig from its command-line options (`--critical-events` a comma list)."""
    import dataclasses

    names = {field.name for field in dataclasses.fields(FinetuneConfig)}
    values = {k: v for k, v in options.items() if k in names}
    if isinstance(values.get("critical_events"), str):
        values["critical_events"] = tuple(x.strip() for x in values["critical_events"].split(",") if x.strip())
    return FinetuneConfig(**values, seed=seed)
