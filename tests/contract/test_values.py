"""Cell values (issue 22, items 7-9): a stray word in a numeric column, non-finite or overflowing
numbers, binary files given to text readers. Each case names the file, the row and the column."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from .contract_commands import LEAVES, call

GB_FAST = ["--lgb-params", '{"num_boost_round": 3, "num_leaves": 3}']


def _leaf(name):
    return next(leaf for leaf in LEAVES if leaf.id == name)


def _one_line(result, code=2):
    lines = result.stderr.strip().splitlines()
    assert result.code == code and len(lines) == 1, result
    return lines[0]


@pytest.fixture
def gbdt_csv(tmp_path, monkeypatch):
    from methodkit.tools.gbdt import synth

    monkeypatch.chdir(tmp_path)
    frame = synth.tabular(80, seed=0)
    column = next(c for c in frame.columns if c != "label" and np.issubdtype(frame[c].dtype, np.floating))
    return frame, column


def test_gbdt_stray_text_in_a_numeric_column_is_named(gbdt_csv, tmp_path):
    frame, column = gbdt_csv
    frame = frame.astype({column: object})
    frame.loc[5, column] = "abc"
    frame.to_csv(tmp_path / "t.csv", index=False)
    line = _one_line(call(_leaf("gbdt-poison eval"), ["t.csv", "--test", "t.csv", *GB_FAST]))
    assert f"t.csv: line 7: column '{column}' is numeric but for 'abc'" in line
    assert f"--categorical {column}" in line


def test_gbdt_infinite_cell_is_named(gbdt_csv, tmp_path):
    frame, column = gbdt_csv
    frame.loc[3, column] = np.inf
    frame.to_csv(tmp_path / "t.csv", index=False)
    line = _one_line(call(_leaf("gbdt-poison eval"), ["t.csv", "--test", "t.csv", *GB_FAST]))
    assert f"t.csv: line 5: column '{column}' is inf" in line


def test_cuvet_stray_text_is_a_warning_naming_the_cell(tmp_path, monkeypatch):
    from methodkit.tools.cuvet import data, synth

    frame, _ = synth.synthetic(300, 0)
    column = next(c for c in frame.columns if c.startswith("x") or c.startswith("f"))
    frame = frame.astype({column: object})
    frame.loc[4, column] = "abc"
    frame.attrs["source"] = "s.csv"
    frame.attrs["format"] = "csv"
    warnings = data.stray_text_warnings(frame, [column])
    assert warnings == [
        f"s.csv: line 6: column '{column}' is numeric but for 'abc', so it is treated as categorical; "
        "fix the cell if that is a typo"
    ]
    assert data.stray_text_warnings(frame.assign(**{column: "text"}), [column]) == []


def test_casper_scores_beyond_the_float_range_are_named(tmp_path):
    from methodkit.core.errors import DataError
    from methodkit.tools.casper.solve import check_scores

    class Program:
        n_user = 3
        user_names = ["a", "b", "c"]

    scores = np.zeros((2, 3))
    scores[1, 2] = 1e308
    with pytest.raises(DataError, match=r"s.npy: instance 1, variable c: score 1e\+308 is beyond"):
        check_scores(Program(), scores, "s.npy")
    assert check_scores(Program(), scores[:1], "s.npy").shape == (1, 3)


def test_concord_nan_in_a_spec_is_named(tmp_path, monkeypatch):
    from tests.concord.conftest import SMALL_CLUSTER, SMALL_MODEL  # noqa: PLC0415 - small fixtures

    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(SMALL_MODEL).replace("hidden: 1024", "hidden: .nan"))
    (tmp_path / "c.json").write_text(json.dumps(SMALL_CLUSTER))
    line = _one_line(call(_leaf("concord-plan plan"), ["m.yaml", "c.json", "--no-cache"]))
    assert "m.yaml" in line and "hidden: expected a finite number, got nan" in line


@pytest.mark.parametrize(
    "argv",
    [["irt-sim", "draw", "--profiles", "bin.toml"], ["dar-backdoor", "apply", "x.npz", "--rules", "bin.jsonl"]],
    ids=lambda a: " ".join(a[:2]),
)
def test_binary_file_to_a_text_reader(argv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("bin.toml", "bin.jsonl"):
        (tmp_path / name).write_bytes(bytes(range(256)))
    np.savez(tmp_path / "x.npz", x=np.zeros((2, 4, 4), np.uint8), y=np.zeros(2, np.int64))
    line = _one_line(call(_leaf(" ".join(argv[:2])), argv[2:]))
    assert "bin." in line and "not UTF-8 text" in line, line


def test_pickled_npy_is_refused_without_advice_to_unpickle(tmp_path):
    from methodkit.core import io
    from methodkit.core.errors import DataError

    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataError) as info:
        io.read_arrays(tmp_path / "o.npy")
    assert "allow_pickle" not in info.value.message and "pickle" in info.value.message
    (tmp_path / "g.npz").write_bytes(b"PK\x03\x04 broken zip")
    with pytest.raises(DataError, match="g.npz: not a NPY/NPZ file"):
        io.read_arrays(tmp_path / "g.npz")
