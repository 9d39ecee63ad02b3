"""One-hot groups: detected, never broken by the attack, and violations counted when they occur."""

from __future__ import annotations

import numpy as np
import pandas as pd

from methodkit.tools.gbdt import attack, data, onehot, synth
from methodkit.tools.gbdt.victim import Victim


def _dummy_coded(n: int, seed: int) -> pd.DataFrame:
    """synth's table with 'colour' written as pandas.get_dummies does (colour_red, colour_green, ...)."""
    frame = synth.tabular(n, seed=seed)
    dummies = pd.get_dummies(frame.pop("colour"), prefix="colour").astype(int)
    return pd.concat([dummies, frame], axis=1)


def test_groups_detected_and_violations_counted():
    frame = _dummy_coded(200, 0)
    p = data.prepare(frame, label="label", seed=0)
    numeric = [p.index(c) for c in p.features if c not in p.categorical]
    groups = onehot.detect_groups(p.X_tr, p.features, numeric)
    assert {k: sorted(p.features[j] for j in v) for k, v in groups.items()} == {
        "colour": ["colour_blue", "colour_green", "colour_red"]
    }
    binary = onehot.binary_columns(p.X_tr, p.features, numeric)
    X = p.X_tr[:5].copy()
    assert onehot.violations(X, groups, binary)["onehot_violations"] == 0
    X[0, groups["colour"][0]] = 1 - X[0, groups["colour"][0]]  # one level flipped alone
    X[1, binary[0]] = 0.5
    counts = onehot.violations(X, groups, binary)
    assert counts["onehot_violations"] == 2 and counts["binary_violations"] == 1
    named = onehot.named_groups(["colour"], p.features, numeric)
    assert named == groups


def test_attack_on_dummy_coded_data_breaks_no_group():
    frame = _dummy_coded(400, 1)
    p = data.prepare(frame, label="label", seed=1)
    victim = Victim.from_json('{"num_boost_round": 30, "num_leaves": 15}', threads=1, seed=1)
    r = attack.run(p, victim, attack.AttackConfig(budget=0.1, eps=3.0, dims=5, dim_rank="random", iters=2, seed=1))
    X = r.poisoned_matrix()
    members = [p.index(c) for c in ("colour_blue", "colour_green", "colour_red")]
    assert np.all(X[:, members].sum(axis=1) == 1)
    assert r.plausibility["onehot_violations"] == 0 and r.plausibility["binary_violations"] == 0
    assert not {p.features[j] for j in r.dims.ravel() if j >= 0} & {p.features[j] for j in members}
