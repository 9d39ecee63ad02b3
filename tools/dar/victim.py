"""Victim training: a teacher on (images, possibly poisoned labels), and a clean KD student.

KD loss: alpha * T^2 * KL(softmax(z_t/T) || softmax(z_s/T)) + (1 - alpha) * CE(z_s, y), on the
clean images with TRUE labels; the teacher's logits are computed once (it is frozen).
Training is core.train's loop: SGD(lr, momentum 0.9, wd 5e-4), warmup + cosine, seeded batches,
on the CPU or a CUDA device (`--device`); the returned model always lives on the CPU. An interrupted
or failed training leaves OUTPUT.partial.safetensors (+ .partial.json, with the step reached) when a
partial path is given, never a half-written final model.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass

import numpy as np

from methodkit.core import checkpoint
from methodkit.core.backend import DEVICES
from methodkit.core.errors import DataError, RunFailure, UsageError
from methodkit.core.outputs import (
    Terminated,
    sigterm_raises,  # SIGTERM -> Terminated within the block
)
from methodkit.core.progress import ProgressCallback, silent
from methodkit.core.train import TrainConfig, batch_indices, train
from methodkit.tools.dar.choices import ARCHS


@dataclass
class VictimConfig:
    arch: str = "cnn-s"
    width: int = 32
    epochs: float = 6
    batch_size: int = 128
    lr: float = 0.05
    weight_decay: float = 5e-4
    temperature: float = 4.0
    alpha: float = 0.9
    augment: str = ""  # "", "crop2", "flip", "crop2,flip"
    seed: int = 0
    device: str = "cpu"  # auto | cpu | cuda (torch's CUDA, not CuPy)
    backbone: str = ""  # torchscript:PATH -> frozen encoder + linear head (arch and width then unused)

    def check(self) -> None:
        if self.arch not in ARCHS:
            raise UsageError(f"--arch must be one of {', '.join(ARCHS)}, got {self.arch!r}")
        if not math.isfinite(self.epochs) or self.epochs <= 0 or self.width <= 0:
            raise UsageError("--epochs and --width must be positive")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise UsageError(f"--lr must be a positive number, got {self.lr}")
        if not 0 <= self.alpha <= 1 or not (math.isfinite(self.temperature) and self.temperature > 0):
            raise UsageError(
                f"--alpha must be in [0, 1] and --temperature positive, got {self.alpha}, {self.temperature}"
            )
        if self.backbone and not self.backbone.startswith("torchscript:"):
            raise UsageError(f"--backbone must be torchscript:PATH, got {self.backbone!r}")
        if self.device not in DEVICES:
            raise UsageError(f"--device must be one of {', '.join(DEVICES)}, not {self.device!r}")
        bad = {a for a in self.augment.split(",") if a} - {"crop2", "flip"}
        if bad:
            raise UsageError(f"--augment: unknown {', '.join(sorted(bad))} (known: crop2, flip)")


def torch_device(device: str) -> str:
    """--device auto|cpu|cuda for torch: 'cuda' when torch sees a CUDA device (auto) or was asked to
    (cuda without one is a failure, exit 1), else 'cpu'."""
    import torch

    if device not in DEVICES:
        raise UsageError(f"--device must be one of {', '.join(DEVICES)}, not {device!r}")
    if device == "cpu":
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    if device == "cuda":
        raise RunFailure("--device cuda: torch sees no CUDA device (a CPU build of torch, or no GPU); use --device cpu")
    return "cpu"


def partial_path(output: str | os.PathLike) -> str:
    """Where an interrupted training keeps its last weights: model.safetensors -> model.partial.safetensors."""
    root, ext = os.path.splitext(str(output))
    return f"{root}.partial{ext or '.safetensors'}"


@dataclass
class Model:
    net: object
    config: dict  # arch, width, side, classes, mean, std, ...

    def logits(self, x_u8: np.ndarray, batch: int = 1024) -> np.ndarray:
        import torch

        self.net.eval()
        device = next(self.net.parameters()).device
        out = []
        with torch.no_grad():
            for i in range(0, len(x_u8), batch):
                out.append(self.net(_tensor(x_u8[i : i + batch], self.config).to(device)).cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, self.config["classes"]), np.float32)

    def predict(self, x_u8: np.ndarray) -> np.ndarray:
        return self.logits(x_u8).argmax(axis=1)

    def save(self, path: str | os.PathLike) -> None:
        checkpoint.save(path, dict(self.net.state_dict()), config=self.config, spec=_spec(self.config))


def _spec(config: dict) -> dict:
    return {k: config[k] for k in ("arch", "width", "side", "classes")}


def _tensor(x_u8: np.ndarray, config: dict):
    import torch

    x = torch.from_numpy(np.ascontiguousarray(x_u8)).float().div_(255.0).unsqueeze(1)
    return (x - config["mean"]) / config["std"]


def read_config(path: str | os.PathLike) -> dict:
    """The model's sidecar config (arch, width, side, classes, ...), read without loading torch."""
    import json

    if not os.path.isfile(path):  # the model itself, before its sidecar
        raise DataError(f"{path}: no such file")
    side = checkpoint.sidecar_path(path)
    if not os.path.isfile(side):
        raise DataError(f"{path}: sidecar {os.path.basename(side)} is missing")
    try:
        config = json.loads(open(side).read())["config"]
        _spec(config)
    except (KeyError, ValueError, TypeError):
        raise DataError(f"{side}: not a dar-backdoor model sidecar (needs config.arch/width/side/classes)") from None
    return config


