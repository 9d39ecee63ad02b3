"""Identifier columns (issue 35, item 3): an integer id with many levels and no order is split as categories."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from methodkit.core.errors import DataError
from methodkit.tools.cuvet.assign import assign
from methodkit.tools.cuvet.data import ID_MIN_LEVELS, CostSpec, id_like_columns, load_rct
from methodkit.tools.cuvet.model import fit

COSTS = CostSpec(arm_costs=[0, 1, 2])
N_VILL = 40
# the villages with an effect: a random half, so no threshold on the number separates them
GOOD = np.sort(np.random.default_rng(99).permutation(np.arange(1, N_VILL + 1))[: N_VILL // 2])


def _frame(n=20_000, seed=0):
    rng = np.random.default_rng(seed)
    vill = rng.integers(1, N_VILL + 1, n)
    t = rng.integers(0, 3, n)
    effect = np.where(np.isin(vill, GOOD), 0.3, 0.0) * (np.array([0.0, 1.0, 2.0])[t] / 2) ** 0.5
    y = (rng.random(n) < 0.2 + effect).astype(float)
    return pd.DataFrame({"villnum": vill, "age": rng.integers(18, 70, n), "x": rng.standard_normal(n), "t": t, "y": y})


def test_an_id_named_integer_column_is_detected_and_an_integer_count_is_not():
    f = _frame(3000)
    data = load_rct(f, "t", "y", COSTS)
    assert list(data.levels) == ["villnum"]  # age: integer with many levels, but its name is no id
    assert any("'villnum' holds 40 integer levels" in w and "--numeric villnum" in w for w in data.warnings)
    assert data.levels["villnum"] == [str(v) for v in range(1, N_VILL + 1)]  # integers, numeric order
    kept = load_rct(f, "t", "y", COSTS, numeric=("villnum",))
    assert kept.levels == {} and not any("villnum" in w for w in kept.warnings)
    forced = load_rct(f, "t", "y", COSTS, categorical=("age",), numeric=("villnum",))
    assert list(forced.levels) == ["age"]
    # the name rule: ids and codes, not words that merely end in the letters
    g = pd.DataFrame({c: np.arange(100) % 50 for c in ["hh_id", "userID", "villnum", "zipcode", "paid", "valid"]})
    assert id_like_columns(g, list(g.columns)) == ["hh_id", "userID", "villnum", "zipcode"]
    few = pd.DataFrame({"hh_id": np.arange(100) % (ID_MIN_LEVELS - 1), "code": np.linspace(0, 1, 100)})
    assert id_like_columns(few, list(few.columns)) == []  # too few levels; not integers
    with pytest.raises(DataError, match="not a feature"):
        load_rct(f, "t", "y", COSTS, categorical=("nope",))


def test_the_tree_splits_an_id_as_a_set_of_levels_and_recovers_the_planted_villages():
    f = _frame()
    model = fit(load_rct(f, "t", "y", COSTS), budget_frac=0.4, seed=0)
    root = model.nodes[0]
    assert root["leaf"] < 0 and root["feature"] == "villnum" and root.get("threshold") is None
    left = {int(v) for v in root["left_levels"]}
    side = left if len(left & set(GOOD)) > len(left) / 2 else set(range(1, N_VILL + 1)) - left
    assert len(side ^ set(GOOD)) <= 2  # the split is the planted set, up to a village or two
    # read as a number the villages cannot be separated: no split on villnum as a set
    as_number = fit(load_rct(f, "t", "y", COSTS, numeric=("villnum",)), budget_frac=0.4, seed=0)
    assert all(nd.get("left_levels") is None for nd in as_number.nodes if nd["leaf"] < 0)
    # assign reads the levels back, also from a float column (a missing cell makes pandas read floats)
    g = f.head(500).copy()
    t1, _ = assign(model, g, seed=1)
    g["villnum"] = g["villnum"].astype(float)
    g.loc[0, "villnum"] = np.nan
    t2, _ = assign(model, g, seed=1)
    pd.testing.assert_frame_equal(t1.iloc[1:], t2.iloc[1:])


def test_cli_categorical_and_numeric_flags(run_cli, tmp_path):
    f = _frame(4000)
    f.to_csv(tmp_path / "v.csv", index=False)
    base = ["cuvet-assign", "fit", tmp_path / "v.csv", "--treatment", "t", "--value", "y", "--arm-costs", "0,1,2"]
    base += ["--budget-frac", "0.4"]
    auto = run_cli([*base, "-o", tmp_path / "a.json"])
    assert auto.returncode == 0, auto.stderr
    assert b"'villnum' holds 40 integer levels" in auto.stderr
    assert "villnum" in json.loads((tmp_path / "a.json").read_text())["levels"]
    flags = run_cli([*base, "--numeric", "villnum", "--categorical", "age", "-o", tmp_path / "b.json"])
    assert flags.returncode == 0, flags.stderr
    assert b"villnum" not in flags.stderr
    assert list(json.loads((tmp_path / "b.json").read_text())["levels"]) == ["age"]


def test_a_test_table_is_coded_with_the_training_levels():
    """bench --test: a test file that lacks a village gets the training table's codes, not its own."""
    from methodkit.tools.cuvet.commands import rct

    f = _frame(3000)
    train = rct(f, "t", "y", COSTS, None)
    g = f[f.villnum != 1].reset_index(drop=True)
    own = rct(g, "t", "y", COSTS, None)
    test = rct(g, "t", "y", COSTS, None, levels=train.levels)
    j = train.features.index("villnum")
    want = np.array([train.levels["villnum"].index(str(v)) for v in g.villnum])
    assert np.array_equal(test.X[:, j], want) and not np.array_equal(own.X[:, j], want)
    assert not any("villnum" in w and "identifier" in w for w in test.warnings)


