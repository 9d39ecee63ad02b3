"""Cross-check of fkl, rkl and skl against torchdistill's KDLoss (Hinton KD: KLDivLoss on tempered softmaxes).

torchdistill is not in an extra (its torchvision requirement replaces the CPU torch with a CUDA build);
`pip install --no-deps torchdistill` suffices for its losses, which need only torch. Skipped without it."""

import pytest
import torch
from torch.nn import functional as F

from methodkit.tools.mcd import kd

mid_level = pytest.importorskip("torchdistill.losses.mid_level")


def _io(logits):
    return {"lm": {"output": logits}}


def _pair(seed, n=12, v=9):
    g = torch.Generator().manual_seed(seed)
    return 2 * torch.randn(n, v, generator=g), 2 * torch.randn(n, v, generator=g), torch.randint(0, v, (n,), generator=g)


@pytest.mark.parametrize("tau", [1.0, 2.0])
def test_fkl_and_sft_match_torchdistill_kd_loss(tau):
    s, t, gold = _pair(0)
    loss = mid_level.KDLoss("lm", "output", "lm", "output", temperature=tau, alpha=0.3, beta=1.0)
    theirs = loss(_io(s), _io(t), gold)  # 0.3 CE + tau^2 KL(p_T || p_S)
    ours = kd.kd_loss("fkl", s, t, gold, tau) + 0.3 * kd.kd_loss("sft", s, t, gold)
    assert torch.allclose(ours, theirs, atol=1e-5)


@pytest.mark.parametrize("tau", [1.0, 2.0])
def test_rkl_and_skl_match_torchdistill_kd_loss_with_swapped_or_mixed_inputs(tau):
    s, t, gold = _pair(1)
    soft = mid_level.KDLoss("lm", "output", "lm", "output", temperature=tau, alpha=0)  # alpha 0: KL only, no tau^2
    rkl = tau**2 * soft(_io(t), _io(s))  # KL(p_S || p_T): the student's distribution as the target
    assert torch.allclose(kd.kd_loss("rkl", s, t, gold, tau), rkl, atol=1e-5)
    p_t, p_s = F.softmax(t / tau, -1), F.softmax(s / tau, -1)
    mix_logits = tau * torch.log(kd.SKEW * p_t + (1 - kd.SKEW) * p_s)  # KDLoss divides by tau again
    skl = tau**2 * soft(_io(mix_logits), _io(t))  # KL(p_T || a p_T + (1 - a) p_S)
    assert torch.allclose(kd.kd_loss("skl", s, t, gold, tau), skl, atol=1e-5)
    assert not torch.allclose(kd.kd_loss("srkl", s, t, gold, tau), skl, atol=1e-3)
