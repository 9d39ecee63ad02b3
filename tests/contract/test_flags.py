"""Flags, for every command of every executable (issue 22, item 10): refused before input is read.

--seed takes 0 .. 2**63 - 1 everywhere (the range numpy's SeedSequence and torch both accept); a
size that cannot fit in memory is refused with the estimate and the flag to lower; levels are in
(0, 1); a cache folder that is a file is a usage error. The input on these command lines does not
exist, so a flag checked after reading the input would be reported as a missing file instead.
"""

from __future__ import annotations

import pytest

from methodkit.core.errors import UsageError
from methodkit.core.memory import guard_memory, human_bytes

from .contract_commands import LEAVES, call, required_args

SEEDED = [leaf for leaf in LEAVES if leaf.has("--seed")]


@pytest.mark.parametrize("leaf", SEEDED, ids=lambda leaf: leaf.id)
def test_seed_out_of_range_is_a_usage_error(leaf, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for value in ("-1", str(2**63)):
        result = call(leaf, [*required_args(leaf), "--seed", value])
        lines = result.stderr.strip().splitlines()
        assert result.code == 2 and len(lines) == 1, result
        assert "Invalid value for '--seed'" in lines[0] and "0<=x<=9223372036854775807" in lines[0], lines


def _leaf(name):
    return next(leaf for leaf in LEAVES if leaf.id == name)


@pytest.mark.parametrize("verb", ["pls-test test", "pls-test power"])
@pytest.mark.parametrize("alpha", ["2", "-1", "0", "1"])
def test_alpha_is_a_level(verb, alpha, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    leaf = _leaf(verb)
    result = call(leaf, [*required_args(leaf), "--alpha", alpha])
    assert result.code == 2 and "Invalid value for '--alpha'" in result.stderr, result


def test_concord_cache_on_a_regular_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cache").write_text("not a folder\n")
    leaf = _leaf("concord-plan plan")
    result = call(leaf, [*required_args(leaf), "--cache", "cache"])
    assert result.code == 2 and "Invalid value for '--cache'" in result.stderr and "is a file" in result.stderr


def test_a_size_that_cannot_fit_is_refused_with_the_estimate(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = call(_leaf("cbf-sim task"), ["--trials", "100000000", "-o", "t.csv"])
    lines = result.stderr.strip().splitlines()
    assert result.code == 2 and len(lines) == 1, result
    assert "--trials: a task table of 400,000,000 rows needs about" in lines[0] and "lower --trials" in lines[0]
    assert not (tmp_path / "t.csv").exists()


def test_guard_memory():
    guard_memory(10 * 2**20, "a table", "--rows", available=2**30)
    with pytest.raises(UsageError, match=r"--rows: a table needs about 2\.0 GB of memory, more than the 819\.2 MB"):
        guard_memory(2 * 2**30, "a table", "--rows", available=2**30)
    assert human_bytes(1536) == "1.5 KB"