def test_cli_bench_codes_the_test_file_with_the_training_levels(run_cli, tmp_path):
    _frame(4000, 0).to_csv(tmp_path / "tr.csv", index=False)
    g = _frame(4000, 1)
    g[g.villnum != 1].to_csv(tmp_path / "te.csv", index=False)  # one village fewer: its own codes would shift
    out = run_cli(
        ["cuvet-assign", "bench", tmp_path / "tr.csv", "--test", tmp_path / "te.csv", "--treatment", "t"]
        + ["--value", "y", "--arm-costs", "0,1,2", "--budgets", "0.4", "--methods", "cuvet,uniform"]
        + ["-o", tmp_path / "b.csv"]
    )
    assert out.returncode == 0, out.stderr
    assert b"te.csv: feature 'villnum'" not in out.stderr  # coded by the training table, not detected anew
    rows = pd.read_csv(tmp_path / "b.csv")
    split = rows[(rows.method == "cuvet") & (rows.leaves > 1)]
    assert len(split) and (split.value > rows[rows.method == "uniform"].value.max()).all()


def test_balance_of_a_categorical_is_checked_per_level_not_on_its_codes():
    f = _frame(20_000, 3)
    # arm 2 never in the outer villages (1-10, 31-40): the codes' mean is unchanged, the levels are not balanced
    shifted = f.copy()
    outer = (shifted.villnum <= 10) | (shifted.villnum > 30)
    shifted.loc[outer & (shifted.t == 2), "t"] = 1
    as_number = load_rct(shifted, "t", "y", COSTS, numeric=("villnum",))
    assert not any("villnum (SMD" in w for w in as_number.warnings)  # a number: its mean is balanced
    assert any("villnum (SMD" in w for w in load_rct(shifted, "t", "y", COSTS).warnings)  # the level indicators
    # randomized arms: no warning, though 40 level indicators are tested per arm
    assert not any("SMD" in w for w in load_rct(f, "t", "y", COSTS).warnings)
