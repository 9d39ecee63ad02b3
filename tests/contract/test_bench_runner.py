"""bench/run_all.py (`make bench`): benchmark lines become table rows, and a run of one method keeps the
other methods' sections of bench/RESULTS.md. No benchmark is run: run_one is replaced."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def runner(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("run_all", REPO / "bench" / "run_all.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "RESULTS", tmp_path / "RESULTS.md")
    monkeypatch.setattr(module, "methods", lambda: ["alpha", "beta", "gamma"])
    return module


def test_rows_are_the_five_column_lines(runner):
    out = "# a note\ncase size ours_s ref_s ratio\nkernel_vs_numpy 1000x5 0.172 2.014 11.7 identical=True\n488 user 0.4 sys 3 wall\n"
    rows, other = runner.parse_rows(out)
    assert rows == [["kernel_vs_numpy", "1000x5", "0.172", "2.014", "11.7", "identical=True"]]
    assert other == ["# a note", "488 user 0.4 sys 3 wall"]


def test_one_method_keeps_the_others(runner, monkeypatch):
    calls = []

    def fake(method):
        calls.append(method)
        return f"## {method}\n\nfresh {method}\n", 0

    monkeypatch.setattr(runner, "run_one", fake)
    assert runner.main(["alpha"]) == 0
    first = runner.RESULTS.read_text()
    assert "fresh alpha" in first and "Not run yet: `make bench METHOD=beta`" in first
    assert "not run yet (`make bench METHOD=name` runs one): beta, gamma" in first
    assert runner.main(["beta"]) == 0
    second = runner.RESULTS.read_text()
    assert "fresh alpha" in second and "fresh beta" in second, "alpha's section was dropped by a run of beta"
    assert "kept from an earlier run (its date is in its section): alpha" in second
    assert calls == ["alpha", "beta"]


def test_unknown_method_exits_2_and_writes_nothing(runner, capsys):
    assert runner.main(["nope"]) == 2
    assert "no bench/<method>/bench.py for nope" in capsys.readouterr().err
    assert not runner.RESULTS.exists()
