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


def _graded(n: int, seed: int) -> pd.DataFrame:
    """A dummy-coded 'grade' (4 levels, the strongest predictor) beside three weak numeric columns."""
    rng = np.random.default_rng(seed)
    grade = rng.integers(0, 4, n)
    y = (rng.random(n) < np.array([0.1, 0.3, 0.6, 0.85])[grade]).astype(int)
    frame = pd.DataFrame({f"x{j}": np.round(rng.normal(0.3 * y * (j == 0), 1.0), 3) for j in range(3)})
    for level, name in enumerate(["a", "b", "c", "d"]):
        frame[f"grade_{name}"] = (grade == level).astype(int)
    frame["label"] = y
    return frame


def test_a_top_gain_group_switches_level_and_no_row_breaks_a_group():
    """Issue 34 item 1: a one-hot group moves as one categorical (a level switch), never cell by cell."""
    from methodkit.tools.gbdt import switch

    p = data.prepare(_graded(500, 3), label="label", seed=3)
    victim = Victim.from_json('{"num_boost_round": 30, "num_leaves": 15}', threads=1, seed=3)
    r = attack.run(p, victim, attack.AttackConfig(budget=0.1, eps=2.0, dims=2, iters=3, seed=3))
    s = r.summary()
    assert s["switch_groups"] == ["grade"] and s["switched_rows"] > 0, s
    assert r.plausibility["onehot_violations"] == 0 and r.plausibility["binary_violations"] == 0
    members = [p.index(f"grade_{name}") for name in "abcd"]
    frame = r.poisoned_frame()
    assert np.all(frame[[p.features[j] for j in members]].sum(axis=1) == 1)
    X = r.poisoned_matrix()
    moved = np.flatnonzero(np.any(r.levels != r.switches.S0, axis=1))
    for b in moved:
        row = r.rows[b]
        new = int(np.argmax(X[row, members]))
        assert new != int(np.argmax(p.X_tr[row, members]))
        same_class = p.y_tr == p.y_tr[row]
        assert p.X_tr[same_class, members[new]].mean() >= switch.MIN_SHARE  # a level common in its class
    # a switched row's manifest entry names the group and its two changed member cells
    entry = r.to_dict()["rows"][int(moved[0])]
    assert "grade" in entry["dims"]
    assert sum(c.startswith("grade_") for c in entry["changed"]) == 2
    # the reported victim is trained on the written file, switches included
    np.testing.assert_array_equal(data.whole(frame, frame, label="label").X_tr, r.released_matrix()[0])


def test_rare_levels_are_not_switch_targets():
    from methodkit.tools.gbdt import switch

    X = np.zeros((200, 3))
    X[:, 0] = 1
    X[:3, 0], X[:3, 2] = 0, 1  # level 2 held by 3 of 200 rows of class 0 (1.5%), level 1 by none
    y = np.zeros(200)
    sw = switch.build(X, y, np.arange(5), {"g": [0, 1, 2]}, ["g"])
    assert sw.allowed[:, 0].tolist() == [[True, False, True]] * 5
    rows, groups, levels = sw.candidates(sw.S0)
    assert set(zip(rows.tolist(), levels.tolist())) == {(0, 0), (1, 0), (2, 0), (3, 2), (4, 2)}
    switched = sw.apply(X[rows], groups, levels)
    assert np.all(switched.sum(axis=1) == 1)


def test_a_prefix_shared_by_two_groups_finds_both():
    """'status_A11' and 'status_sex_A91' (Credit-g dummy-coded): the longer prefix claims its columns first."""
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 3, 60), rng.integers(0, 2, 60)
    frame = pd.DataFrame({f"status_A1{i}": (a == i).astype(int) for i in range(3)})
    for i in range(2):
        frame[f"status_sex_A9{i}"] = (b == i).astype(int)
    frame["x"], frame["label"] = rng.normal(size=60), rng.integers(0, 2, 60)
    p = data.prepare(frame, label="label", seed=0)
    groups = onehot.detect_groups(p.X_tr, p.features, list(range(len(p.features))))
    assert {k: [p.features[j] for j in v] for k, v in groups.items()} == {
        "status": ["status_A10", "status_A11", "status_A12"],
        "status_sex": ["status_sex_A90", "status_sex_A91"],
    }
