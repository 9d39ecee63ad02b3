"""KD objectives: known answers and identities."""

import math

import pytest
import torch
from torch.nn import functional as F

from methodkit.tools.mcd import kd


def _logits(seed, shape=(3, 5, 7)):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 2


def test_divergences_vanish_on_equal_distributions():
    z = _logits(0)
    for kind in kd.OBJECTIVES[1:]:
        assert float(kd.kd_loss(kind, z, z, None)) == pytest.approx(0.0, abs=1e-6), kind


def test_fkl_and_rkl_match_torch_kl_div():
    s, t = _logits(1), _logits(2)
    fkl = F.kl_div(F.log_softmax(s, -1), F.log_softmax(t, -1), log_target=True, reduction="none").sum(-1).mean()
    rkl = F.kl_div(F.log_softmax(t, -1), F.log_softmax(s, -1), log_target=True, reduction="none").sum(-1).mean()
    assert float(kd.kd_loss("fkl", s, t, None)) == pytest.approx(float(fkl), rel=1e-5)
    assert float(kd.kd_loss("rkl", s, t, None)) == pytest.approx(float(rkl), rel=1e-5)


def test_tvd_jsd_and_skew_known_answers():
    p = torch.tensor([[0.5, 0.5, 0.0 + 1e-12]]).log()
    q = torch.tensor([[1.0 - 2e-12, 1e-12, 1e-12]]).log()
    assert float(kd.divergence("tvd", q, p)) == pytest.approx(0.5, abs=1e-6)
    # disjoint-ish supports: JSD approaches log 2; it is symmetric
    a = torch.tensor([[1 - 1e-9, 1e-9]]).log()
    b = torch.tensor([[1e-9, 1 - 1e-9]]).log()
    assert float(kd.divergence("jsd", a, b)) == pytest.approx(math.log(2), abs=1e-4)
    s, t = F.log_softmax(_logits(3), -1), F.log_softmax(_logits(4), -1)
    assert torch.allclose(kd.divergence("jsd", s, t), kd.divergence("jsd", t, s), atol=1e-6)
    # skew KL with the mixture written out by hand
    mix = (kd.SKEW * t.exp() + (1 - kd.SKEW) * s.exp()).log()
    assert torch.allclose(kd.divergence("skl", s, t), (t.exp() * (t - mix)).sum(-1), atol=1e-5)
    mix_r = (kd.SKEW * s.exp() + (1 - kd.SKEW) * t.exp()).log()
    assert torch.allclose(kd.divergence("srkl", s, t), (s.exp() * (s - mix_r)).sum(-1), atol=1e-5)
    # skew KL is bounded by log(1/alpha), plain KL is not
    assert float(kd.divergence("skl", a, b).max()) <= math.log(1 / kd.SKEW) + 1e-6


def test_sft_is_cross_entropy_on_gold_and_tau_scales():
    s, t = _logits(5), _logits(6)
    gold = torch.randint(0, 7, (3, 5))
    assert float(kd.kd_loss("sft", s, t, gold)) == pytest.approx(float(F.cross_entropy(s.flatten(0, 1), gold.flatten())))
    soft = kd.kd_loss("fkl", s, t, None, tau=2.0)
    by_hand = kd.divergence("fkl", F.log_softmax(s / 2, -1), F.log_softmax(t / 2, -1)).mean() * 4
    assert float(soft) == pytest.approx(float(by_hand), rel=1e-6)
