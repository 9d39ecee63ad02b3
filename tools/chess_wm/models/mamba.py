"""Mamba-3 (MIMO, exponential-trapezoidal, complex transition as data-dependent RoPE) and the Mamba-2 ablation.

Per head, state h_t (d_state x head_dim):
  h_t = a_t R_t h_{t-1} + b_t R_t B_{t-1} x_{t-1}^T + g_t B_t x_t^T,   y_t = C_t^T h_t + D x_t
with a_t = exp(dt_t A), A = -exp(A_log), g_t = lam_t dt_t, b_t = (1 - lam_t) dt_t a_t,
lam_t = sigmoid(.), R_t the block rotation by angles dt_t theta_t (theta from the input).
B, C: RMSNorm plus a learnt bias (init 1). MIMO rank R: x_t becomes R copies scaled
per channel (x_mimo), B_t and C_t have R rows, h_t += sum_r B_r x_r^T, y_r = C_r^T h_t,
mimo_out mixes the R outputs. Output: RMSNorm(y) * SiLU(z) -> out_proj.

Mamba-2 ablation: no rotation, Euler (b_t = 0, g_t = dt_t), rank 1, short conv on x, B, C.

Kernels: `numba` (the CPU default) runs the recurrence as one compiled loop per sequence with its
exact hand-written backward (kernels.ssd_scan_forward/backward); `recurrent` rotates the state step
by step in torch (the reference); `chunk` (the GPU default) is the SSD masked-matrix form
(chunks of 64) in the rotated frame (B~ = R(-Phi) B, C~ = R(-Phi) C, Phi = cumsum dt theta),
the trapezoid's shifted term entering as R extra input ranks, plus the inter-chunk state pass.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from methodkit.core.nn.transformer import RMSNorm
from methodkit.tools.chess_wm.models.gdn import CausalConv


def rotate(x: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Rotate (even, odd) pairs of the last dim of x by `angle` (last dim half as long, broadcast)."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    cos, sin = angle.cos(), angle.sin()
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class _NumbaSSD(torch.autograd.Function):
    """The per-head recurrence through the Numba kernels (CPU, float32 or float64), with its exact backward.

    beta (the trapezoid's shifted term) and angle (the rotation) are None for Mamba-2."""

    @staticmethod
    def forward(ctx, x, bm, cm, decay, beta, gamma, angle):
        from methodkit.tools.chess_wm import kernels

        trapezoid, rotate = beta is not None, angle is not None
        if beta is None:
            beta = torch.zeros_like(decay)
        if angle is None:
            angle = decay.new_zeros(*decay.shape, 0)
        if bm.shape[-1] % 2:
            raise ValueError(f"the compiled scan takes state rows in pairs: d_state {bm.shape[-1]} is odd")
        inputs = [t.detach().contiguous() for t in (x, bm, cm, decay, beta, gamma, angle)]
        y = kernels.ssd_scan_forward(*(t.numpy() for t in inputs), trapezoid, rotate)
        ctx.save_for_backward(*inputs)
        ctx.flags = (trapezoid, rotate)
        return torch.from_numpy(y)

    @staticmethod
    def backward(ctx, grad_y):
        from methodkit.tools.chess_wm import kernels

        arrays = [t.numpy() for t in (grad_y.contiguous(), *ctx.saved_tensors)]
        grads = [torch.from_numpy(g) for g in kernels.ssd_scan_backward(*arrays, *ctx.flags)]
        trapezoid, rotate = ctx.flags
        if not trapezoid:
            grads[4] = None
        if not rotate:
            grads[6] = None
        return tuple(grads)


class Mamba3(nn.Module):
    def __init__(
        self,
        dim: int,
        d_state: int = 128,
        expand: int = 2,
        head_dim: int = 64,
        rank: int = 4,
        mamba2: bool = False,
        conv_width: int = 4,
        chunk_size: int = 64,
        kernel: str = "auto",
        norm_eps: float = 1e-6,
    ):
        super().__init__()
        self.d_inner = expand * dim
        if self.d_inner % head_dim:
            raise ValueError(f"expand*d_model {self.d_inner} is not divisible by head_dim {head_dim}")
        self.h, self.p, self.n = self.d_inner // head_dim, head_dim, d_state
        self.mamba2 = mamba2
        self.rank = 1 if mamba2 else rank
        self.chunk_size, self.kernel = chunk_size, kernel
        r, n, h = self.rank, self.n, self.h
        self.sizes = [self.d_inner, self.d_inner, r * n, r * n, h] + ([] if mamba2 else [h, n // 2])
        self.in_proj = nn.Linear(dim, sum(self.sizes), bias=False)
        if mamba2:
            self.conv = CausalConv(self.d_inner + 2 * r * n, conv_width)
        self.b_norm, self.c_norm = RMSNorm(n, norm_eps), RMSNorm(n, norm_eps)
        self.b_bias, self.c_bias = nn.Parameter(torch.ones(r, n)), nn.Parameter(torch.ones(r, n))
        self.mimo_x = nn.Parameter(torch.ones(r, h, self.p))
        self.mimo_out = nn.Parameter(torch.full((r, h, self.p), 1.0 / r))
        self.A_log = nn.Parameter(torch.log(torch.empty(h).uniform_(1, 16)))
        dt = torch.exp(torch.rand(h) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3)).clamp(min=1e-4)
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))
        self.D = nn.Parameter(torch.ones(h))
        self.out_norm = RMSNorm(self.d_inner, norm_eps)
        self.out_proj = nn.Linear(self.d_inner, dim, bias=False)

    def _inputs(self, u: torch.Tensor):
        bsz, t, _ = u.shape
        parts = torch.split(self.in_proj(u), self.sizes, dim=-1)
        z, x, b_raw, c_raw, dt_raw = parts[:5]
        if self.mamba2:
            xbc = F.silu(self.conv(torch.cat((x, b_raw, c_raw), dim=-1)))
            x, b_raw, c_raw = torch.split(xbc, [self.d_inner, self.rank * self.n, self.rank * self.n], dim=-1)
        r, n = self.rank, self.n
        bmat = self.b_norm(b_raw.view(bsz, t, r, n)) + self.b_bias  # (B, T, R, N)
        cmat = self.c_norm(c_raw.view(bsz, t, r, n)) + self.c_bias
        dt = F.softplus(dt_raw + self.dt_bias)  # (B, T, H)
        log_a = dt * -self.A_log.exp()
        if self.mamba2:
            gamma, beta, theta = dt, torch.zeros_like(dt), None
        else:
            lam = torch.sigmoid(parts[5])
            gamma, beta = lam * dt, (1 - lam) * dt * log_a.exp()
            theta = parts[6]  # (B, T, N/2), shared by the heads; angles are dt_h * theta
        xh = x.view(bsz, t, self.h, self.p)
        return z, xh, bmat, cmat, dt, log_a, gamma, beta, theta

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        bsz, t, _ = u.shape
        z, xh, bmat, cmat, dt, log_a, gamma, beta, theta = self._inputs(u)
        xr = xh.unsqueeze(3) * self.mimo_x.transpose(0, 1)  # (B, T, H, R, P)
        kernel = self.kernel
        if kernel == "auto":  # measured fastest: the compiled loop on the CPU, the chunked form on a GPU
            compiled = u.device.type == "cpu" and u.dtype in (torch.float32, torch.float64)
            kernel = "numba" if compiled else "chunk"
        if kernel == "recurrent":
            y = self._recurrent(xr, bmat, cmat, dt, log_a, gamma, beta, theta)
        elif kernel == "numba":
            y = self._numba(xr, bmat, cmat, dt, log_a, gamma, beta, theta)
        else:
            y = self._chunked(xr, bmat, cmat, dt, log_a, gamma, beta, theta)
        y = (y * self.mimo_out.transpose(0, 1)).sum(3) + self.D[:, None] * xh  # (B, T, H, P)
        y = self.out_norm(y.reshape(bsz, t, self.d_inner)) * F.silu(z)
        return self.out_proj(y)

    def _numba(self, xr, bmat, cmat, dt, log_a, gamma, beta, theta):
        """The compiled loop; its inputs head-major so that every sequence is contiguous."""
        heads = lambda z: z.transpose(1, 2)  # noqa: E731  (B, T, H, ...) -> (B, H, T, ...)
        angle = None if theta is None else heads(dt.unsqueeze(-1) * theta.unsqueeze(2))  # (B, H, T, N/2)
        y = _NumbaSSD.apply(
            heads(xr), bmat, cmat, heads(log_a.exp()), None if self.mamba2 else heads(beta), heads(gamma), angle
        )
        return heads(y)  # (B, T, H, R, P)

    def _recurrent(self, xr, bmat, cmat, dt, log_a, gamma, beta, theta):
        """Step loop with an explicitly rotated state: the reference."""
        bsz, t, h, r, p = xr.shape
        state = xr.new_zeros(bsz, h, self.n, p)
        prev_bx = xr.new_zeros(bsz, h, self.n, p)
        out = []
        for i in range(t):
            bx = torch.einsum("brn,bhrp->bhnp", bmat[:, i], xr[:, i])
            carried = state * log_a[:, i, :, None, None].exp() + beta[:, i, :, None, None] * prev_bx
            if theta is not None:
                angle = (dt[:, i, :, None] * theta[:, i, None, :])[:, :, None, :]  # (B, H, 1, N/2)
                carried = rotate(carried.transpose(-1, -2), angle).transpose(-1, -2)
            state = carried + gamma[:, i, :, None, None] * bx
            out.append(torch.einsum("brn,bhnp->bhrp", cmat[:, i], state))
            prev_bx = bx
        return torch.stack(out, dim=1)  # (B, T, H, R, P)

    def _chunked(self, xr, bmat, cmat, dt, log_a, gamma, beta, theta):
        bsz, t, h, r, p = xr.shape
        n = self.n
        bh = bmat.unsqueeze(2).expand(bsz, t, h, r, n)
        ch = cmat.unsqueeze(2).expand(bsz, t, h, r, n)
        if theta is not None:
            phi = torch.cumsum(dt.unsqueeze(-1) * theta.unsqueeze(2), dim=1)  # (B, T, H, N/2)
            bh, ch = rotate(bh, -phi.unsqueeze(3)), rotate(ch, -phi.unsqueeze(3))
        # inputs as 2R ranks: g_t B~_t x_t and b_t B~_{t-1} x_{t-1}
        b_in = bh * gamma[..., None, None]
        x_in = xr
        if not self.mamba2:
            shift_b = F.pad(bh, (0, 0, 0, 0, 0, 0, 1, 0))[:, :t] * beta[..., None, None]
            shift_x = F.pad(xr, (0, 0, 0, 0, 0, 0, 1, 0))[:, :t]
            b_in, x_in = torch.cat((b_in, shift_b), dim=3), torch.cat((x_in, shift_x), dim=3)
        c = self.chunk_size
        pad = (-t) % c
        if pad:
            b_in, x_in, ch = (F.pad(z, (0, 0, 0, 0, 0, 0, 0, pad)) for z in (b_in, x_in, ch))
            log_a = F.pad(log_a, (0, 0, 0, pad))
        k = (t + pad) // c
        b_in = b_in.view(bsz, k, c, h, -1, n)
        x_in = x_in.view(bsz, k, c, h, -1, p)
        ch = ch.view(bsz, k, c, h, r, n)
        cum = log_a.view(bsz, k, c, h).cumsum(2)  # (B, K, C, H)
        lower = torch.ones(c, c, dtype=torch.bool, device=xr.device).tril()
        diff = cum[:, :, :, None, :] - cum[:, :, None, :, :]  # (B, K, Ct, Cs, H)
        decay = diff.masked_fill(~lower[None, None, :, :, None], float("-inf")).exp()
        scores = torch.einsum("bkthrn,bkshqn->bkhtrsq", ch, b_in)
        scores = scores * decay.permute(0, 1, 4, 2, 3)[:, :, :, :, None, :, None]
        y_intra = torch.einsum("bkhtrsq,bkshqp->bkthrp", scores, x_in)
        # per-chunk state contributions and the pass across chunks
        to_end = (cum[:, :, -1:, :] - cum).exp()  # (B, K, C, H)
        chunk_states = torch.einsum("bkshqn,bkshqp,bksh->bkhnp", b_in, x_in, to_end)
        state = xr.new_zeros(bsz, h, n, p)
        y_inter = []
        for j in range(k):
            y_inter.append(torch.einsum("bthrn,bhnp,bth->bthrp", ch[:, j], state, cum[:, j].exp()))
            state = state * cum[:, j, -1, :, None, None].exp() + chunk_states[:, j]
        y = y_intra + torch.stack(y_inter, dim=1)
        return y.reshape(bsz, k * c, h, r, p)[:, :t]


class MambaLayer(nn.Module):
    """pre-norm -> Mamba-3 (or Mamba-2) mixer -> residual -> pre-norm -> SwiGLU MLP -> residual."""

    def __init__(
        self,
        dim: int,
        mamba2: bool = False,
        ff_mult: int = 4,
        dropout: float = 0.1,
        kernel: str = "auto",
        d_state: int = 128,
        rank: int = 4,
        norm_eps: float = 1e-6,
    ):
        super().__init__()
        from methodkit.tools.chess_wm.models.common import SwiGLUMLP

        self.norm1 = RMSNorm(dim, norm_eps)
        self.mixer = Mamba3(dim, d_state=d_state, rank=rank, mamba2=mamba2, kernel=kernel, norm_eps=norm_eps)
        self.norm2 = RMSNorm(dim, norm_eps)
        self.mlp = SwiGLUMLP(dim, ff_mult)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.mixer(self.norm1(x)))
        return x + self.drop(self.mlp(self.norm2(x)))