def load(path: str | os.PathLike) -> Model:
    from methodkit.tools.dar import nets

    config = read_config(path)
    tensors, _ = checkpoint.load(path, expected_spec=_spec(config))
    if config["arch"] == "torchscript":
        encoder, features, where, digest = nets.load_backbone(f"torchscript:{config['backbone']}", config["side"])
        if digest != config.get("backbone_sha256"):
            raise DataError(f"{path}: its encoder {where} changed since training (SHA-256 differs)")
        net = nets.FrozenBackbone(encoder, features, config["classes"])
    else:
        net = nets.build(config["arch"], config["classes"], config["side"], config["width"])
    try:
        net.load_state_dict(tensors)
    except RuntimeError as exc:
        raise DataError(f"{path}: weights do not fit {config['arch']} ({str(exc).splitlines()[0]})") from None
    net.eval()
    return Model(net, config)


def _augment(batch, kinds: str, generator):
    import torch

    if "flip" in kinds:
        flip = (torch.rand(len(batch), generator=generator) < 0.5).to(batch.device)
        batch[flip] = batch[flip].flip(-1)
    if "crop2" in kinds:
        padded = torch.nn.functional.pad(batch, (2, 2, 2, 2))
        dx, dy = (int(v) for v in torch.randint(0, 5, (2,), generator=generator))
        batch = padded[..., dy : dy + batch.shape[-2], dx : dx + batch.shape[-1]]
    return batch


def fit(
    x_u8: np.ndarray,
    labels: np.ndarray,
    cfg: VictimConfig,
    classes: int,
    teacher: Model | None = None,
    progress: ProgressCallback = silent,
    partial: str | os.PathLike | None = None,
) -> tuple[Model, dict]:
    """Train cfg.arch on (x, labels); with `teacher`, clean KD (labels must then be the true ones).
    With `partial`, an interrupt (KeyboardInterrupt) or a failure while training saves the weights
    reached there (sidecar "partial_step") before the exception goes on."""
    import torch
    import torch.nn.functional as F

    from methodkit.tools.dar import nets

    cfg.check()
    if teacher is not None and teacher.config["classes"] != classes:
        raise DataError(f"teacher has {teacher.config['classes']} classes, the data {classes}")
    if teacher is not None and teacher.config["side"] != x_u8.shape[1]:
        raise DataError(
            f"teacher expects {teacher.config['side']}x{teacher.config['side']} images, got {x_u8.shape[1:]}"
        )
    device = torch_device(cfg.device)
    torch.manual_seed(cfg.seed)
    side = x_u8.shape[1]
    scaled = x_u8 / 255.0
    config = {"arch": cfg.arch, "width": cfg.width, "side": side, "classes": classes,
              "mean": float(scaled.mean()), "std": float(scaled.std() + 1e-8), "train": asdict(cfg),
              "kd": teacher is not None}  # fmt: skip
    if cfg.backbone:
        encoder, features, where, digest = nets.load_backbone(cfg.backbone, side)
        net = nets.FrozenBackbone(encoder, features, classes).to(device)
        config.update(arch="torchscript", width=features, backbone=where, backbone_sha256=digest)
    else:
        net = nets.build(cfg.arch, classes, side, cfg.width).to(device)
    data = _tensor(x_u8, config).to(device)
    target = torch.from_numpy(labels.astype(np.int64)).to(device)
    soft = torch.from_numpy(teacher.logits(x_u8)).to(device) / cfg.temperature if teacher is not None else None
    generator = torch.Generator().manual_seed(cfg.seed)
    steps = max(1, int(round(cfg.epochs * len(x_u8) / cfg.batch_size)))

    def loss_fn(model, idx):
        idx = torch.from_numpy(idx).to(device)
        batch = _augment(data[idx].clone(), cfg.augment, generator) if cfg.augment else data[idx]
        z = model(batch)
        ce = F.cross_entropy(z, target[idx])
        if soft is None:
            return ce
        kl = F.kl_div(
            F.log_softmax(z / cfg.temperature, 1), F.log_softmax(soft[idx], 1), reduction="batchmean", log_target=True
        )
        return cfg.alpha * cfg.temperature**2 * kl + (1 - cfg.alpha) * ce

    tc = TrainConfig(steps=steps, batch_size=cfg.batch_size, lr=cfg.lr, weight_decay=cfg.weight_decay,
                     warmup=max(1, steps // 20), min_lr_ratio=0.0, clip=5.0, log_every=max(1, steps // 10),
                     seed=cfg.seed, optimizer="sgd")  # fmt: skip
    reached = [0]

    def tracked(phase, done, total):
        reached[0] = done
        progress(phase, done, total)

    try:
        with sigterm_raises():  # a SIGTERM keeps the partial weights as Ctrl-C does
            result = train(net, loss_fn, len(x_u8), tc, progress=tracked)
    except (KeyboardInterrupt, RunFailure, Terminated):
        if partial is not None:
            Model(net.cpu(), {**config, "partial_step": reached[0], "steps": steps}).save(partial)
        raise
    # core.train checks each step's loss before its update, so what the last step did (the only one
    # in a one-step run) shows nowhere: its weights and their loss on the last batch are checked here,
    # and weights that fail are kept nowhere
    net.eval()
    with torch.no_grad():
        after = float(loss_fn(net, batch_indices(len(x_u8), cfg.batch_size, cfg.seed, steps - 1)))
    net.train()
    if not (math.isfinite(after) and all(bool(torch.isfinite(p).all()) for p in net.parameters())):
        raise RunFailure(f"non-finite loss ({after}) after the last step ({steps}); lower --lr")
    config["log"] = result.history
    summary = {"steps": steps, "final_loss": result.final_loss, "seconds": round(result.seconds, 2), "device": device}
    return Model(net.cpu(), config), summary
