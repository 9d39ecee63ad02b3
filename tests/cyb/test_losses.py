"""Losses against hand computations and a slot-by-slot probability-space reference."""

import math
import re

import pytest
import torch

from methodkit.tools.cyb.config import LossConfig, parse_prior
from methodkit.tools.cyb.losses import loss_terms, slot_terms

V = 5


def _reference(logits, y, cfg, prior=None, tau=0.0):
    """Plain probabilities and a Python loop over slots (what the vectorised code must equal)."""
    out = torch.zeros(y.shape)
    b, t, g, _ = logits.shape
    for i in range(b):
        for j in range(t):
            q = [torch.softmax(logits[i, j, k].double(), -1) for k in range(g)]
            d = [float(q[k][V]) if k < g - 1 else 0.0 for k in range(g)]
            r = [float(q[k][y[i, j]]) / sum(float(q[k][c]) for c in range(V)) for k in range(g)]
            reach = [math.prod(d[:k]) for k in range(g)]
            pi = [reach[k] * (1 - d[k]) for k in range(g)]
            if cfg.loss == "cyb-ap":
                value = -math.log(sum(cfg.gamma**k * reach[k] * (1 - d[k]) * r[k] for k in range(g)))  # DK masked at K
            else:
                ece = sum(pi[k] * -math.log(r[k]) for k in range(g))
                if cfg.loss == "cyb-va":
                    value = ece + cfg.beta * sum(pi[k] * math.log(pi[k] / float(prior[k])) for k in range(g))
                else:
                    value = ece + tau * sum(pi[k] * k for k in range(g))
            if cfg.anytime:
                value += cfg.anytime * sum(-math.log(r[k]) for k in range(g)) / g
            out[i, j] = value
    return out


@pytest.fixture
def batch():
    torch.manual_seed(3)
    return torch.randn(2, 4, 3, V + 1) * 2, torch.randint(0, V, (2, 4))


@pytest.mark.parametrize(
    "cfg",
    [
        LossConfig("cyb-ap", 2, gamma=0.8, anytime=0.0),
        LossConfig("cyb-ap", 2, gamma=1.0, anytime=0.3),
        LossConfig("cyb-va", 2, beta=0.7, anytime=0.0),
        LossConfig("cyb-dp", 2, tau=0.2, anytime=0.5),
    ],
    ids=lambda c: f"{c.loss}-g{c.gamma}-a{c.anytime}",
)
def test_vectorised_losses_equal_reference(batch, cfg):
    logits, y = batch
    prior = torch.tensor(cfg.prior_weights())
    got = loss_terms(slot_terms(logits, y, V), cfg, prior, tau=cfg.tau)
    want = _reference(logits, y, cfg, prior, tau=cfg.tau)
    assert torch.allclose(got, want.float(), atol=1e-5)


def test_ap_at_gamma_one_is_the_marginal_likelihood(batch):
    logits, y = batch
    terms = slot_terms(logits, y, V)
    ap = loss_terms(terms, LossConfig("cyb-ap", 2, gamma=1.0, anytime=0.0))
    assert torch.allclose(ap, -terms.marginal_log_p(), atol=1e-6)


def test_stop_distribution_and_marginal_are_proper(batch):
    logits, _ = batch
    terms = slot_terms(logits, torch.zeros(2, 4, dtype=torch.long), V)
    assert torch.allclose(terms.log_pi.exp().sum(-1), torch.ones(2, 4), atol=1e-6)
    total = sum(slot_terms(logits, torch.full((2, 4), c), V).marginal_log_p().exp() for c in range(V))
    assert torch.allclose(total, torch.ones(2, 4), atol=1e-5)


def test_hand_case_two_slots():
    # slot 0: logits answers [0, 0], DK log 2 -> q0 = [1/4, 1/4, 1/2], d0 = 1/2; slot 1 answers [log 3, 0]
    logits = torch.tensor([[[[0.0, 0.0, math.log(2.0)], [math.log(3.0), 0.0, 5.0]]]])
    terms = slot_terms(logits, torch.tensor([[0]]), 2)
    assert torch.allclose(terms.log_pi.exp(), torch.tensor([[[0.5, 0.5]]]))  # DK masked at the last slot
    assert math.isclose(float(terms.marginal_log_p().exp()), 0.5 * 0.5 + 0.5 * 0.75, rel_tol=1e-6)
    ap = loss_terms(terms, LossConfig("cyb-ap", 1, gamma=0.5, anytime=0.0))
    assert math.isclose(float(ap), -math.log(0.25 + 0.5 * 0.5 * 0.75), rel_tol=1e-6)
    assert int(terms.greedy_stop(0.5)) == 0 and int(terms.greedy_stop(0.4)) == 1


def test_ce_pause_reads_only_the_last_slot(batch):
    logits, y = batch
    logits = logits.clone().requires_grad_(True)
    loss_terms(slot_terms(logits, y, V), LossConfig("ce-pause", 2)).sum().backward()
    assert torch.all(logits.grad[:, :, :-1] == 0) and torch.any(logits.grad[:, :, -1] != 0)


def test_dk_gets_gradient_from_cyb_losses(batch):
    logits, y = batch
    for loss in ("cyb-ap", "cyb-va", "cyb-dp"):
        lg = logits.clone().requires_grad_(True)
        cfg = LossConfig(loss, 2, anytime=0.0)
        loss_terms(slot_terms(lg, y, V), cfg, torch.tensor(cfg.prior_weights()), 0.1).sum().backward()
        assert torch.any(lg.grad[:, :, :-1, V] != 0)


def test_extreme_logits_stay_finite():
    logits = torch.zeros(1, 2, 3, V + 1)
    logits[..., V] = 200.0  # d = 1 in floating point
    logits[0, 1, :, V] = -200.0  # d = 0
    y = torch.tensor([[1, 2]])
    for loss in ("cyb-ap", "cyb-va", "cyb-dp"):
        cfg = LossConfig(loss, 2)
        value = loss_terms(slot_terms(logits, y, V), cfg, torch.tensor(cfg.prior_weights()), 0.1)
        assert torch.isfinite(value).all()


def test_prior_parsing():
    assert parse_prior("geometric:0.5", 2) == [0.5, 0.25, 0.25]
    assert parse_prior("uniform", 3) == [0.25] * 4
    assert parse_prior("1,1,2", 2) == [0.25, 0.25, 0.5]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"loss": "cyb-ap", "max_pauses": 0}, "needs --max-pauses K >= 1"),
        ({"loss": "cyb-ap", "gamma": 0.0}, "--gamma must be in (0, 1]"),
        ({"loss": "cyb-ap", "gamma": 1.5}, "--gamma must be in (0, 1]"),
        ({"loss": "cyb-va", "beta": -1.0}, "--beta must be >= 0"),
        ({"loss": "cyb-dp", "budget": 3.0}, "--budget 3.0 must be in [0, K=2]"),
        ({"loss": "cyb-va", "prior": "1,2"}, "--prior has 2 weights but --max-pauses 2 needs K+1 = 3"),
    ],
)
def test_bad_settings_refused(kwargs, message):
    from methodkit.core.errors import UsageError

    with pytest.raises(UsageError, match=re.escape(message)):
        LossConfig(**kwargs)
