"""The knowledge-distillation objectives MCD plugs into (DistiLLM's set): sft, fkl, rkl, jsd, tvd, skl, srkl.

Each takes student and teacher logits (..., V) and gold ids (...), returns the mean over positions.
Divergences are computed on softmax(logits / tau) and scaled by tau^2 (Hinton et al.), so tau = 1 is
the plain divergence. Skew KL (Ko et al. 2024): skl = KL(p_T || a p_T + (1-a) p_S), srkl = KL(p_S ||
a p_S + (1-a) p_T), a = 0.1.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

SKEW = 0.1


def _kl(p_log: torch.Tensor, q_log: torch.Tensor) -> torch.Tensor:
    return (p_log.exp() * (p_log - q_log)).sum(-1)


def _mix_log(p_log: torch.Tensor, q_log: torch.Tensor, alpha: float) -> torch.Tensor:
    """log(alpha p + (1 - alpha) q), stably."""
    return torch.logaddexp(p_log + torch.log(torch.tensor(alpha)), q_log + torch.log(torch.tensor(1 - alpha)))


def divergence(kind: str, s_log: torch.Tensor, t_log: torch.Tensor) -> torch.Tensor:
    """Per-position divergence between log-probabilities (..., V)."""
    if kind == "fkl":
        return _kl(t_log, s_log)
    if kind == "rkl":
        return _kl(s_log, t_log)
    if kind == "jsd":
        m_log = _mix_log(t_log, s_log, 0.5)
        return 0.5 * _kl(t_log, m_log) + 0.5 * _kl(s_log, m_log)
    if kind == "tvd":
        return 0.5 * (t_log.exp() - s_log.exp()).abs().sum(-1)
    if kind == "skl":
        return _kl(t_log, _mix_log(t_log, s_log, SKEW))
    if kind == "srkl":
        return _kl(s_log, _mix_log(s_log, t_log, SKEW))
    raise ValueError(f"unknown KD objective {kind!r}")


OBJECTIVES = ("sft", "fkl", "rkl", "jsd", "tvd", "skl", "srkl")


def kd_loss(kind: str, student_logits, teacher_logits, gold, tau: float = 1.0) -> torch.Tensor:
    if kind == "sft":
        return F.cross_entropy(student_logits.flatten(0, -2), gold.flatten())
    s_log = F.log_softmax(student_logits / tau, -1)
    t_log = F.log_softmax(teacher_logits.detach() / tau, -1)
    return divergence(kind, s_log, t_log).mean() * tau**2
