"""Inputs, for every command of every executable (issue 22, items 6-9).

A binary or garbage file given as any positional input is one line, exit 2, naming the file, and
never advice to unpickle; a table read through core.io that was cut short (last line without a
newline) or has a short row is refused with the file and line. Commands are called in-process:
every one fails on its input long before it would start work.
"""

from __future__ import annotations

import pytest

from methodkit.core import io

from .contract_commands import LEAVES, call, required_args

GARBAGE = bytes(range(256)) * 4 + b"\x00\xff\xfe\x80 not a file of any format"
WITH_INPUT = [leaf for leaf in LEAVES if any(p.name == "input" for p in leaf.command.params)]


def _with_input(leaf, path: str) -> list[str]:
    """The command's required arguments with every positional file argument `path`."""
    return [path if a == "missing-input.csv" else a.replace("missing-input.csv", path) for a in required_args(leaf)]


def _spy_parsers(monkeypatch) -> list[str]:
    """Names of the inputs handed to core.io's parsers during the call."""
    seen: list[str] = []
    for name in ("read_table", "read_arrays", "read_json", "read_jsonl", "decode_text"):
        original = getattr(io, name)

        def spy(source, *args, _original=original, **kwargs):
            seen.append(getattr(source, "name", str(source)))
            return _original(source, *args, **kwargs)

        monkeypatch.setattr(io, name, spy)
    return seen


@pytest.mark.parametrize("leaf", WITH_INPUT, ids=lambda leaf: leaf.id)
@pytest.mark.parametrize("ext", ["csv", "npz", "json"])
def test_garbage_input_is_one_line_naming_the_file(leaf, ext, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    read = _spy_parsers(monkeypatch)
    (tmp_path / f"garbage.{ext}").write_bytes(GARBAGE)
    result = call(leaf, _with_input(leaf, f"garbage.{ext}"))
    lines = result.stderr.strip().splitlines()
    assert result.code == 2, result
    assert len(lines) == 1 and lines[0].startswith(f"{leaf.script}: error: "), lines
    assert "allow_pickle" not in result.stderr and "Traceback" not in result.stderr
    if f"garbage.{ext}" in read:  # once it has parsed the file, the message names it
        assert f"garbage.{ext}" in lines[0], lines[0]


@pytest.fixture
def table_reads(monkeypatch):
    """Record every table read through core.io (so that new readers are held to the rule too)."""
    seen = []
    original = io.read_table

    def spy(source, *args, **kwargs):
        seen.append(getattr(source, "name", str(source)))
        return original(source, *args, **kwargs)

    monkeypatch.setattr(io, "read_table", spy)
    return seen


CUT = {
    "truncated": (b"a,b,c\n1,2,3\n4,5,6\n7,8", "line 4: the last line has no newline"),
    "short-row": (b"a,b,c\n1,2,3\n4,5\n7,8,9\n", "line 3: expected 3 fields, saw 2"),
    "long-row": (b"a,b,c\n1,2,3\n4,5,6,7\n7,8,9\n", "line 3: expected 3 fields, saw 4"),
}


@pytest.mark.parametrize("leaf", WITH_INPUT, ids=lambda leaf: leaf.id)
@pytest.mark.parametrize("case", sorted(CUT))
def test_a_cut_or_ragged_table_is_refused_with_its_line(leaf, case, tmp_path, monkeypatch, table_reads):
    monkeypatch.chdir(tmp_path)
    content, message = CUT[case]
    (tmp_path / "cut.csv").write_bytes(content)
    result = call(leaf, _with_input(leaf, "cut.csv"))
    assert result.code == 2, result
    if "cut.csv" in table_reads:  # the command read it as a table: the reader must have refused it
        assert f"cut.csv: {message}" in result.stderr, result


def test_a_pipe_may_end_without_a_newline():
    data = io.InputBytes(b"a,b\n1,2\n3,4", "<stdin>", "", pipe=True)
    assert io.read_table(data)["b"].tolist() == [2, 4]
    with pytest.raises(io.DataError, match="line 3: the last line has no newline"):
        io.read_table(io.InputBytes(b"a,b\n1,2\n3,4", "f.csv", "", pipe=False))
