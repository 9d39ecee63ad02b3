"""JSONL inputs, for every command of every executable (issue 22, item 6 for JSON Lines).

A JSONL table read through core.io that was cut short (last line without a newline), or has a short
record (a key left out) or a ragged one (a key more or misspelt), is refused with the file and line,
as a cut or ragged CSV is (test_inputs.py). Commands are called in-process.
"""

from __future__ import annotations

import pytest

from methodkit.core import io

from .contract_commands import call
from .test_inputs import WITH_INPUT, _with_input

CUT = {
    "truncated": (b'{"a": 1, "b": 2}\n{"a": 3, "b": 4}', "line 2: the last line has no newline"),
    "short-record": (b'{"a": 1, "b": 2}\n{"a": 3}\n{"a": 5, "b": 6}\n', "line 2: expected 2 fields like line 1"),
    "ragged-record": (b'{"a": 1, "b": 2}\n{"a": 3, "B": 4}\n', "line 2: expected 2 fields like line 1"),
}


@pytest.fixture
def reads(monkeypatch):
    """(name, records must share keys) of every table or JSON Lines read through core.io."""
    seen = []
    for name in ("read_table", "read_jsonl"):
        original = getattr(io, name)

        def spy(source, *args, _original=original, _name=name, **kwargs):
            uniform = _name == "read_table" or kwargs.get("same_keys", False)
            seen.append((getattr(source, "name", str(source)), uniform))
            return _original(source, *args, **kwargs)

        monkeypatch.setattr(io, name, spy)
    return seen


@pytest.mark.parametrize("leaf", WITH_INPUT, ids=lambda leaf: leaf.id)
@pytest.mark.parametrize("case", sorted(CUT))
def test_a_cut_or_ragged_jsonl_table_is_refused_with_its_line(leaf, case, tmp_path, monkeypatch, reads):
    monkeypatch.chdir(tmp_path)
    content, message = CUT[case]
    (tmp_path / "cut.jsonl").write_bytes(content)
    result = call(leaf, _with_input(leaf, "cut.jsonl"))
    assert result.code == 2, result
    # a table (or records that must share their keys) refuses every case; a list of records only a cut one
    if ("cut.jsonl", True) in reads or (case == "truncated" and ("cut.jsonl", False) in reads):
        assert f"cut.jsonl: {message}" in result.stderr, result
