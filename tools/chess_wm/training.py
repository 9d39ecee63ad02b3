"""Training a world model on game data with core.train (AdamW, warmup + cosine, clipping, checkpoints).

Batches are padded with PAD tokens; padded steps are masked out of the loss. Model
selection is by validation loss; the validation split is the paper's MD5 rule unless
a separate validation folder is given.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from methodkit.core.errors import DataError, UsageError
from methodkit.core.progress import ProgressCallback, silent
from methodkit.tools.chess_wm import spec
from methodkit.tools.chess_wm.data import GameSet, load_dataset, require_same_spec

CHECKPOINT = "model.safetensors"


def collate(games: GameSet, index, device: str = "cpu"):
    """(tokens (B, T) long, states (B, T, 75) long, mask (B, T) float) for games `index`, PAD-padded."""
    import torch

    index = np.asarray(index)
    lengths = np.array([games.offsets[i + 1] - games.offsets[i] for i in index])
    t = int(lengths.max())
    tokens = np.full((len(index), t), spec.PAD, dtype=np.int64)
    states = np.zeros((len(index), t, spec.N_LABELS), dtype=np.int64)
    mask = np.zeros((len(index), t), dtype=np.float32)
    for row, i in enumerate(index):
        m, s = games.game(int(i))
        tokens[row, : len(m)] = m
        states[row, : len(m)] = s
        mask[row, : len(m)] = 1.0
    return (torch.from_numpy(tokens).to(device), torch.from_numpy(states).to(device), torch.from_numpy(mask).to(device))


def load_games(paths, max_plies: int | None = None) -> GameSet:
    """Several data folders as one GameSet (all must share one spec)."""
    sets = [load_dataset(p) for p in paths]
    if not sets:
        raise UsageError("give at least one data folder")
    for other, path in zip(sets[1:], paths[1:]):
        require_same_spec(other.spec, sets[0].spec, str(path), str(paths[0]))
    if len(sets) == 1:
        out = sets[0]
    else:
        from methodkit.tools.chess_wm.data import _concat

        out = _concat(
            [{"moves": s.moves, "offsets": s.offsets, "states": s.states, "game_id": s.game_id} for s in sets],
            sets[0].spec,
            "+".join(s.name for s in sets),
        )
    return out.truncate(max_plies)


@dataclass
class TrainOptions:
    steps: int | None = None  # default: `epochs` passes over the training games
    epochs: float = 1.0
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.999
    warmup: int = 0
    min_lr_ratio: float = 0.1
    clip: float = 1.0
    log_every: int = 50
    checkpoint_every: int = 0
    max_plies: int | None = None
    val_games: int = 256  # validation games scored at each logged step
    seed: int = 0

    @classmethod
    def from_params(cls, params: dict, **overrides) -> TrainOptions:
        """The options among a command's parameters (the rest are ignored)."""
        from dataclasses import fields

        values = {f.name: params[f.name] for f in fields(cls) if f.name in params}
        return cls(**{**values, **overrides})


@dataclass
class TrainRun:
    steps: int
    train_games: int
    val_games: int
    params: int
    final_train_loss: float
    val_loss: float
    val_exact_state: float
    val_label_acc: float
    seconds: float
    out_dir: str
    resumed_from: int = 0
    config: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def checkpoint_spec(data_spec: dict, model_cfg: dict) -> dict:
    """What must match for a checkpoint to be used on data: the task spec and the model layout."""
    return {"data": data_spec, "model": model_cfg}


def train_model(
    train_paths,
    out_dir: str | os.PathLike,
    model_cfg,
    opts: TrainOptions,
    *,
    val_paths=None,
    resume: bool = False,
    force: bool = False,
    device: str = "cpu",
    progress: ProgressCallback = silent,
    warn: Callable[[str], None] = lambda message: None,
) -> TrainRun:
    import torch

    from methodkit.core import train as core_train
    from methodkit.tools.chess_wm.evaluation import evaluate_games
    from methodkit.tools.chess_wm.models import build_model, masked_loss, n_params

    games = load_games(train_paths, opts.max_plies)
    if val_paths:
        val = load_games(val_paths, opts.max_plies)
        require_same_spec(val.spec, games.spec, "the validation data", "the training data")
        train_set = games
    else:
        train_set, val = games.split()
    if len(train_set) == 0:
        raise DataError(f"{', '.join(map(str, train_paths))}: no training games after the validation split")
    out = Path(out_dir)
    if (out / CHECKPOINT).exists() and not (resume or force):
        raise UsageError(f"{out}: already holds a checkpoint; pass --resume to continue or --force to start over")
    if model_cfg.arch == "transformer":
        model_cfg.max_len = max(model_cfg.max_len, int(train_set.plies.max()) + 1, int(val.plies.max(initial=0)) + 1)
    steps = opts.steps or max(1, math.ceil(opts.epochs * len(train_set) / opts.batch_size))
    if opts.warmup > steps:  # the linear ramp never finishes: the run trains at a fraction of --lr
        warn(
            f"--warmup {opts.warmup} exceeds the run's {steps} steps: the learning rate peaks at "
            f"{opts.lr * steps / opts.warmup:.3g}, {steps / opts.warmup:.0%} of --lr; lower --warmup or raise --steps"
        )
    cfg = core_train.TrainConfig(
        steps=steps,
        batch_size=opts.batch_size,
        lr=opts.lr,
        weight_decay=opts.weight_decay,
        beta1=opts.beta1,
        beta2=opts.beta2,
        warmup=opts.warmup,
        min_lr_ratio=opts.min_lr_ratio,
        clip=opts.clip,
        log_every=opts.log_every,
        checkpoint_every=opts.checkpoint_every,
        seed=opts.seed,
    )
    torch.manual_seed(opts.seed)
    model = build_model(model_cfg).to(device)
    val_small = val.subset(np.arange(min(len(val), opts.val_games))) if len(val) else val

    def loss_fn(net, idx):
        tokens, states, mask = collate(train_set, idx, device)
        return masked_loss(net(tokens), states, mask)

    def evaluate(net):
        if len(val_small) == 0:
            return {}
        m = evaluate_games(net, val_small, batch_size=opts.batch_size, device=device).summary
        return {"val_loss": m["loss"], "val_exact_state": m["exact_state"], "val_label_acc": m["label_acc"]}

    cspec = checkpoint_spec(games.spec, model_cfg.to_dict())
    result = core_train.train(
        model,
        loss_fn,
        len(train_set),
        cfg,
        run_dir=out,
        spec=cspec,
        model_config=model_cfg.to_dict(),
        resume=resume,
        evaluate=evaluate,
        progress=progress,
    )
    final_val = evaluate_games(model, val, batch_size=opts.batch_size, device=device).summary if len(val) else {}
    (out / "config.json").write_text(
        json.dumps(
            {
                "model": model_cfg.to_dict(),
                "train": asdict(opts),
                "data": [str(p) for p in train_paths],
                "spec": games.spec,
            },
            indent=1,
        )
        + "\n"
    )
    return TrainRun(
        steps=result.steps,
        train_games=len(train_set),
        val_games=len(val),
        params=n_params(model),
        final_train_loss=result.final_loss,
        val_loss=final_val.get("loss", float("nan")),
        val_exact_state=final_val.get("exact_state", float("nan")),
        val_label_acc=final_val.get("label_acc", float("nan")),
        seconds=result.seconds,
        out_dir=str(out),
        resumed_from=result.resumed_from,
        config=model_cfg.to_dict(),
    )


