"""The per-slot quantities and the five losses, vectorised over the K+1 slots (no loop over k).

Notation (reconstruction, docs/cyb.md): q_k = softmax over V answers and DK at slot k; d_k = q_k(DK)
(d_K := 0: the last slot must answer); r_k = q_k restricted to the answers, renormalised; the model's
own stopping distribution pi_k = (prod_{j<k} d_j)(1 - d_k). Everything is fp32 log-space: log d is
clamped at -30 and prod_{j<k} d_j is an exclusive cumulative sum of log d.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

LOG_D_FLOOR = -30.0


@dataclass
class SlotTerms:
    log_r_y: torch.Tensor  # (B, T, G) log r_k(y)
    log_d: torch.Tensor  # (B, T, G) log d_k (-inf at the last slot)
    log_pi: torch.Tensor  # (B, T, G) log pi_k
    log_reach: torch.Tensor  # (B, T, G) log prod_{j<k} d_j

    @property
    def slots(self) -> int:
        return self.log_r_y.shape[-1]

    def expected_pauses(self) -> torch.Tensor:
        k = torch.arange(self.slots, device=self.log_pi.device, dtype=torch.float32)
        return (self.log_pi.exp() * k).sum(-1)

    def marginal_log_p(self) -> torch.Tensor:
        """log sum_k pi_k r_k(y): the model's predictive probability under its own stopping policy."""
        return torch.logsumexp(self.log_pi + self.log_r_y, dim=-1)

    def greedy_stop(self, threshold: float = 0.5) -> torch.Tensor:
        """k* per target: the first slot whose d_k <= threshold (the last slot always answers)."""
        answer = self.log_d.exp() <= threshold
        answer[..., -1] = True
        return answer.int().argmax(-1)


def slot_terms(logits: torch.Tensor, y: torch.Tensor, base_vocab: int) -> SlotTerms:
    """logits (B, T, G, V or V+1), targets y (B, T) -> the log-space quantities of every slot."""
    logits = logits.float()
    answers = logits[..., :base_vocab]
    log_z_answer = torch.logsumexp(answers, dim=-1)
    target = y[:, :, None, None].expand(*answers.shape[:3], 1)
    log_r_y = answers.gather(-1, target).squeeze(-1) - log_z_answer
    g = logits.shape[2]
    if logits.shape[-1] == base_vocab or g == 1:  # no DK: every slot answers (only slot 0 exists)
        zeros = torch.zeros_like(log_r_y)
        return SlotTerms(log_r_y, torch.full_like(log_r_y, float("-inf")), zeros, zeros)
    log_z = torch.logsumexp(logits, dim=-1)
    log_d = (logits[..., base_vocab] - log_z).clamp(min=LOG_D_FLOOR)
    log_answer = log_z_answer - log_z  # log(1 - d_k)
    last = torch.zeros_like(log_d[..., :1])
    log_d = torch.cat([log_d[..., :-1], torch.full_like(last, float("-inf"))], dim=-1)
    log_answer = torch.cat([log_answer[..., :-1], last], dim=-1)
    log_reach = torch.cat([last, torch.cumsum(log_d[..., :-1], dim=-1)], dim=-1)
    return SlotTerms(log_r_y, log_d, log_reach + log_answer, log_reach)


def loss_terms(terms: SlotTerms, cfg, prior: torch.Tensor | None = None, tau: float = 0.0) -> torch.Tensor:
    """Per-target loss (B, T) for cfg.loss (a LossConfig); `prior` (G,) for cyb-va, `tau` for cyb-dp."""
    name = cfg.loss
    if name == "ce":
        return -terms.log_r_y[..., 0]
    if name == "ce-pause":
        return -terms.log_r_y[..., -1]
    g = terms.slots
    k = torch.arange(g, device=terms.log_r_y.device, dtype=torch.float32)
    if name == "cyb-ap":
        # -log sum_k gamma^k (prod_{j<k} d_j) q_k(y); pi_k r_k(y) = (prod_{j<k} d_j) q_k(y).
        loss = -torch.logsumexp(k * math.log(cfg.gamma) + terms.log_pi + terms.log_r_y, dim=-1)
    else:
        pi = terms.log_pi.exp()
        expected_ce = (pi * -terms.log_r_y).sum(-1)
        if name == "cyb-va":
            log_prior = torch.log(prior.clamp(min=1e-30))
            kl = (pi * (terms.log_pi.clamp(min=LOG_D_FLOOR * g) - log_prior)).sum(-1)
            loss = expected_ce + cfg.beta * kl
        elif name == "cyb-dp":
            loss = expected_ce + tau * (pi * k).sum(-1)
        else:
            raise ValueError(f"unknown loss {name!r}")
    if cfg.anytime:
        # "output may be required at any step": every slot's forced answer is trained, so pause slots
        # learn to be useful even while the policy rarely reaches them.
        loss = loss + cfg.anytime * (-terms.log_r_y).mean(-1)
    return loss
