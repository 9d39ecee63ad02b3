"""The surrogate losses: dual-clip PPO objective and the KL directions of self-distillation."""

from __future__ import annotations

import torch

KL_DIRECTIONS = ("fwd", "rev", "sym")


def dual_clip(ratio: torch.Tensor, adv: torch.Tensor, eps: float = 0.2, c: float = 3.0) -> torch.Tensor:
    """min(rho A, clip(rho, 1 +- eps) A) for A >= 0; max(that, c A) for A < 0 (dual clip, Ye et al. 2020)."""
    clipped = torch.minimum(ratio * adv, torch.clamp(ratio, 1.0 - eps, 1.0 + eps) * adv)
    return torch.where(adv >= 0, clipped, torch.maximum(clipped, c * adv))


def kl(teacher_logp: torch.Tensor, student_logp: torch.Tensor, direction: str = "fwd") -> torch.Tensor:
    """Per-state KL [B]: fwd = KL(teacher || student) (mode covering), rev = KL(student || teacher), sym = mean."""
    fwd = (teacher_logp.exp() * (teacher_logp - student_logp)).sum(-1)
    if direction == "fwd":
        return fwd
    rev = (student_logp.exp() * (student_logp - teacher_logp)).sum(-1)
    if direction == "rev":
        return rev
    if direction == "sym":
        return 0.5 * (fwd + rev)
    raise ValueError(f"unknown KL direction {direction!r}")


def entropy(logp: torch.Tensor) -> torch.Tensor:
    return -(logp.exp() * logp).sum(-1)


def gae(reward, value, last, gamma: float, lam: float):
    """Generalised advantage estimates and returns over decisions ordered in time within each episode.

    reward, value [N] in time order per episode; last [N] marks each episode's final decision
    (terminal: no bootstrap)."""
    import numpy as np

    adv = np.zeros_like(reward)
    running = 0.0
    for i in range(len(reward) - 1, -1, -1):
        if last[i]:
            running = 0.0
            next_value = 0.0
        else:
            next_value = value[i + 1]
        delta = reward[i] + gamma * next_value - value[i]
        running = delta + gamma * lam * running
        adv[i] = running
    return adv, adv + value
