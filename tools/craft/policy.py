"""Vocabulary-scoring policies: observation -> logits over the 16 candidate plans.

`mlp`: a 2 x 256 MLP on the flat observation (D = 5 + 8 x 6 = 53). `attn`: the ego and the
8 agent slots as tokens, two set-attention layers (no positions; absent agents masked),
the ego token read out. Both standardise the observation with the normaliser fitted on the
demonstrations, stored with the weights. A policy file is safetensors + JSON sidecar
(core.checkpoint); its spec (vocabulary, observation layout, architecture) must match.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from methodkit.core import checkpoint
from methodkit.core.errors import CheckFailed, DataError

EGO_DIM, K_NEAR, AGENT_DIM = 5, 8, 6
OBS_DIM = EGO_DIM + K_NEAR * AGENT_DIM
N_ACTIONS = 16
ARCHS = ("mlp", "attn")
HIDDEN = 256


def spec(arch: str) -> dict:
    """What must match between a policy file and this code (checked on load)."""
    from methodkit.core.sim.highway import vocab

    return {"vocabulary": vocab.names(), "obs_dim": OBS_DIM, "k_near": K_NEAR, "arch": arch, "sim": "highway-1"}


class Normaliser(nn.Module):
    def __init__(self, mean=None, std=None):
        super().__init__()
        self.register_buffer("mean", torch.zeros(OBS_DIM) if mean is None else torch.as_tensor(mean).float())
        self.register_buffer("std", torch.ones(OBS_DIM) if std is None else torch.as_tensor(std).float())

    def forward(self, x):
        return (x - self.mean) / self.std


class MLPPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = Normaliser()
        self.body = nn.Sequential(nn.Linear(OBS_DIM, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU())
        self.head = nn.Linear(HIDDEN, N_ACTIONS)

    def forward(self, obs):
        return self.head(self.body(self.norm(obs)))


class AttnPolicy(nn.Module):
    """Set attention over [ego, agent_1..agent_8]; presence (agent feature 0) masks absent slots."""

    def __init__(self, width: int = 64, heads: int = 4, layers: int = 2):
        super().__init__()
        self.norm = Normaliser()
        self.ego_in = nn.Linear(EGO_DIM, width)
        self.agent_in = nn.Linear(AGENT_DIM, width)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, batch_first=True) for _ in range(layers)
        )
        self.head = nn.Sequential(nn.Linear(width, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, N_ACTIONS))

    def forward(self, obs):
        present = obs[:, EGO_DIM::AGENT_DIM] > 0.5  # raw presence flags, before standardising
        x = self.norm(obs)
        tokens = torch.cat(
            [self.ego_in(x[:, None, :EGO_DIM]), self.agent_in(x[:, EGO_DIM:].reshape(-1, K_NEAR, AGENT_DIM))], dim=1
        )
        pad = torch.cat([torch.zeros_like(present[:, :1]), ~present], dim=1)
        for layer in self.layers:
            tokens = layer(tokens, src_key_padding_mask=pad)
        return self.head(tokens[:, 0])


def build(arch: str) -> nn.Module:
    if arch not in ARCHS:
        raise DataError(f"unknown architecture {arch!r} (known: {', '.join(ARCHS)})")
    return MLPPolicy() if arch == "mlp" else AttnPolicy()


def flat_obs(ego: np.ndarray, near: np.ndarray) -> np.ndarray:
    """[B, 53] float32 from Sim.observe's ego [B, 5] and near [B, 8, 6]."""
    return np.concatenate([ego, near.reshape(ego.shape[0], -1)], axis=1).astype(np.float32)


def fit_normaliser(model: nn.Module, obs: np.ndarray) -> None:
    mean = obs.mean(axis=0)
    std = np.maximum(obs.std(axis=0), 1e-3)
    model.norm.mean.copy_(torch.as_tensor(mean))
    model.norm.std.copy_(torch.as_tensor(std))


def save(path, model: nn.Module, arch: str, info: dict, parent: str | None = None) -> None:
    """Policy tensors + sidecar: architecture, vocabulary, normaliser (in the tensors), parent hash, method."""
    tensors = {f"model.{k}": v for k, v in model.state_dict().items()}
    checkpoint.save(path, tensors, config={"arch": arch, "parent": parent, **info}, spec=spec(arch))


def load(path) -> tuple[nn.Module, dict]:
    """(model in eval mode, sidecar); a policy for another vocabulary/observation exits 3."""
    from pathlib import Path

    side = checkpoint.sidecar_path(path)
    if not Path(path).is_file():
        raise DataError(f"{path}: no such policy file")
    try:
        tensors, sidecar = checkpoint.load(path)
    except (UnicodeDecodeError, ValueError) as exc:
        raise DataError(
            f"{path}: not a policy file (safetensors with a JSON sidecar): {exc.__class__.__name__}"
        ) from None
    if not isinstance(sidecar, dict) or not isinstance(sidecar.get("config"), dict):
        raise DataError(f"{side}: not a policy sidecar (no config object)")
    arch = sidecar.get("config", {}).get("arch")
    if arch not in ARCHS:
        raise DataError(f"{side}: config.arch {arch!r} is not a known architecture")
    if sidecar.get("spec_hash") != checkpoint.spec_hash(spec(arch)):
        raise CheckFailed(
            f"{path}: the policy's vocabulary or observation layout differs from this simulator's "
            f"(spec {sidecar.get('spec_hash')} vs {checkpoint.spec_hash(spec(arch))})"
        )
    model = build(arch)
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    model.eval()
    return model, sidecar


def file_hash(path) -> str:
    import hashlib

    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()[:16]
