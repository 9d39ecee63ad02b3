"""The attack as a library: constraints hold, results are reproducible, and the paper's effect shows."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.errors import DataError, UsageError
from methodkit.tools.gbdt import attack, data, synth
from methodkit.tools.gbdt.victim import Victim

from .helpers import problem


def _victim(seed=0):
    return Victim.from_json('{"num_boost_round": 30, "num_leaves": 15}', threads=1, seed=seed)


@pytest.fixture(scope="module")
def small_result():
    p = problem(400, seed=0)
    cfg = attack.AttackConfig(budget=0.08, eps=1.5, iters=2, q=2, seed=0)
    return attack.run(p, _victim(), cfg)


def test_constraints_hold(small_result):
    r, p = small_result, small_result.problem
    assert len(r.rows) == int(0.08 * len(p.y_tr))
    assert r.feasible.all()
    assert np.all(r.radius <= r.config.eps * (1 + 1e-6))
    frame = r.poisoned_frame()
    clean = p.frame.reset_index(drop=True)  # the release keeps every row of the train file
    # labels byte-identical, categorical and non-chosen columns untouched, only chosen rows changed
    assert frame[p.label].equals(clean[p.label])
    moved_cols = {p.features[j] for j in r.dims.ravel() if j >= 0}
    for column in clean.columns:
        changed = np.flatnonzero(~(frame[column].astype(str) == clean[column].astype(str)).to_numpy())
        if column not in moved_cols:
            assert changed.size == 0, column
        else:
            assert set(changed) <= set(p.tr_rows[r.rows].tolist())
    # integer column stays integer, values inside the train range
    assert frame["count"].dtype == clean["count"].dtype
    for column in moved_cols:
        assert frame[column].min() >= clean[column].min() and frame[column].max() <= clean[column].max()
    assert r.fits == 1 + r.config.n_evaluations


def test_manifest_records_changes(small_result):
    m = small_result.to_dict()
    assert m["n_poison"] == len(m["rows"])
    assert set(m["chosen_dims"]) == set(m["dims"])
    assert m["clean"]["test_f1"] is not None and len(m["trace"]) == 1 + small_result.config.iters
    row = next(r for r in m["rows"] if r["changed"])
    column, change = next(iter(row["changed"].items()))
    assert small_result.problem.frame[column].iloc[row["file_row"]] == change["from"]
    assert 0.0 <= m["implausible_fraction"] <= 1.0


def test_same_seed_same_result():
    p = problem(300, seed=1)
    cfg = attack.AttackConfig(budget=0.05, eps=1.0, iters=1, q=2, seed=4)
    a, b = attack.run(p, _victim(), cfg), attack.run(p, _victim(), cfg)
    assert np.array_equal(a.poisoned, b.poisoned) and np.array_equal(a.rows, b.rows)
    assert a.after == b.after


def test_refit_oracle_and_local_dims_run_and_stay_feasible():
    p = problem(300, seed=2)
    cfg = attack.AttackConfig(budget=0.05, eps=1.0, iters=2, q=1, oracle="refit", refit_every=1, dim_rank="local")
    r = attack.run(p, _victim(), cfg)
    assert r.feasible.all()
    assert r.dims.shape == (len(r.rows), 3)
    # the final metrics come from a true retrain of the written data
    booster = _victim().fit(*r.released_matrix(), p.cat_idx)
    from methodkit.tools.gbdt.victim import metrics

    assert metrics(booster, p.X_te, p.y_te)["f1"] == r.after["test_f1"]


def test_release_keeps_every_row_and_reports_the_victim_of_the_written_file():
    """Issue 34 item 2: validation rows untouched in the output; drop measured against the same rows unpoisoned."""
    from methodkit.tools.gbdt.victim import metrics

    p = problem(300, seed=5)
    cfg = attack.AttackConfig(budget=0.1, eps=2.0, iters=2, seed=5)
    r = attack.run(p, _victim(), cfg)
    frame = r.poisoned_frame()
    assert len(frame) == len(p.frame) and r.summary()["released"] == "all rows"
    kept = p.frame.iloc[p.v_rows].reset_index(drop=True)
    assert frame.iloc[p.v_rows].reset_index(drop=True).equals(kept)
    # the written file, encoded as eval reads it, is the matrix the reported victim was trained on
    written = data.whole(frame, synth.tabular(300, seed=1005), label="label")
    X, y = r.released_matrix()
    np.testing.assert_array_equal(written.X_tr, X)
    np.testing.assert_array_equal(written.y_tr, y)
    poisoned = _victim().fit(X, y, p.cat_idx)
    assert metrics(poisoned, p.X_te, p.y_te)["f1"] == r.after["test_f1"]
    unpoisoned = _victim().fit(*r.released_matrix(poisoned=False), p.cat_idx)
    assert metrics(unpoisoned, p.X_te, p.y_te)["f1"] == r.clean["test_f1"]
    assert r.clean["n_train"] == r.after["n_train"] == len(p.frame)
    # --drop-validation: the train part only, and the reported victims are the attacker's
    d = attack.run(p, _victim(), attack.AttackConfig(budget=0.1, eps=2.0, iters=2, seed=5, drop_validation=True))
    assert len(d.poisoned_frame()) == len(p.tr_rows)
    assert d.after == d.attacker["poisoned"] and d.clean == d.attacker["clean"]
    np.testing.assert_array_equal(d.poisoned, r.poisoned)  # the search is the same; only the release differs
    dropped = _victim().fit(*d.released_matrix(), p.cat_idx)
    assert metrics(dropped, p.X_te, p.y_te)["f1"] == d.after["test_f1"]


def test_influence_selected_gain_ranked_attack_beats_random_baseline():
    """The paper's qualitative effect at small scale: mean test-F1 drop of ours exceeds random rows+dims."""
    drops = {"ours": [], "random": []}
    for seed in (0, 1, 2):
        p = data.prepare(
            synth.tabular(600, seed=seed),
            synth.tabular(2000, seed=seed + 1000),
            label="label",
            val_frac=0.25,
            seed=seed,
        )
        victim = Victim.from_json('{"num_boost_round": 50, "num_leaves": 15}', threads=1, seed=seed)
        for name, (selection, ranking) in (("ours", ("boostin", "gain")), ("random", ("random", "random"))):
            cfg = attack.AttackConfig(
                budget=0.15, eps=3.0, iters=4, q=3, influence=selection, dim_rank=ranking, seed=seed
            )
            r = attack.run(p, victim, cfg)
            assert r.feasible.all()
            drops[name].append(r.clean["test_f1"] - r.after["test_f1"])
    assert np.mean(drops["ours"]) >= np.mean(drops["random"]) + 0.02, drops
    assert np.mean(drops["ours"]) > 0.02, drops


