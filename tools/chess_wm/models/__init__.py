"""The shared interface: embedding(20482, d) -> backbone -> final RMSNorm -> one linear head of 1,878 logits.

Architectures (registry keys feed the CLI's choices): the paper's four families and
three ablations. Sizes follow the paper (d128/l1 ... d512/l6); `d64` is ours, for
tests and demos.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F

from methodkit.core.errors import UsageError
from methodkit.tools.chess_wm import spec

ARCHS = {
    "transformer": "LLaMA-like causal Transformer (RoPE, RMSNorm, SwiGLU)",
    "slice": "SLiCE, block-diagonal (block 8)",
    "slice-diag": "ablation: diagonal SLiCE (block 1)",
    "gdn": "Gated DeltaNet with negative eigenvalues (beta x 2)",
    "gdn-pos": "ablation: Gated DeltaNet, positive eigenvalues only",
    "mamba3": "Mamba-3, MIMO rank 4, trapezoidal, complex (RoPE) transition",
    "mamba2": "ablation: Mamba-2 (no RoPE, Euler, SISO, short conv)",
}
SIZES = {  # d_model, layers, heads (Transformer / GDN)
    "d64": (64, 1, 2),
    "d128": (128, 1, 2),
    "d256": (256, 2, 4),
    "d384": (384, 4, 6),
    "d512": (512, 6, 8),
}
KERNELS = ("auto", "chunk", "recurrent", "numba")
NUMBA_ARCHS = ("slice", "slice-diag", "mamba3", "mamba2")  # a compiled CPU scan (the CPU default under auto)


@dataclass
class ModelConfig:
    arch: str = "gdn"
    size: str = "d128"
    dropout: float = 0.1
    ff_mult: int = 4
    max_len: int = 1024  # Transformer positions
    kernel: str = "auto"

    def __post_init__(self):
        if self.arch not in ARCHS:
            raise UsageError(f"--arch must be one of {', '.join(ARCHS)}, not {self.arch!r}")
        if self.size not in SIZES:
            raise UsageError(f"--size must be one of {', '.join(SIZES)}, not {self.size!r}")
        if self.kernel not in KERNELS:
            raise UsageError(f"--kernel must be one of {', '.join(KERNELS)}, not {self.kernel!r}")
        if self.kernel == "numba" and self.arch not in NUMBA_ARCHS:
            raise UsageError(f"--kernel numba exists for {', '.join(NUMBA_ARCHS)} only, not {self.arch!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise UsageError(f"--dropout must be in [0, 1), got {self.dropout}")

    def to_dict(self) -> dict:
        return asdict(self)


class RecurrentBackbone(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        from methodkit.core.nn.transformer import RMSNorm

        d, layers, heads = SIZES[cfg.size]
        self.embed = nn.Embedding(spec.VOCAB, d)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.layers = nn.ModuleList(_layer(cfg, d, heads) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.drop = nn.Dropout(cfg.dropout)

    def set_kernel(self, kernel: str) -> None:
        for module in self.modules():
            if hasattr(module, "kernel") and isinstance(module.kernel, str):
                module.kernel = kernel

    def hidden(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.drop(self.embed(tokens))
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


def _layer(cfg: ModelConfig, d: int, heads: int) -> nn.Module:
    if cfg.arch in ("slice", "slice-diag"):
        from methodkit.tools.chess_wm.models.slice import SLiCELayer

        return SLiCELayer(
            d, block_size=8 if cfg.arch == "slice" else 1, ff_mult=cfg.ff_mult, dropout=cfg.dropout, kernel=cfg.kernel
        )
    if cfg.arch in ("gdn", "gdn-pos"):
        from methodkit.tools.chess_wm.models.gdn import GDNLayer

        return GDNLayer(
            d, heads, neg_eigval=cfg.arch == "gdn", ff_mult=cfg.ff_mult, dropout=cfg.dropout, kernel=cfg.kernel
        )
    from methodkit.tools.chess_wm.models.mamba import MambaLayer

    return MambaLayer(d, mamba2=cfg.arch == "mamba2", ff_mult=cfg.ff_mult, dropout=cfg.dropout, kernel=cfg.kernel)


class TransformerBackbone(nn.Module):
    """core.nn's decoder-only Transformer used as a backbone (its vocabulary head is dropped)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        from methodkit.core.nn.transformer import DecoderTransformer, TransformerConfig

        d, layers, heads = SIZES[cfg.size]
        tcfg = TransformerConfig(
            vocab_size=spec.VOCAB,
            d_model=d,
            n_layers=layers,
            n_heads=heads,
            ffn_mult=float(cfg.ff_mult),
            max_len=cfg.max_len,
            dropout=cfg.dropout,
        )
        self.net = DecoderTransformer(tcfg)
        del self.net.lm_head  # the world model has its own 1,878-logit head

    def set_kernel(self, kernel: str) -> None:
        return None

    def hidden(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.net.hidden(tokens)


class WorldModel(nn.Module):
    """tokens (B, T) -> logits (B, T, 1878); `split` turns them into per-block (B, T, n, classes)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.backbone = TransformerBackbone(cfg) if cfg.arch == "transformer" else RecurrentBackbone(cfg)
        self.head = nn.Linear(SIZES[cfg.size][0], spec.HEAD_SIZE)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone.hidden(tokens))

    def set_kernel(self, kernel: str) -> None:
        self.backbone.set_kernel(kernel)


def build_model(cfg: ModelConfig) -> WorldModel:
    return WorldModel(cfg)


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def split_logits(logits: torch.Tensor) -> list[torch.Tensor]:
    """Per block of labels sharing a class count: (B, T, n_labels_in_block, classes)."""
    out, start = [], 0
    for _, count, classes in spec.BLOCKS:
        width = count * classes
        out.append(logits[..., start : start + width].reshape(*logits.shape[:-1], count, classes))
        start += width
    return out


def label_nll(logits: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of every label: (B, T, 75) from logits (B, T, 1878) and integer states (B, T, 75)."""
    parts = []
    for (first, count, classes), block in zip(spec.BLOCKS, split_logits(logits)):
        target = states[..., first : first + count].long()
        nll = F.cross_entropy(block.reshape(-1, classes), target.reshape(-1), reduction="none")
        parts.append(nll.view(target.shape))
    return torch.cat(parts, dim=-1)


def predict_labels(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(argmax labels (B, T, 75), their probabilities (B, T, 75))."""
    labels, probs = [], []
    for block in split_logits(logits):
        p = block.softmax(-1)
        conf, idx = p.max(-1)
        labels.append(idx)
        probs.append(conf)
    return torch.cat(labels, dim=-1), torch.cat(probs, dim=-1)


def masked_loss(logits: torch.Tensor, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The paper's loss: mean over all 75 labels and all non-pad steps of the label cross-entropy."""
    nll = label_nll(logits, states).mean(-1)
    return (nll * mask).sum() / mask.sum().clamp(min=1)
