"""Dual clip, KL directions, GAE: known answers."""

from __future__ import annotations

import numpy as np
import torch

from methodkit.tools.craft import losses


def test_dual_clip_known_values():
    ratio = torch.tensor([0.5, 1.0, 1.5, 0.5, 1.5, 5.0])
    adv = torch.tensor([1.0, 1.0, 1.0, -1.0, -1.0, -1.0])
    got = losses.dual_clip(ratio, adv, eps=0.2, c=3.0)
    # A >= 0: min(rho A, clip(rho) A); A < 0: max(min(rho A, clip(rho) A), 3 A)
    want = torch.tensor([0.5, 1.0, 1.2, -0.8, -1.5, -3.0])
    torch.testing.assert_close(got, want)


def test_kl_directions():
    p = torch.log(torch.tensor([[0.5, 0.5]]))
    q = torch.log(torch.tensor([[0.9, 0.1]]))
    fwd = 0.5 * np.log(0.5 / 0.9) + 0.5 * np.log(0.5 / 0.1)
    rev = 0.9 * np.log(0.9 / 0.5) + 0.1 * np.log(0.1 / 0.5)
    assert abs(float(losses.kl(p, q, "fwd")[0]) - fwd) < 1e-6
    assert abs(float(losses.kl(p, q, "rev")[0]) - rev) < 1e-6
    assert abs(float(losses.kl(p, q, "sym")[0]) - 0.5 * (fwd + rev)) < 1e-6
    # forward KL punishes a student that drops a candidate the teacher supports
    assert fwd > rev


def test_gae_known_answer():
    reward = np.array([1.0, 0.0, 2.0, 1.0])
    value = np.array([0.5, 0.5, 0.5, 0.0])
    last = np.array([False, False, True, True])
    adv, ret = losses.gae(reward, value, last, gamma=0.9, lam=0.5)
    d2 = 2.0 - 0.5
    d1 = 0.0 + 0.9 * 0.5 - 0.5
    d0 = 1.0 + 0.9 * 0.5 - 0.5
    want = [d0 + 0.45 * (d1 + 0.45 * d2), d1 + 0.45 * d2, d2, 1.0]
    np.testing.assert_allclose(adv, want)
    np.testing.assert_allclose(ret, adv + value)
