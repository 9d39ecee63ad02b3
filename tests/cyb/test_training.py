"""The training closure: cyb-dp's dual ascent, the collapse rule, a finetune's DK calibration."""

import numpy as np
import torch

from methodkit.tools.cyb.config import LossConfig
from methodkit.tools.cyb.data import Windows
from methodkit.tools.cyb.losses import slot_terms
from methodkit.tools.cyb.model import PauseLM, PauseModelConfig, calibrate_dk_bias
from methodkit.tools.cyb.training import PauseObjective, build_model, collapse_state


def _setup(budget, tau=0.05):
    cfg = LossConfig("cyb-dp", 2, tau=tau, budget=budget, tau_lr=0.5)
    model = build_model(PauseModelConfig(d_model=16, n_layers=1, n_heads=2, ctx=8, max_pauses=2), cfg, 0, "cpu")
    windows = Windows(np.random.default_rng(0).integers(0, 256, 200), 8)
    return cfg, model, PauseObjective(model, windows, cfg, 4, "cpu")


def test_dual_ascent_moves_tau_towards_the_budget():
    idx = np.arange(4)
    _, model, objective = _setup(budget=0.0)
    x, y = (torch.from_numpy(a) for a in objective.windows.batch(idx))
    with torch.no_grad():
        expected = float(slot_terms(model.group_logits(x), y, 256).expected_pauses().mean())
    objective(model, idx)
    assert abs(float(model.dp_tau) - (0.05 + 0.5 * expected)) < 1e-5  # above budget: tau rises
    _, model, objective = _setup(budget=2.0, tau=0.01)
    objective(model, idx)
    assert float(model.dp_tau) == 0.0  # far below budget: tau falls, clipped at 0
    assert objective.tokens_seen == 32


def test_collapse_rule():
    assert collapse_state(0.01, 2) == "never pauses"
    assert collapse_state(1.97, 2) == "always pauses K times"
    assert collapse_state(0.5, 2) is None


def test_calibrated_dk_starts_near_sigmoid_minus_two():
    torch.manual_seed(0)
    model = PauseLM(PauseModelConfig(d_model=16, n_layers=1, n_heads=2, ctx=8, max_pauses=2))
    with torch.no_grad():
        model.core.lm_head.weight.mul_(40.0)  # a confident model: large answer logits
    x = torch.randint(0, 256, (4, 8))
    calibrate_dk_bias(model, x)
    with torch.no_grad():
        d = torch.softmax(model.group_logits(x)[:, :, 0].double(), -1)[..., 256]
    log_odds = torch.log(d / (1 - d)).mean()
    assert abs(float(log_odds) + 2.0) < 1.0
