"""Train the zoo: each (architecture, seed) on Fashion-MNIST with the shared core.train loop.

No pretrained weights can be fetched offline, so authorized and unauthorized models are
trained here. The misalignment family fixes the stem to W_A + t E (E random, ||E||_F = ||W_A||_F)
and retrains only the rest of the network, so accuracy under NTE can be related to t.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from methodkit.core import checkpoint
from methodkit.core.errors import DataError
from methodkit.core.progress import ProgressCallback, silent
from methodkit.core.train import TrainConfig, train
from methodkit.tools.nte.models import ARCHS, ModelConfig, StemNet, build

SPEC = {"task": "nte-zoo", "input": "1x28x28 pixels in [0,1]", "classes": 10, "version": 2}


@dataclass
class ZooEntry:
    name: str
    arch: str
    seed: int
    t: float | None
    clean_accuracy: float
    path: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def accuracy(model: StemNet, x: np.ndarray, y: np.ndarray, batch: int = 1000) -> float:
    return float((predict_logits(model, x, batch).argmax(1) == y).mean())


def predict_logits(model: StemNet, x: np.ndarray, batch: int = 1000, patches: bool = False) -> np.ndarray:
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(x), batch):
            chunk = torch.from_numpy(np.ascontiguousarray(x[start : start + batch], dtype=np.float32))
            out.append((model.forward_patches(chunk) if patches else model(chunk)).numpy())
    return np.concatenate(out)


def fit(
    cfg: ModelConfig,
    x: np.ndarray,
    y: np.ndarray,
    *,
    epochs: int = 3,
    batch_size: int = 64,
    lr: float = 3e-3,
    stem: np.ndarray | None = None,
    progress: ProgressCallback = silent,
) -> StemNet:
    """Train one model on images x (N, 1, 28, 28) float32 in [0, 1]; with `stem`, that stem is fixed."""
    model = build(cfg)
    if stem is not None:
        with torch.no_grad():
            model.stem.weight.copy_(torch.from_numpy(stem.astype(np.float32)))
        model.stem.weight.requires_grad_(False)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    steps = epochs * max(len(x) // batch_size, 1)

    def loss_fn(net, idx):
        idx = torch.as_tensor(idx)
        return torch.nn.functional.cross_entropy(net(xt[idx]), yt[idx])

    train(
        model,
        loss_fn,
        len(x),
        TrainConfig(
            steps=steps, batch_size=batch_size, lr=lr, warmup=steps // 20, log_every=max(steps // 5, 1), seed=cfg.seed
        ),
        progress=lambda phase, done, total: progress(f"train {cfg.arch} seed {cfg.seed}", done, total),
    )
    return model


def misaligned_stem(reference: np.ndarray, t: float, seed: int) -> np.ndarray:
    """W_A + t E with E Gaussian, scaled to ||E||_F = ||W_A||_F (seeded)."""
    e = np.random.default_rng(np.random.SeedSequence([seed, 7919])).standard_normal(reference.shape)
    e *= np.linalg.norm(reference) / np.linalg.norm(e)
    return reference + t * e


def save_model(model: StemNet, path: str | os.PathLike, extra: dict | None = None) -> None:
    checkpoint.save(path, model.state_dict(), config=model.cfg.to_dict(), spec=SPEC, extra=extra)


def load_model(path: str | os.PathLike) -> StemNet:
    tensors, sidecar = checkpoint.load(path, expected_spec=SPEC)
    cfg = ModelConfig(**sidecar["config"])
    model = StemNet(cfg)
    try:
        model.load_state_dict(tensors)
    except RuntimeError as exc:
        raise DataError(f"{path}: weights do not fit architecture {cfg.arch} ({str(exc).splitlines()[0]})") from None
    model.eval()
    return model


def parse_specs(specs: list[str]) -> list[str]:
    for spec in specs:
        if spec not in ARCHS:
            raise DataError(f"unknown architecture '{spec}' (known: {', '.join(ARCHS)})")
    return specs


def build_zoo(
    x: np.ndarray,
    y: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    archs: list[str],
    seeds: list[int],
    out_dir: str | os.PathLike,
    *,
    epochs: int = 3,
    misalign_from: str | None = None,
    misalign_t: tuple = (),
    progress: ProgressCallback = silent,
) -> list[ZooEntry]:
    """Train every (arch, seed), and the misalignment family around `misalign_from` (a zoo name)."""
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for arch in parse_specs(archs):
        for seed in seeds:
            model = fit(ModelConfig(arch, seed), x, y, epochs=epochs, progress=progress)
            name = f"{arch}-s{seed}"
            save_model(model, folder / f"{name}.safetensors")
            entries.append(
                ZooEntry(name, arch, seed, None, accuracy(model, x_test, y_test), str(folder / f"{name}.safetensors"))
            )
    if misalign_from:
        reference = load_model(folder / f"{misalign_from}.safetensors")
        w_a = reference.stem.weight.detach().numpy().astype(np.float64)
        for t in misalign_t:
            for seed in seeds:
                cfg = ModelConfig(reference.cfg.arch, seed, frozen_stem=True)
                model = fit(cfg, x, y, epochs=epochs, stem=misaligned_stem(w_a, t, seed), progress=progress)
                name = f"{misalign_from}-t{t:g}-s{seed}"
                save_model(model, folder / f"{name}.safetensors", extra={"t": t, "reference": misalign_from})
                entries.append(
                    ZooEntry(
                        name, cfg.arch, seed, t, accuracy(model, x_test, y_test), str(folder / f"{name}.safetensors")
                    )
                )
    return entries
