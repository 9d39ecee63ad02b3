"""Sanity check of the attack/victim/metric plumbing: a visible patch with dirty labels must implant.

If BadNets does not reach a high ASR here, the trigger is applied differently at train and test
time, the victim does not see the changed labels, or ASR is computed on the wrong images. Measured: ASR 0.97 (C-Acc 0.725) against 0.05 for the clean control.
"""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.dar import data
from methodkit.tools.dar.evaluate import evaluate
from methodkit.tools.dar.poison import dirty_label
from methodkit.tools.dar.victim import VictimConfig, fit


@pytest.mark.slow  # two trainings, about 40 s of CPU; `make test-all` runs it
def test_badnets_implants_on_a_tiny_setup():
    x, y = data.load("fashion-mnist", "train", 1000)
    xt, yt = data.load("fashion-mnist", "test", 600)
    p = dirty_label(
        x, y, "badnets", target=0, budget=100, classes=10, seed=0
    )  # 10%: a plumbing check, not a budget study
    assert (p.labels != y).sum() == 100 and (p.images[p.indices] != x[p.indices]).any(axis=(1, 2)).all()
    cfg = VictimConfig(arch="cnn-xs", width=8, epochs=4, batch_size=32)
    poisoned, _ = fit(p.images, p.labels, cfg, 10)
    clean, _ = fit(x, y, cfg, 10)
    attacked, control = evaluate(poisoned, xt, yt, "badnets", 0), evaluate(clean, xt, yt, "badnets", 0)
    assert attacked["c_acc"] > 0.6 and control["c_acc"] > 0.6
    assert attacked["asr"] > 0.8, attacked  # the patch took hold
    assert control["asr"] < 0.2, control  # ...and the patch alone does not make the target
    assert np.isclose(attacked["asr"] + attacked["r_acc"], 1, atol=0.2)
