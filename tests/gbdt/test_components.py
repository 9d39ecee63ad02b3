"""Tests that guard the paper's two named components: the split-gain column ranking and the
projected zeroth-order probes. Each fails when its component is reversed or removed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from methodkit.tools.gbdt import attack, data, dims
from methodkit.tools.gbdt.oracle import Oracle
from methodkit.tools.gbdt.victim import Victim

from .helpers import problem


def _victim(seed=0, rounds=30):
    return Victim.from_json(f'{{"num_boost_round": {rounds}, "num_leaves": 15}}', threads=1, seed=seed)


def _one_signal_table(n: int, seed: int) -> pd.DataFrame:
    """'signal' carries the label; 'noise_a' and 'noise_b' carry nothing (so they get the lowest gain)."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.4).astype(int)
    return pd.DataFrame(
        {
            "noise_a": np.round(rng.standard_normal(n), 4),
            "signal": np.round(1.6 * y + rng.standard_normal(n), 4),
            "noise_b": np.round(rng.standard_normal(n), 4),
            "label": y,
        }
    )


def test_by_gain_takes_the_highest_gains_first():
    gains = np.array([5.0, 50.0, 1.0, 20.0, 99.0])
    # column 4 is not mutable; ties would fall back to column order
    assert dims.by_gain(gains, [0, 1, 2, 3], 2) == [1, 3]
    assert dims.by_gain(np.array([2.0, 2.0, 1.0]), [0, 1, 2], 1) == [0]


def test_attack_moves_the_top_gain_column_and_it_is_the_one_that_hurts():
    """The gain-chosen column is the clean victim's top-gain one, and moving it drops F1 more than moving
    the lowest-gain column (a ranking reversed to lowest-first chooses a noise column and drops nothing)."""
    drops = {"gain": [], "lowest": []}
    for seed in (0, 1):
        p = data.prepare(
            _one_signal_table(500, seed), _one_signal_table(1500, seed + 100), label="label", val_frac=0.25, seed=seed
        )
        victim = _victim(seed)
        gains = victim.fit(p.X_tr, p.y_tr, p.cat_idx).feature_importance(importance_type="gain")
        top = max(range(len(p.features)), key=lambda j: gains[j])
        bottom = min(range(len(p.features)), key=lambda j: gains[j])
        assert p.features[top] == "signal"
        base = dict(budget=0.15, eps=3.0, iters=3, influence="boostin", seed=seed)
        ours = attack.run(p, victim, attack.AttackConfig(dims=1, dim_rank="gain", **base))
        assert {p.features[j] for j in ours.dims.ravel()} == {"signal"}
        lowest = attack.run(p, victim, attack.AttackConfig(dims_list=[p.features[bottom]], **base))
        drops["gain"].append(ours.clean["test_f1"] - ours.after["test_f1"])
        drops["lowest"].append(lowest.clean["test_f1"] - lowest.after["test_f1"])
    assert np.mean(drops["gain"]) >= np.mean(drops["lowest"]) + 0.03, drops


def _probed_points(monkeypatch, config: attack.AttackConfig):
    """Run a zo attack and return (region, every point handed to the oracle, in standard units)."""
    seen: dict = {"region": None, "points": []}
    real_build, real_many = attack.build_region, Oracle.many

    def capture_region(*args, **kwargs):
        seen["region"] = real_build(*args, **kwargs)
        return seen["region"]

    def recording_many(self, rows, cols, values_list):
        seen["points"].extend(np.array(v, dtype=np.float64) for v in values_list)
        return real_many(self, rows, cols, values_list)

    monkeypatch.setattr(attack, "build_region", capture_region)
    monkeypatch.setattr(Oracle, "many", recording_many)
    attack.run(problem(300, seed=3), _victim(3), config)
    region = seen["region"]
    return region, [region.to_std(values) for values in seen["points"]]


@pytest.mark.parametrize("projection", [True, False])
def test_every_zo_probe_lies_in_the_feasible_region(monkeypatch, projection):
    """Probes x ± mu·u with mu = 2·eps leave the eps-ellipsoid unless projected; every point the oracle
    is asked about must be feasible. The ablation (projection off) shows the check catches a stray probe."""
    config = attack.AttackConfig(
        budget=0.08, eps=0.5, iters=2, q=2, mu=2.0, search="zo", probe_projection=projection, seed=3
    )
    region, points = _probed_points(monkeypatch, config)
    assert len(points) == config.n_evaluations
    outside = sum(int((~region.inside(Z, tol=1e-5)).sum()) for Z in points)
    if projection:
        assert outside == 0
    else:
        assert outside > 0
