"""The one core change this method made: metrics.route_metrics(..., comfort=False) (and suite's pass-through)."""

from __future__ import annotations

import math

import numpy as np

from methodkit.core.sim.highway import metrics, suite


def _record():
    t = 30
    boxes = np.zeros((t, 2, 5))
    boxes[:, 0, 0] = np.arange(t) * 4.0
    boxes[:, 1, 0] = 50 + np.arange(t) * 5.0
    boxes[..., 3], boxes[..., 4] = 5.0, 2.0
    return {"boxes": boxes, "present": np.ones((t, 2), bool), "events": np.zeros((0, 3), np.int64),
            "route": np.array([0.0, 200.0]), "dt": 0.2}  # fmt: skip


def test_comfort_false_changes_only_comfort():
    full = metrics.route_metrics(_record())
    fast = metrics.route_metrics(_record(), comfort=False)
    assert math.isnan(fast.comfort) and full.comfort == 1.0
    for name in ("rc", "penalty", "ds", "success", "ended_by", "infractions"):
        assert getattr(full, name) == getattr(fast, name)
    assert suite.exit_route_metrics(_record(), comfort=False).ds == full.ds
    assert suite.exit_route_metrics(_record()).comfort == full.comfort
