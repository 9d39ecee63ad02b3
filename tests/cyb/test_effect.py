"""End to end at small size: the learned stopping policy follows the compute pressure of the loss.

The paper's headline (CYB beats ce at equal data) is not reproduced at this scale (docs/cyb.md: B1
missed); what training must show is that the sequential decision responds to its cost: a heavy
cost per pause (cyb-dp) drives pauses to ~0, and cyb-va's prior over stopping slots moves them."""

import torch

from methodkit.core.text.tokens import build
from methodkit.core.train import TrainConfig
from methodkit.tools.cyb.config import LossConfig
from methodkit.tools.cyb.data import ArithSpec, load_source
from methodkit.tools.cyb.model import PauseModelConfig
from methodkit.tools.cyb.training import run_training


def test_stopping_policy_follows_compute_pressure(tmp_path):
    torch.set_num_threads(1)
    tokens, _ = build(load_source("arith", 0, ArithSpec(problems=1500, per_document=30)), "bytes", val=0.1, seed=0)
    model = PauseModelConfig(d_model=32, n_layers=1, n_heads=2, ctx=32, max_pauses=2)
    settings = {
        "late-prior": LossConfig("cyb-va", 2, beta=1.0, prior="0.02,0.02,0.96"),
        "early-prior": LossConfig("cyb-va", 2, beta=1.0, prior="0.96,0.02,0.02"),
        "costly": LossConfig("cyb-dp", 2, tau=1.0),
    }
    pauses = {}
    for name, loss in settings.items():
        train = TrainConfig(steps=40, batch_size=8, lr=5e-3, weight_decay=0.1, beta2=0.95, warmup=5, log_every=40)
        pauses[name] = run_training(tokens, tmp_path / name, loss, model, train, val_windows=16).val["expected_pauses"]
    assert pauses["late-prior"] > 1.5 and pauses["early-prior"] < 0.3, pauses
    assert pauses["costly"] < 0.05, pauses
