"""TopK transcoders (Dunefsky, Chlenski & Nanda 2024): a sparse dictionary that imitates one MLP.

a = TopK_k(W_enc x_hat + b_enc) (then ReLU), MLP(x) ~ W_dec a + b_dec, with x_hat the MLP input after
its RMSNorm. Decoder rows are kept at unit norm (parametrised, so any optimiser keeps them there): an
activation is then the feature's mass and its decoder row its location, which is what the node-level
transport term and its bound are written in. Dead latents get the aux-k loss (Gao et al. 2024).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class TranscoderConfig:
    d_in: int
    d_out: int
    n_features: int
    k: int = 32
    aux_k: int = 64
    aux_coef: float = 1 / 32
    dead_after: int = 200  # steps without firing before a latent counts as dead

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class Transcoder(nn.Module):
    def __init__(self, cfg: TranscoderConfig):
        super().__init__()
        self.cfg = cfg
        enc = torch.randn(cfg.n_features, cfg.d_in) / cfg.d_in**0.5
        self.w_enc = nn.Parameter(enc)
        self.b_enc = nn.Parameter(torch.zeros(cfg.n_features))
        self.v_dec = nn.Parameter(torch.randn(cfg.n_features, cfg.d_out))
        self.b_dec = nn.Parameter(torch.zeros(cfg.d_out))
        self.register_buffer("since_fired", torch.zeros(cfg.n_features, dtype=torch.long), persistent=False)

    @property
    def w_dec(self) -> torch.Tensor:
        """(F, d_out) decoder rows of unit norm."""
        return self.v_dec / self.v_dec.norm(dim=1, keepdim=True).clamp_min(1e-8)

    def pre(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w_enc.T + self.b_enc

    def encode_sparse(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(values (..., k) >= 0, indices (..., k)) of the k largest pre-activations."""
        top = torch.topk(self.pre(x), self.cfg.k, dim=-1)
        return torch.relu(top.values), top.indices

    def decode_sparse(self, values: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        return torch.einsum("...k,...kd->...d", values, self.w_dec[indices]) + self.b_dec

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode_sparse(*self.encode_sparse(x))

    def loss(self, x: torch.Tensor, y: torch.Tensor, track: bool = True) -> torch.Tensor:
        """Mean squared reconstruction error (+ aux-k on the residual from dead latents)."""
        values, indices = self.encode_sparse(x)
        recon = self.decode_sparse(values, indices)
        loss = (recon - y).pow(2).sum(-1).mean()
        if track and self.training:
            with torch.no_grad():
                fired = torch.zeros_like(self.since_fired, dtype=torch.bool)
                fired[indices[values > 0].flatten()] = True
                self.since_fired += 1
                self.since_fired[fired] = 0
        dead = self.since_fired > self.cfg.dead_after
        n_dead = int(dead.sum())
        if n_dead and self.cfg.aux_coef > 0:
            pre = self.pre(x).masked_fill(~dead, float("-inf"))
            top = torch.topk(pre, min(self.cfg.aux_k, n_dead), dim=-1)
            aux = torch.einsum("...k,...kd->...d", torch.relu(top.values), self.w_dec[top.indices])
            residual = (y - recon).detach()
            loss = loss + self.cfg.aux_coef * (aux - residual).pow(2).sum(-1).mean()
        return loss


def init_from_data(tc: Transcoder, x: torch.Tensor, y: torch.Tensor) -> None:
    """b_dec at the mean MLP output (the usual SAE initialisation) and the encoder scaled so the first
    reconstructions have the spread of the outputs (MLP outputs of a fresh model are tiny)."""
    with torch.no_grad():
        x, y = x.reshape(-1, x.shape[-1]), y.reshape(-1, y.shape[-1])
        centre = y.mean(0)
        tc.b_dec.copy_(centre)
        values, indices = tc.encode_sparse(x)
        spread = torch.einsum("nk,nkd->nd", values, tc.w_dec[indices]).norm(dim=-1).mean()
        target = (y - centre).norm(dim=-1).mean()
        tc.w_enc.mul_(float(target / spread.clamp_min(1e-12)))


@torch.no_grad()
def metrics(tc: Transcoder, x: torch.Tensor, y: torch.Tensor) -> dict:
    """FVU (unexplained fraction of the MLP output's variance), L0 (active latents per token), dead %."""
    x, y = x.reshape(-1, x.shape[-1]), y.reshape(-1, y.shape[-1])
    values, indices = tc.encode_sparse(x)
    recon = tc.decode_sparse(values, indices)
    fvu = float((recon - y).pow(2).sum() / (y - y.mean(0)).pow(2).sum().clamp_min(1e-12))
    active = values > 0
    fired = torch.zeros(tc.cfg.n_features, dtype=torch.bool)
    fired[indices[active]] = True
    return {
        "fvu": fvu,
        "l0": float(active.sum(-1).float().mean()),
        "dead_pct": 100.0 * float((~fired).float().mean()),
    }


class TranscoderSet(nn.Module):
    """One transcoder per MLP layer of a model."""

    def __init__(self, configs: list[TranscoderConfig]):
        super().__init__()
        self.layers = nn.ModuleList(Transcoder(c) for c in configs)

    def __len__(self) -> int:
        return len(self.layers)

    def __getitem__(self, i: int) -> Transcoder:
        return self.layers[i]


def for_model(model, k: int = 32, expansion: int = 4) -> TranscoderSet:
    """Transcoders sized for `model`: F = expansion * d_mlp latents per layer, k active."""
    d, hidden = model.cfg.d_model, model.cfg.ffn_hidden
    return TranscoderSet(
        [TranscoderConfig(d, d, expansion * hidden, k=min(k, expansion * hidden)) for _ in range(model.cfg.n_layers)]
    )


def mlp_io(model, tokens: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Detached (MLP input after its norm, MLP output) per layer."""
    from methodkit.core.nn.transformer import trace

    with torch.no_grad():
        _, taps = trace(model, tokens)
    return [(tap["mlp_in"], tap["mlp_out"]) for tap in taps]


def save(path, tcs: TranscoderSet, layer: int, *, model_sha: str, data_sha: str, row: dict) -> None:
    from methodkit.core import checkpoint

    tc = tcs[layer]
    checkpoint.save(
        path,
        {"w_enc": tc.w_enc, "b_enc": tc.b_enc, "w_dec": tc.w_dec, "b_dec": tc.b_dec},
        config=tc.cfg.to_dict(),
        spec={"transcoder": tc.cfg.to_dict(), "layer": layer},
        fingerprint=data_sha,
        extra={"layer": layer, "model_sha256": model_sha, "metrics": row},
    )


def load_set(folder, model, model_sha: str, max_fvu: float | None = None, prefix: str = "tc") -> tuple[TranscoderSet, list[dict]]:
    """The transcoders FOLDER/tc_L{l}.safetensors of `model`; refused if trained on another model or too lossy."""
    from pathlib import Path

    from methodkit.core import checkpoint
    from methodkit.core.errors import DataError

    folder = Path(folder)
    configs, tensors, rows = [], [], []
    for layer in range(model.cfg.n_layers):
        path = folder / f"{prefix}_L{layer}.safetensors"
        if not path.is_file():
            raise DataError(f"{path}: no transcoder for layer {layer}; run 'mcd-distill transcoders' first")
        t, side = checkpoint.load(path)
        if side.get("model_sha256") != model_sha:
            raise DataError(
                f"{path}: trained on model {str(side.get('model_sha256'))[:12]}, not this one ({model_sha[:12]})"
            )
        fvu = float(side.get("metrics", {}).get("fvu", float("nan")))
        if max_fvu is not None and not fvu <= max_fvu:
            raise DataError(f"{path}: FVU {fvu:.3f} is above --max-fvu {max_fvu}; train the transcoders longer")
        configs.append(TranscoderConfig(**side["config"]))
        tensors.append(t)
        rows.append(side.get("metrics", {}))
    tcs = TranscoderSet(configs)
    with torch.no_grad():
        for tc, t in zip(tcs.layers, tensors):
            tc.w_enc.copy_(t["w_enc"])
            tc.b_enc.copy_(t["b_enc"])
            tc.v_dec.copy_(t["w_dec"])
            tc.b_dec.copy_(t["b_dec"])
    tcs.eval()
    return tcs, rows