SWEEP_KEYS = ("lr", "weight_decay", "warmup", "beta2", "min_lr_ratio")


def sweep(
    train_paths,
    out_dir,
    model_cfg,
    base: TrainOptions,
    grid: dict,
    *,
    val_paths=None,
    force: bool = False,
    device: str = "cpu",
    progress: ProgressCallback = silent,
    warn: Callable[[str], None] = lambda message: None,
) -> dict:
    """Run the grid sequentially (one folder and one sweep.csv row per run); pick the lowest val loss."""
    from copy import deepcopy

    unknown = set(grid) - set(SWEEP_KEYS)
    if unknown or not grid:
        raise UsageError(
            f"sweep grid keys must be among {', '.join(SWEEP_KEYS)} (got {', '.join(sorted(grid)) or 'none'})"
        )
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise DataError(f"sweep grid: '{key}' must be a non-empty list")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    keys = sorted(grid)
    rows = []
    combos = list(itertools.product(*(grid[k] for k in keys)))
    for number, values in enumerate(combos):
        opts = deepcopy(base)
        for key, value in zip(keys, values):
            setattr(opts, key, type(getattr(opts, key))(value) if getattr(opts, key) is not None else value)
        run = train_model(
            train_paths,
            out / f"run-{number:03d}",
            deepcopy(model_cfg),
            opts,
            val_paths=val_paths,
            force=force,
            device=device,
            warn=lambda message, number=number: warn(f"run-{number:03d}: {message}"),
        )
        rows.append(
            {
                "run": number,
                **dict(zip(keys, values)),
                "val_loss": run.val_loss,
                "val_exact_state": run.val_exact_state,
                "val_label_acc": run.val_label_acc,
                "steps": run.steps,
            }
        )
        progress("sweep", number + 1, len(combos))
    with open(out / "sweep.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    finite = [r for r in rows if math.isfinite(r["val_loss"])]
    best = min(finite, key=lambda r: r["val_loss"]) if finite else None
    return {"runs": len(rows), "best": best, "sweep_csv": str(out / "sweep.csv")}


def checkpoint_path(path: str | os.PathLike) -> Path:
    """The model file of a run folder or .safetensors path; DataError when it or its sidecar is missing.

    Cheap (no torch): commands call it on --checkpoint before they read any input."""
    from methodkit.core import checkpoint

    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT
    side = checkpoint.sidecar_path(path)
    if not side.is_file():
        raise DataError(f"{path}: no such checkpoint (expected {path.name} and {side.name})")
    return path


def load_model(path: str | os.PathLike, data_spec: dict | None = None, device: str = "cpu", kernel: str | None = None):
    """A trained WorldModel from `model.safetensors` (or its folder); refuses data of another spec."""
    from methodkit.core import checkpoint
    from methodkit.tools.chess_wm.models import ModelConfig, build_model

    path = checkpoint_path(path)
    side = checkpoint.sidecar_path(path)
    try:
        sidecar = json.loads(side.read_text())
        cfg = ModelConfig(**sidecar["config"])
        saved_spec = sidecar["spec"]
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{side}: not a chess-wm checkpoint sidecar ({type(exc).__name__}: {exc})") from None
    if data_spec is not None:
        require_same_spec(saved_spec.get("data", {}), data_spec, str(path), "the data")
    tensors, _ = checkpoint.load(path, expected_spec=checkpoint_spec(saved_spec.get("data", {}), cfg.to_dict()))
    model = build_model(cfg)
    state = {k[len("model.") :]: v for k, v in tensors.items() if k.startswith("model.")}
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        raise DataError(f"{path}: tensors do not fit the model in its sidecar ({str(exc).splitlines()[0]})") from None
    if kernel:
        model.set_kernel(kernel)
    model.to(device).eval()
    return model, cfg, saved_spec.get("data", {})
