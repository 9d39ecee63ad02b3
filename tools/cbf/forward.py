"""Torch forward pass of the CBF (and of the plain Kalman filter, its K = 1 case) for fitting.

Batched over rows (subject x restart) and, unless weights carry over, over blocks: state
tensors are [N, B, K, K] and the graph has one step per trial. Mirrors kernels.cbf_filter. Torch is imported
inside the functions: the simulators and the adjoint fit use only the option classes here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LOG_2PI = math.log(2.0 * math.pi)


@dataclass(frozen=True)
class FilterOptions:
    """Learner settings shared by every model: initial Kalman state, fixed-share, carry-over."""

    m0: float = 60.0
    w0: float = 10.0
    switch: float = 0.0
    carry_over: bool = False


@dataclass(frozen=True)
class ResponseModel:
    """r_t ~ N(mu_t, sigma_r^2), optionally interval-censored at the clip bounds, with an optional lapse."""

    clip: tuple[float, float] | None = (10.0, 90.0)
    censor: bool = False
    lapse: float = 0.0


def _run_blocks(outcome, valid, v, s, logpi, opts: FilterOptions):
    """One pass over trials for blocks batched in dim 1; returns (pred means [N,B,T], log Z [N,B,T], logpi)."""
    import torch

    N, B, T = outcome.shape
    K2 = v.shape[-2] * s.shape[-1]
    m = torch.full((N, B, v.shape[-2], s.shape[-1]), opts.m0, dtype=v.dtype)
    w = torch.full_like(m, opts.w0)
    preds, logz = [], []
    for t in range(T):
        keep = valid[:, :, t, None, None]
        if opts.switch > 0:  # only on trials that exist: a short block carries its last weights unmixed
            mixed = torch.log((1 - opts.switch) * torch.exp(logpi) + opts.switch / K2)
            logpi = torch.where(keep, mixed, logpi)
        preds.append((torch.exp(logpi) * m).sum((-1, -2)))
        o = outcome[:, :, t, None, None]
        pv = w + v
        tot = pv + s
        e = o - m
        a = logpi - 0.5 * (LOG_2PI + torch.log(tot)) - 0.5 * e * e / tot
        lz = torch.logsumexp(a.flatten(-2), -1)
        gain = pv / tot
        logpi = torch.where(keep, a - lz[..., None, None], logpi)
        m = torch.where(keep, m + gain * e, m)
        w = torch.where(keep, (1 - gain) * pv, w)
        logz.append(torch.where(valid[:, :, t], lz, torch.zeros_like(lz)))
    return torch.stack(preds, -1), torch.stack(logz, -1), logpi


def filter_predictions(outcome, valid, vnodes, snodes, opts: FilterOptions):
    """Predictions [N,B,T] and per-trial log evidence [N,B,T] of the K x K mixture of Kalman filters."""
    import torch

    N, B, T = outcome.shape
    K1, K2 = vnodes.shape[-1], snodes.shape[-1]
    v = vnodes[:, None, :, None]
    s = snodes[:, None, None, :]
    uniform = -math.log(K1 * K2)
    if not opts.carry_over:
        logpi = torch.full((N, B, K1, K2), uniform, dtype=vnodes.dtype)
        pred, logz, _ = _run_blocks(outcome, valid, v, s, logpi, opts)
        return pred, logz
    logpi = torch.full((N, 1, K1, K2), uniform, dtype=vnodes.dtype)
    preds, logzs = [], []
    for b in range(B):
        pred, logz, logpi = _run_blocks(outcome[:, b : b + 1], valid[:, b : b + 1], v, s, logpi, opts)
        preds.append(pred)
        logzs.append(logz)
    return torch.cat(preds, 1), torch.cat(logzs, 1)


def response_loglik(pred, response, mask, sigma_r, model: ResponseModel):
    """Sum over trials of log p(r_t | mu_t) per row; `mask` excludes missing responses."""
    import torch

    sigma = sigma_r[:, None, None]
    r = torch.where(mask, response, pred.detach())
    z = (r - pred) / sigma
    ll = -0.5 * (LOG_2PI + z * z) - torch.log(sigma)
    if model.censor and model.clip is not None:
        lo, hi = model.clip
        low = torch.special.log_ndtr((lo - pred) / sigma)
        high = torch.special.log_ndtr((pred - hi) / sigma)
        ll = torch.where(r <= lo, low, torch.where(r >= hi, high, ll))
    if model.lapse > 0 and model.clip is not None:
        width = model.clip[1] - model.clip[0]
        ll = torch.logaddexp(math.log1p(-model.lapse) + ll, torch.full_like(ll, math.log(model.lapse / width)))
    return torch.where(mask, ll, torch.zeros_like(ll)).sum((-1, -2))
