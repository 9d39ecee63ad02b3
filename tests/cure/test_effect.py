"""The paper's qualitative effect at small size: CURE removes most of the forget contributor's style
from the policy (fir well below the original's 1) and its gate is higher on styled chunks (which
conflict with retained data) than on plain same-policy chunks (shared support)."""

from __future__ import annotations

import numpy as np


def test_cure_removes_style_influence_and_gates_styled_chunks_higher(tiny_ds):
    from methodkit.tools.cure.audit import fir
    from methodkit.tools.cure.forget_run import forget
    from methodkit.tools.cure.train import train
    from methodkit.tools.cure.unlearn import ForgetConfig

    fid = tiny_ds.ids_of("F-mix")
    u = np.asarray(tiny_ds.meta["style_u"]["F-mix"])
    original = train(tiny_ds, "td3bc", steps=400, hidden=32)[0]
    retrain = train(tiny_ds, "td3bc", steps=400, hidden=32, exclude=fid)[0]
    cfg = ForgetConfig(steps=100, baseline_steps=100, calib_trajs=10)
    unlearned, scores, result = forget(original, tiny_ds, fid, cfg, original_steps=400)
    assert fir(original, original, retrain, tiny_ds, fid, u) == 1.0
    assert fir(unlearned, original, retrain, tiny_ds, fid, u) < 0.8
    means = result.gate_means
    assert means["forget:F-mix:styled"] > means["forget:F-mix:plain"] + 0.1
    assert np.isfinite(scores.overlap[scores.role == "forget"]).all()
