"""SLiCE (structured linear controlled differential equation) layers, torch-slices semantics.

y_i = (I + A(u_i)) y_{i-1} + B(u_i), y_0 learnt, u_i = scale * [1, X_i - X_{i-1}] (X_0 = 0),
A(u) block-diagonal with blocks of `block_size` (1 = the diagonal ablation). Three forms:
a compiled Numba scan with its exact backward (the CPU default: about 13x the chunked form's
fwd+bwd CPU time at B64 T96 d128, because torch pays per-op overhead on tiny block products),
a step loop (reference) and a two-level chunked form (the GPU default): every chunk of C steps runs its
recurrence from a zero state, and composes its transition matrices, in parallel with all
other chunks (C sequential steps over T/C chunks at once); then the chunk-end states carry
across chunks (T/C steps) and one batched product adds each chunk's carried-in state.
About C + T/C sequential steps instead of T, and T matrix products in all, a log2(C)-th of
an inclusive Hillis-Steele scan's (measured: 1.5-2x faster than that scan at T=256, C=8).
Parameter names match torch-slices' SLiCELayer, so its state dict loads here and the
library serves as a test oracle.
"""

from __future__ import annotations

import torch
from torch import nn

from methodkit.core.nn.transformer import RMSNorm


class _NumbaScan(torch.autograd.Function):
    """The block recurrence through the Numba kernels (CPU, float32 or float64), with its exact backward."""

    @staticmethod
    def forward(ctx, maps, bias, y0):
        from methodkit.tools.chess_wm import kernels

        maps_np, bias_np, y0_np = (t.detach().contiguous().numpy() for t in (maps, bias, y0))
        states = torch.from_numpy(kernels.slice_scan_forward(maps_np, bias_np, y0_np))
        ctx.save_for_backward(maps, states, y0)
        return states

    @staticmethod
    def backward(ctx, grad_states):
        from methodkit.tools.chess_wm import kernels

        maps, states, y0 = ctx.saved_tensors
        arrays = (grad_states.contiguous(), maps.contiguous(), states, y0.contiguous())
        grads = kernels.slice_scan_backward(*(t.detach().numpy() for t in arrays))
        return tuple(torch.from_numpy(g) for g in grads)


class SLiCE(nn.Module):
    def __init__(
        self,
        dim: int,
        block_size: int = 8,
        init_std: float = 0.01,
        scale: float = 1.0,
        chunk_size: int | None = None,
        kernel: str = "auto",
    ):
        super().__init__()
        if chunk_size is None:  # fastest measured at B32 T256 d128: 8 for 8x8 blocks, 16 for the diagonal
            chunk_size = 8 if block_size > 1 else 16
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
        if kernel == "auto":  # measured fastest: the compiled scan on the CPU, the chunked form on a GPU
            compiled = x.device.type == "cpu" and x.dtype in (torch.float32, torch.float64)
            kernel = "numba" if compiled else "chunk"
        m, b = self._transforms(x)
        y0 = self.init.expand(x.shape[0], -1)
        if kernel == "recurrent":
            return self._recurrent(m, b, y0)
        if kernel == "numba":
            return self._numba(m, b, y0)
        return self._chunked(m, b, y0)

    def _numba(self, m, b, y0):
        bsz, t = m.shape[:2]
        k = self.block_size
        if k == 1:  # the diagonal is the k = 1 case of the block kernel
            m, b = m.unsqueeze(-1).unsqueeze(-1), b.unsqueeze(-1)
        ys = _NumbaScan.apply(m, b, y0.reshape(bsz, -1, k))
        return ys.reshape(bsz, t, self.dim)

    def _recurrent(self, m, b, y0):
        bsz, t = m.shape[:2]
        y = y0 if self.block_size == 1 else y0.reshape(bsz, -1, self.block_size)
        out = []
        for i in range(t):
            y = self._map(m[:, i], y) + b[:, i]
            out.append(y.reshape(bsz, self.dim))
        return torch.stack(out, dim=1)

    def _map(self, m, y):
        """M y for stacks of maps: elementwise when diagonal, else a batched mat-vec."""
        if self.block_size == 1:
            return m * y
        return (m @ y.unsqueeze(-1)).squeeze(-1)

    def _compose(self, m, p):
        return m * p if self.block_size == 1 else m @ p

    def _chunked(self, m, b, y0):
        bsz, t = m.shape[:2]
        c = self.chunk_size
        pad = (-t) % c
        if pad:  # identity maps with zero bias leave the state unchanged
            one = (
                torch.ones_like(m[:, :1])
                if self.block_size == 1
                else torch.eye(self.block_size, dtype=m.dtype, device=m.device)
            )
            m = torch.cat((m, one.expand(bsz, pad, *m.shape[2:])), 1)
            b = torch.cat((b, b.new_zeros(bsz, pad, *b.shape[2:])), 1)
        n = m.shape[1] // c
        mc = m.reshape(bsz, n, c, *m.shape[2:])
        bc = b.reshape(bsz, n, c, *b.shape[2:])
        state, prod = bc[:, :, 0], mc[:, :, 0]
        local, prods = [state], [prod]
        for i in range(1, c):  # within every chunk at once: state from zero, product of maps
            state = self._map(mc[:, :, i], state) + bc[:, :, i]
            prod = self._compose(mc[:, :, i], prod)
            local.append(state)
            prods.append(prod)
        local, prods = torch.stack(local, 2), torch.stack(prods, 2)
        y = y0 if self.block_size == 1 else y0.reshape(bsz, -1, self.block_size)
        starts = []
        for j in range(n):  # across chunks: the state entering each chunk
            starts.append(y)
            y = self._map(prods[:, j, -1], y) + local[:, j, -1]
        ys = self._map(prods, torch.stack(starts, 1).unsqueeze(2)) + local
        return ys.reshape(bsz, n * c, self.dim)[:, :t]


class SLiCELayer(nn.Module):
    """pre-norm -> SLiCE -> residual -> RMSNorm -> GELU MLP -> residual (dropout on both branches)."""

    def __init__(
        self,
        dim: int,
        block_size: int = 8,
        ff_mult: int = 4,
        dropout: float = 0.1,
        chunk_size: int | None = None,
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