# ---------------------------------------------------------------- bad inputs


def test_bad_inputs_raise_typed_errors():
    frame = synth.tabular(200, seed=0)
    three = frame.assign(label=np.arange(200) % 3)
    with pytest.raises(DataError, match="binary labels required; found 3 classes in 'label'"):
        data.prepare(three)
    with pytest.raises(DataError, match="found only class"):
        data.prepare(frame.assign(label=1))
    with pytest.raises(DataError, match="positive class 'yes' not found"):
        data.prepare(frame, positive="yes")
    with pytest.raises(DataError, match="column 'nope' not found"):
        data.prepare(frame, label="nope")
    with pytest.raises(DataError, match="no mutable numeric column"):
        data.prepare(frame, immutable=["x0", "x1", "x2", "x3", "count"])
    p = data.prepare(frame, seed=0)
    with pytest.raises(UsageError, match="--dims 9 exceeds the 5 mutable"):
        attack.run(p, _victim(), attack.AttackConfig(dims=9))
    with pytest.raises(DataError, match="less than one row"):
        attack.run(p, _victim(), attack.AttackConfig(budget=0.001))
    with pytest.raises(UsageError, match="--eps must be > 0"):
        attack.run(p, _victim(), attack.AttackConfig(eps=0))
    with pytest.raises(UsageError, match="not a mutable numeric column"):
        attack.run(p, _victim(), attack.AttackConfig(dims_list=["colour"]))
    with pytest.raises(UsageError, match="ablation of --search zo"):
        attack.run(p, _victim(), attack.AttackConfig(probe_projection=False))
    with pytest.raises(UsageError, match="--search must be one of threshold, zo"):
        attack.run(p, _victim(), attack.AttackConfig(search="grid"))


def test_rows_with_missing_chosen_values_are_not_candidates():
    frame = synth.tabular(300, seed=3)
    frame.loc[::2, "x0"] = np.nan
    p = data.prepare(frame, seed=0)
    r = attack.run(p, _victim(), attack.AttackConfig(budget=0.05, iters=1, q=1, dims_list=["x0", "x1"]))
    assert np.all(np.isfinite(p.X_tr[r.rows, p.index("x0")]))
