"""The one torch training loop shared by every method that trains a network.

AdamW (or SGD with momentum); linear warmup then cosine decay to a floor; global gradient clipping; a data
order that is a pure function of (seed, epoch), so a resumed run sees the same
batches; progress with ETA through the callback; a `log.csv` row per logged step;
atomic checkpoints (model + optimizer state, safetensors) every N steps and at the
end; `resume=True` continues from the last checkpoint; a non-finite loss stops the
run with the last good checkpoint kept and raises RunFailure (exit 1).
"""

from __future__ import annotations

import csv
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from methodkit.core import checkpoint
from methodkit.core.errors import RunFailure, UsageError
from methodkit.core.progress import ProgressCallback, silent

OPTIMIZERS = ("adamw", "sgd")


@dataclass
class TrainConfig:
    steps: int
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    warmup: int = 0
    min_lr_ratio: float = 0.1  # cosine floor as a fraction of lr
    clip: float | None = 1.0
    log_every: int = 50
    checkpoint_every: int = 0  # 0: only at the end
    seed: int = 0
    optimizer: str = "adamw"  # adamw | sgd (SGD uses beta1 as momentum)

    def __post_init__(self):
        if self.steps <= 0:
            raise UsageError(f"--steps must be positive, got {self.steps}")
        if self.batch_size <= 0:
            raise UsageError(f"--batch-size must be positive, got {self.batch_size}")
        if self.lr <= 0:
            raise UsageError(f"--lr must be positive, got {self.lr}")
        if self.optimizer not in OPTIMIZERS:
            raise UsageError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """LR for optimizer step `step` (0-based): linear warmup, then cosine down to lr*min_lr_ratio."""
    if cfg.warmup > 0 and step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    span = max(cfg.steps - cfg.warmup, 1)
    progress = min(max(step - cfg.warmup, 0) / span, 1.0)
    floor = cfg.lr * cfg.min_lr_ratio
    return floor + (cfg.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


def batch_indices(n_items: int, batch_size: int, seed: int, step: int) -> np.ndarray:
    """Item indices of batch `step`: epochs are seeded permutations, so any step is reproducible alone."""
    per_epoch = max(n_items // batch_size, 1)
    epoch, position = divmod(step, per_epoch)
    order = np.random.default_rng(np.random.SeedSequence([seed, epoch])).permutation(n_items)
    start = position * batch_size
    return order[start : start + batch_size] if n_items >= batch_size else order


@dataclass
class TrainResult:
    steps: int
    final_loss: float
    seconds: float
    resumed_from: int = 0
    history: list = field(default_factory=list)  # the logged rows

    def to_dict(self) -> dict:
        return asdict(self)


LossFn = Callable[[Any, np.ndarray], "Any"]  # (model, batch item indices) -> scalar loss tensor


def _optimizer_tensors(optimizer) -> dict:
    import torch

    out = {}
    for i, state in enumerate(optimizer.state_dict()["state"].values()):
        for key, value in state.items():
            out[f"optim.{i}.{key}"] = value if torch.is_tensor(value) else torch.tensor(value)
    return out


def _restore_optimizer(optimizer, tensors: dict) -> None:
    state_dict = optimizer.state_dict()
    params = [p for group in state_dict["param_groups"] for p in group["params"]]
    restored = {}
    for i, pid in enumerate(params):
        entry = {k.split(".", 2)[2]: v for k, v in tensors.items() if k.startswith(f"optim.{i}.")}
        if entry:
            restored[pid] = entry
    state_dict["state"] = restored
    optimizer.load_state_dict(state_dict)


# public names for loops of their own (cure-unlearn's agents hold two optimisers)
optimizer_tensors = _optimizer_tensors
restore_optimizer = _restore_optimizer


def train(
    model,
    loss_fn: LossFn,
    n_items: int,
    cfg: TrainConfig,
    *,
    run_dir: str | os.PathLike | None = None,
    spec: dict | None = None,
    model_config: dict | None = None,
    resume: bool = False,
    evaluate: Callable[[Any], dict] | None = None,
    progress: ProgressCallback = silent,
) -> TrainResult:
    """Train `model` for cfg.steps optimizer steps on batches of item indices drawn from range(n_items).

    `loss_fn(model, idx)` builds the batch for `idx` and returns the loss. With `run_dir`, writes
    `log.csv` and `model.safetensors` (+ `model.json` sidecar, spec hash of `spec`) there.
    `evaluate(model) -> dict` runs at each logged step and its values join the log row.
    """
    import torch

    torch.manual_seed(cfg.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer == "sgd":
        optimizer = torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.beta1, weight_decay=cfg.weight_decay)
    else:
        optimizer = torch.optim.AdamW(params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), weight_decay=cfg.weight_decay)
    spec = spec or {}
    folder = Path(run_dir) if run_dir is not None else None
    ckpt = folder / "model.safetensors" if folder is not None else None
    start = 0
    history: list[dict] = []
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        if resume and ckpt.exists():
            tensors, sidecar = checkpoint.load(ckpt, expected_spec=spec)
            model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
            _restore_optimizer(optimizer, tensors)
            start = int(sidecar["step"])
        elif resume:
            raise UsageError(f"--resume: no checkpoint in {folder}")
    log_path = folder / "log.csv" if folder is not None else None
    if log_path is not None and start == 0 and log_path.exists():
        log_path.unlink()

    def save(step: int) -> None:
        if ckpt is None:
            return
        tensors = {f"model.{k}": v for k, v in model.state_dict().items()}
        tensors.update(_optimizer_tensors(optimizer))
        checkpoint.save(ckpt, tensors, config=model_config or {}, spec=spec, extra={"step": step, "train": asdict(cfg)})

    def log(row: dict) -> None:
        history.append(row)
        if log_path is None:
            return
        new = not log_path.exists()
        with open(log_path, "a", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(row), lineterminator="\n")
            if new:
                writer.writeheader()
            writer.writerow(row)

    began = time.monotonic()
    loss_value = float("nan")
    running, counted = 0.0, 0
    model.train()
    progress("train", start, cfg.steps)
    for step in range(start, cfg.steps):
        lr = learning_rate(step, cfg)
        for group in optimizer.param_groups:
            group["lr"] = lr
        idx = batch_indices(n_items, cfg.batch_size, cfg.seed, step)
        loss = loss_fn(model, idx)
        loss_value = float(loss.detach())
        if not math.isfinite(loss_value):
            # The weights are still those of the last good step: keep them before stopping.
            save(step)
            kept = f"last good checkpoint (step {step}) kept in {ckpt}" if ckpt is not None else "no checkpoint kept"
            raise RunFailure(f"non-finite loss ({loss_value}) at step {step + 1}; {kept}; lower --lr or raise --warmup")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.clip)) if cfg.clip else float("nan")
        optimizer.step()
        running += loss_value
        counted += 1
        done = step + 1
        if done % cfg.log_every == 0 or done == cfg.steps:
            row = {
                "step": done,
                "lr": lr,
                "loss": running / counted,
                "grad_norm": grad_norm,
                "seconds": round(time.monotonic() - began, 3),
            }
            if evaluate is not None:
                model.eval()
                with torch.no_grad():
                    row.update(evaluate(model))
                model.train()
            log(row)
            running, counted = 0.0, 0
        if cfg.checkpoint_every and done % cfg.checkpoint_every == 0 and done != cfg.steps:
            save(done)
        progress("train", done, cfg.steps)
    save(cfg.steps)
    model.eval()
    final = history[-1]["loss"] if history else loss_value
    return TrainResult(cfg.steps, float(final), time.monotonic() - began, start, history)
