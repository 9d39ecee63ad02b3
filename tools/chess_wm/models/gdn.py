"""Gated DeltaNet with optional negative eigenvalues (flash-linear-attention's GatedDeltaNet, in pure torch).

Per head: q, k, v = SiLU(causal depthwise conv4(W x)); q, k L2-normalised;
S_t = a_t S_{t-1} (I - b_t k_t k_t^T) + b_t v_t k_t^T, o_t = S_t q_t / sqrt(d_k);
a_t = exp(-exp(A_log) softplus(a_proj x_t + dt_bias)); b_t = sigmoid(b_proj x_t), times 2
when negative eigenvalues are allowed (then 1 - b_t lies in (-1, 1)). Output:
RMSNorm(o) * SiLU(g_proj x) -> o_proj.

Kernels: `recurrent` is the step loop; `chunk` is the WY form of FLA's
chunk_gated_delta_rule_ref (chunks of 64): within a chunk
T = (I + strict_tril(diag(b) K K^T * Gamma))^-1 applied by triangular solves, then the
inter-chunk state pass.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from methodkit.core.nn.transformer import RMSNorm


class CausalConv(nn.Module):
    """Depthwise causal 1-D convolution over time (B, T, C)."""

    def __init__(self, channels: int, width: int = 4):
        super().__init__()
        self.width = width
        self.conv = nn.Conv1d(channels, channels, width, groups=channels, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(F.pad(x.transpose(1, 2), (self.width - 1, 0)))
        return y.transpose(1, 2)


class GatedDeltaNet(nn.Module):
    def __init__(
        self,
        dim: int,
        n_heads: int,
        head_dim: int = 48,
        expand_v: float = 2.0,
        neg_eigval: bool = True,
        conv_width: int = 4,
        chunk_size: int = 64,
        kernel: str = "auto",
        norm_eps: float = 1e-6,
    ):
        super().__init__()
        self.h, self.dk, self.dv = n_heads, head_dim, int(head_dim * expand_v)
        self.neg_eigval, self.chunk_size, self.kernel = neg_eigval, chunk_size, kernel
        kd, vd = n_heads * self.dk, n_heads * self.dv
        self.q_proj = nn.Linear(dim, kd, bias=False)
        self.k_proj = nn.Linear(dim, kd, bias=False)
        self.v_proj = nn.Linear(dim, vd, bias=False)
        self.a_proj = nn.Linear(dim, n_heads, bias=False)
        self.b_proj = nn.Linear(dim, n_heads, bias=False)
        self.g_proj = nn.Linear(dim, vd, bias=False)
        self.o_proj = nn.Linear(vd, dim, bias=False)
        self.q_conv, self.k_conv, self.v_conv = (
            CausalConv(kd, conv_width),
            CausalConv(kd, conv_width),
            CausalConv(vd, conv_width),
        )
        self.o_norm = RMSNorm(self.dv, norm_eps)
        # FLA's initialisation: A ~ U(0, 16), dt log-uniform in [1e-3, 0.1], dt_bias = softplus^-1(dt)
        self.A_log = nn.Parameter(torch.log(torch.empty(n_heads).uniform_(1e-4, 16)))
        dt = torch.exp(torch.rand(n_heads) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3)).clamp(min=1e-4)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bsz, t, _ = x.shape
        q = F.silu(self.q_conv(self.q_proj(x))).view(bsz, t, self.h, self.dk)
        k = F.silu(self.k_conv(self.k_proj(x))).view(bsz, t, self.h, self.dk)
        v = F.silu(self.v_conv(self.v_proj(x))).view(bsz, t, self.h, self.dv)
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        log_a = -self.A_log.exp() * F.softplus(self.a_proj(x) + self.dt_bias)  # (B, T, H), <= 0
        beta = torch.sigmoid(self.b_proj(x))
        if self.neg_eigval:
            beta = beta * 2.0
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))  # (B, H, T, D)
        log_a, beta = log_a.transpose(1, 2), beta.transpose(1, 2)  # (B, H, T)
        kernel = "chunk" if self.kernel == "auto" else self.kernel
        rule = delta_rule_recurrent if kernel == "recurrent" else delta_rule_chunk
        o = rule(q, k, v, beta, log_a, **({} if kernel == "recurrent" else {"chunk_size": self.chunk_size}))
        o = o.transpose(1, 2)  # (B, T, H, dv)
        g = self.g_proj(x).view(bsz, t, self.h, self.dv)
        o = self.o_norm(o) * F.silu(g)
        return self.o_proj(o.reshape(bsz, t, self.h * self.dv))


def delta_rule_recurrent(q, k, v, beta, log_a):
    """Step loop. q, k (B, H, T, dk); v (B, H, T, dv); beta, log_a (B, H, T). Returns o (B, H, T, dv)."""
    bsz, h, t, dk = q.shape
    q = q * dk**-0.5
    state = q.new_zeros(bsz, h, dk, v.shape[-1])  # S^T: maps k-space to v-space as k^T S
    out = []
    for i in range(t):
        state = state * log_a[:, :, i, None, None].exp()
        k_i = k[:, :, i]
        v_err = v[:, :, i] - (state * k_i[..., None]).sum(-2)
        state = state + k_i[..., None] * (beta[:, :, i, None] * v_err)[..., None, :]
        out.append((state * q[:, :, i, :, None]).sum(-2))
    return torch.stack(out, dim=2)


def delta_rule_chunk(q, k, v, beta, log_a, chunk_size: int = 64):
    """WY/chunked form (FLA's chunk_gated_delta_rule_ref with triangular solves instead of the row loop)."""
    bsz, h, t, dk = q.shape
    dv = v.shape[-1]
    c = chunk_size
    pad = (-t) % c
    if pad:
        q, k, v = (F.pad(z, (0, 0, 0, pad)) for z in (q, k, v))
        beta, log_a = F.pad(beta, (0, pad)), F.pad(log_a, (0, pad))
    n = (t + pad) // c
    q = (q * dk**-0.5).view(bsz, h, n, c, dk)
    k = k.view(bsz, h, n, c, dk)
    v = v.view(bsz, h, n, c, dv)
    beta = beta.view(bsz, h, n, c)
    decay = log_a.view(bsz, h, n, c).cumsum(-1)  # log of the decay from chunk start through step i
    lower = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    diff = decay[..., :, None] - decay[..., None, :]
    gamma = diff.masked_fill(~lower, float("-inf")).exp()  # Gamma_ij = prod_{j<l<=i} a_l (i >= j)
    k_beta = k * beta[..., None]
    strict = torch.tril(k_beta @ k.transpose(-1, -2) * gamma, diagonal=-1)
    eye = torch.eye(c, dtype=q.dtype, device=q.device)
    system = eye + strict  # T = system^-1, unit lower triangular
    w = torch.linalg.solve_triangular(system, k_beta * decay[..., None].exp(), upper=False, unitriangular=True)
    u = torch.linalg.solve_triangular(system, v * beta[..., None], upper=False, unitriangular=True)
    state = q.new_zeros(bsz, h, dk, dv)
    out = []
    for i in range(n):
        q_i, k_i = q[:, :, i], k[:, :, i]
        attn = q_i @ k_i.transpose(-1, -2) * gamma[:, :, i]  # causal incl. diagonal (gamma is 0 above)
        v_new = u[:, :, i] - w[:, :, i] @ state
        out.append((q_i * decay[:, :, i, :, None].exp()) @ state + attn @ v_new)
        last = decay[:, :, i, -1]
        state = (
            state * last[..., None, None].exp()
            + (k_i * (last[..., None] - decay[:, :, i]).exp()[..., None]).transpose(-1, -2) @ v_new
        )
    o = torch.stack(out, dim=2).reshape(bsz, h, n * c, dv)
    return o[:, :, :t]


class GDNLayer(nn.Module):
    """pre-norm -> GatedDeltaNet -> residual -> pre-norm -> SwiGLU MLP -> residual (dropout on branches)."""

    def __init__(
        self,
        dim: int,
        n_heads: int,
        neg_eigval: bool = True,
        ff_mult: int = 4,
        dropout: float = 0.1,
        kernel: str = "auto",
        norm_eps: float = 1e-6,
    ):
        super().__init__()
        from methodkit.tools.chess_wm.models.common import SwiGLUMLP

        self.norm1 = RMSNorm(dim, norm_eps)
        self.mixer = GatedDeltaNet(dim, n_heads, neg_eigval=neg_eigval, kernel=kernel, norm_eps=norm_eps)
        self.norm2 = RMSNorm(dim, norm_eps)
        self.mlp = SwiGLUMLP(dim, ff_mult)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.mixer(self.norm1(x)))
        return x + self.drop(self.mlp(self.norm2(x)))
