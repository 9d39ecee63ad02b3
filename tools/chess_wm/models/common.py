"""Pieces the recurrent families share."""

from __future__ import annotations

from torch import nn
from torch.nn import functional as F


class SwiGLUMLP(nn.Module):
    """down(SiLU(gate x) * up x) with hidden = ff_mult * dim."""

    def __init__(self, dim: int, ff_mult: int = 4):
        super().__init__()
        hidden = ff_mult * dim
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))
