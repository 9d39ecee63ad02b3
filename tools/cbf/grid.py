"""Quantile grids: K equal-mass Beta quantile nodes mapped log-linearly onto a variance range.

u_k = F^-1_Beta((k - 1/2)/K; a, b), a = mu*kappa, b = (1 - mu)*kappa, g_k = exp(log L + (log U - log L) u_k).
Torch has no betaincinv, so `BetaQuantile` computes the forward pass with SciPy in float64 and the
backward pass by implicit differentiation of I_u(a, b) = q: du/da = -(dI/da) / f(u; a, b), with dI/da
by central differences of scipy.special.betainc.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

# Outside these shape values betaincinv loses accuracy; fits are clamped here and flagged `boundary`.
SHAPE_MIN, SHAPE_MAX = 0.05, 1e4


@dataclass(frozen=True)
class GridSpec:
    """Grid size and the variance ranges [L, U] of volatility and stochasticity."""

    k: int = 15
    v_range: tuple[float, float] = (0.5, 200.0)
    s_range: tuple[float, float] = (0.5, 400.0)

    def levels(self) -> np.ndarray:
        return (np.arange(self.k) + 0.5) / self.k


def beta_quantiles(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """[..., K] quantiles at (k - 1/2)/K of Beta(a, b) (a, b of shape [...])."""
    q = (np.arange(k) + 0.5) / k
    return special.betaincinv(np.asarray(a, float)[..., None], np.asarray(b, float)[..., None], q)


def to_range(u, low: float, high: float):
    """Map [0, 1] log-linearly onto [low, high] (works on NumPy arrays and torch tensors)."""
    lo, hi = np.log(low), np.log(high)
    if isinstance(u, np.ndarray):
        return np.exp(lo + (hi - lo) * u)
    import torch

    return torch.exp(lo + (hi - lo) * u)


def shapes(mu, kappa):
    """Beta shapes from location and concentration."""
    return mu * kappa, (1.0 - mu) * kappa


def nodes(mu, kappa, low: float, high: float, k: int) -> np.ndarray:
    """Grid nodes (variances) for location mu and concentration kappa (NumPy, unclamped)."""
    a, b = shapes(np.asarray(mu, float), np.asarray(kappa, float))
    return to_range(beta_quantiles(a, b, k), low, high)


def _dI(a: np.ndarray, b: np.ndarray, u: np.ndarray, which: str) -> np.ndarray:
    """dI_u(a, b)/da (or /db) by central differences, step 1e-6 * max(1, shape)."""
    if which == "a":
        h = 1e-6 * np.maximum(1.0, a)
        return (special.betainc(a + h, b, u) - special.betainc(a - h, b, u)) / (2 * h)
    h = 1e-6 * np.maximum(1.0, b)
    return (special.betainc(a, b + h, u) - special.betainc(a, b - h, u)) / (2 * h)


def _log_density(u: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):  # a node at u = 0 or 1 has density 0 or inf; clamped below
        return (a - 1) * np.log(u) + (b - 1) * np.log1p(-u) - special.betaln(a, b)


def beta_quantile_grad(a: np.ndarray, b: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(du/da, du/db) of the quantile u(a, b) at fixed level, by implicit differentiation."""
    density = np.exp(_log_density(u, a, b))
    density = np.maximum(density, 1e-300)
    return -_dI(a, b, u, "a") / density, -_dI(a, b, u, "b") / density


def beta_quantile_function():
    """The torch autograd Function (built lazily so that importing this module needs no torch)."""
    import torch

    class BetaQuantile(torch.autograd.Function):
        """u[..., k] = F^-1_Beta(q_k; a, b) for a, b of shape [...] (float64)."""

        @staticmethod
        def forward(ctx, a, b, k: int):
            an, bn = a.detach().cpu().numpy(), b.detach().cpu().numpy()
            u = beta_quantiles(an, bn, k)
            ctx.save_for_backward(a, b)
            ctx.u = u
            return torch.from_numpy(u).to(dtype=a.dtype, device=a.device)

        @staticmethod
        def backward(ctx, grad_u):
            a, b = ctx.saved_tensors
            an, bn = a.detach().cpu().numpy()[..., None], b.detach().cpu().numpy()[..., None]
            du_da, du_db = beta_quantile_grad(an, bn, ctx.u)
            g = grad_u.detach().cpu().numpy()
            ga = torch.from_numpy((g * du_da).sum(-1)).to(a)
            gb = torch.from_numpy((g * du_db).sum(-1)).to(b)
            return ga, gb, None

    return BetaQuantile


_FUNCTION = None


def beta_quantile_torch(a, b, k: int):
    """Differentiable Beta quantiles [..., K] of torch tensors a, b [...]."""
    global _FUNCTION
    if _FUNCTION is None:
        _FUNCTION = beta_quantile_function()
    return _FUNCTION.apply(a, b, k)
