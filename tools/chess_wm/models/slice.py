"""SLiCE (structured linear controlled differential equation) layers, torch-slices semantics.

y_i = (I + A(u_i)) y_{i-1} + B(u_i), y_0 learnt, u_i = scale * [1, X_i - X_{i-1}] (X_0 = 0),
A(u) block-diagonal with blocks of `block_size` (1 = the diagonal ablation). Two forms:
a step loop (reference) and a chunked parallel form: within each chunk an inclusive
Hillis-Steele scan composes the affine maps (M, b) o (M', b') = (M M', M b' + b); the
last state carries into the next chunk. Parameter names match torch-slices' SLiCELayer,
so its state dict loads here and the library serves as a test oracle.
"""

from __future__ import annotations

import torch
from torch import nn

from methodkit.core.nn.transformer import RMSNorm


class SLiCE(nn.Module):
    def __init__(
        self,
        dim: int,
        block_size: int = 8,
        init_std: float = 0.01,
        scale: float = 1.0,
        chunk_size: int = 256,
        kernel: str = "auto",
    ):
        super().__init__()
        if dim % block_size:
            raise ValueError(f"d_model {dim} is not divisible by block size {block_size}")
        self.dim, self.block_size, self.scale = dim, block_size, scale
        self.chunk_size, self.kernel = chunk_size, kernel
        self.init = nn.Parameter(torch.randn(dim) * init_std)
        self.vf_A = nn.Linear(dim + 1, dim * block_size, bias=False)
        self.vf_B = nn.Linear(dim + 1, dim, bias=False)
        nn.init.normal_(self.vf_A.weight, std=init_std / block_size**0.5)
        nn.init.normal_(self.vf_B.weight, std=init_std)

    def _transforms(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-step affine maps: M (B, T, nb, b, b) or (B, T, H) when diagonal, and b."""
        increments = torch.diff(x, dim=1, prepend=torch.zeros_like(x[:, :1]))
        ones = torch.ones_like(x[..., :1])
        u = torch.cat((ones, increments), dim=-1) * self.scale
        a = self.vf_A(u)
        bias = self.vf_B(u)
        if self.block_size == 1:
            return 1.0 + a, bias
        bsz, nb = self.block_size, self.dim // self.block_size
        a = a.view(*x.shape[:2], nb, bsz, bsz)
        eye = torch.eye(bsz, dtype=x.dtype, device=x.device)
        return eye + a, bias.view(*x.shape[:2], nb, bsz)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kernel = self.kernel
        if kernel == "auto":
            kernel = "chunk"
        m, b = self._transforms(x)
        y0 = self.init.expand(x.shape[0], -1)
        if kernel == "recurrent":
            return self._recurrent(m, b, y0)
        return self._chunked(m, b, y0)

    def _step(self, m, y):
        if self.block_size == 1:
            return m * y
        return (m @ y.unsqueeze(-1)).squeeze(-1)

    def _recurrent(self, m, b, y0):
        bsz, t = m.shape[:2]
        y = y0 if self.block_size == 1 else y0.reshape(bsz, -1, self.block_size)
        out = []
        for i in range(t):
            y = self._step(m[:, i], y) + b[:, i]
            out.append(y.reshape(bsz, self.dim))
        return torch.stack(out, dim=1)

    def _chunked(self, m, b, y0):
        bsz, t = m.shape[:2]
        y = y0 if self.block_size == 1 else y0.reshape(bsz, -1, self.block_size)
        out = []
        for start in range(0, t, self.chunk_size):
            mc, bc = scan_affine(
                m[:, start : start + self.chunk_size], b[:, start : start + self.chunk_size], self.block_size == 1
            )
            ys = self._step(mc, y.unsqueeze(1)) + bc
            out.append(ys.reshape(bsz, ys.shape[1], self.dim))
            y = ys[:, -1]
        return torch.cat(out, dim=1)


def scan_affine(m: torch.Tensor, b: torch.Tensor, diagonal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Inclusive prefix composition along dim 1 of affine maps y -> M y + b (Hillis-Steele, log2 T rounds)."""
    t = m.shape[1]
    shift = 1
    while shift < t:
        m_prev, b_prev = m[:, :-shift], b[:, :-shift]
        m_cur, b_cur = m[:, shift:], b[:, shift:]
        if diagonal:
            m_new, b_new = m_cur * m_prev, m_cur * b_prev + b_cur
        else:
            m_new = m_cur @ m_prev
            b_new = (m_cur @ b_prev.unsqueeze(-1)).squeeze(-1) + b_cur
        m = torch.cat((m[:, :shift], m_new), dim=1)
        b = torch.cat((b[:, :shift], b_new), dim=1)
        shift *= 2
    return m, b


class SLiCELayer(nn.Module):
    """pre-norm -> SLiCE -> residual -> RMSNorm -> GELU MLP -> residual (dropout on both branches)."""

    def __init__(
        self,
        dim: int,
        block_size: int = 8,
        ff_mult: int = 4,
        dropout: float = 0.1,
        chunk_size: int = 256,
        kernel: str = "auto",
        norm_eps: float = 1e-6,
    ):
        super().__init__()
        self.norm1 = RMSNorm(dim, norm_eps)
        self.slice = SLiCE(dim, block_size, chunk_size=chunk_size, kernel=kernel)
        self.norm2 = RMSNorm(dim, norm_eps)
        self.token_mlp = nn.Sequential(nn.Linear(dim, ff_mult * dim), nn.GELU(), nn.Linear(ff_mult * dim, dim))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.slice(self.norm1(x)))
        return x + self.drop(self.token_mlp(self.norm2(x)))
