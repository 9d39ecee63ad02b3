"""cli._common: one-line errors with the right exit status, stdin rule, --meta, --force."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = r'''
import sys
import click
from methodkit.cli._common import Run, common_options, input_argument, tool_command
from methodkit.core.errors import DataError, RunFailure, CheckFailed

@tool_command(name="demo-tool")
@input_argument()
@common_options("output", "format", "in_format", "seed", "meta", "force", "quiet", "verbose")
@click.option("--fail", type=click.Choice(["none", "data", "run", "check", "bug", "interrupt", "emoji"]), default="none")
def main(input, fail, **_):
    """Sum the columns of a table.

    \b
    EXAMPLES
      demo-tool data.csv

    \b
    EXIT STATUS
      0  success
    """
    run = Run.from_context()
    frame = run.read_table(input)
    if fail == "data":
        raise DataError("bad [data] in file")
    if fail == "emoji":
        raise DataError("--method blur:abc: not a number")
    if fail == "run":
        raise RunFailure("diverged")
    if fail == "check":
        raise CheckFailed("p = 0.01 < 0.05")
    if fail == "bug":
        raise ZeroDivisionError("division by zero")
    if fail == "interrupt":
        raise KeyboardInterrupt
    run.emit_result({"sum": float(frame.select_dtypes("number").to_numpy().sum()), "nan": float("nan")})

main(prog_name="demo-tool")
'''


@pytest.fixture
def tool(tmp_path):
    script = tmp_path / "tool.py"
    script.write_text(TOOL)

    def call(*args, input=b"a,b\n1,2\n3,4\n", cwd=tmp_path, stdin=None):
        kwargs = {"stdin": stdin} if stdin is not None else {"input": input}
        return subprocess.run([sys.executable, "-P", str(script), *args], capture_output=True, cwd=cwd, **kwargs)

    return call


def test_result_is_one_json_line_with_null_for_nan(tool):
    proc = tool("-")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == b'{"sum": 10.0, "nan": null}\n'


@pytest.mark.parametrize(
    "fail, code, text",
    [
        ("data", 2, "demo-tool: error: bad [data] in file"),
        ("emoji", 2, "demo-tool: error: --method blur:abc: not a number"),  # no emoji for :abc:
        ("run", 1, "demo-tool: error: diverged"),
        ("check", 3, "demo-tool: error: p = 0.01 < 0.05"),
        ("bug", 1, "demo-tool: error: ZeroDivisionError: division by zero (run with -vv for a traceback)"),
        ("interrupt", 130, "demo-tool: interrupted"),
    ],
)
def test_exit_statuses_and_one_line(tool, fail, code, text):
    proc = tool("--fail", fail)
    assert proc.returncode == code
    assert proc.stdout == b""
    assert proc.stderr.decode().strip() == text


def test_traceback_only_with_vv(tool):
    proc = tool("--fail", "bug", "-vv")
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr.decode()


def test_usage_error_is_one_line_exit_2(tool, one_line_error):
    proc = tool("--no-such-flag")
    one_line_error(proc, "demo-tool", "No such option '--no-such-flag'; see 'demo-tool --help'")


def test_malformed_row_through_cli(tool, one_line_error):
    proc = tool("-", input=b"a,b\n1,2\n3,4,5\n")
    one_line_error(proc, "demo-tool", "<stdin>: line 3: expected 2 fields, saw 3")


def test_terminal_stdin_is_refused(tool, one_line_error):
    import os
    import pty

    master, slave = pty.openpty()
    try:
        proc = tool(stdin=slave)
    finally:
        os.close(slave)
        os.close(master)
    one_line_error(proc, "demo-tool", "provide an input file or pipe data")


def test_meta_record_and_force(tool, tmp_path):
    (tmp_path / "d.csv").write_text("a\n1\n2\n")
    proc = tool("d.csv", "-o", "r.json", "--meta", "m.json")
    assert proc.returncode == 0, proc.stderr
    meta = json.loads((tmp_path / "m.json").read_text())
    assert meta["tool"] == "demo-tool" and meta["seed"] == 0
    assert len(meta["input_sha256"]) == 64
    assert json.loads((tmp_path / "r.json").read_text())["meta"]["input_sha256"] == meta["input_sha256"]
    before = (tmp_path / "r.json").read_bytes()
    proc = tool("d.csv", "-o", "r.json")
    assert proc.returncode == 2 and b"already exists; pass --force" in proc.stderr
    assert (tmp_path / "r.json").read_bytes() == before
    assert tool("d.csv", "-o", "r.json", "--force").returncode == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["dar-backdoor", "apply", "--dataset", "fashion-mnist", "--rules", "r.jsonl"],
        ["irt-sim", "draw"],
        ["methodkit-sim", "scenes", "spec.json"],
        ["casper-solve", "gen", "sudoku"],
    ],
)
def test_binary_output_to_a_terminal_is_refused(argv, tmp_path):
    """A binary NPZ on a terminal garbles it: refused in one line, before any input is read."""
    import os
    import pty

    exe = str(Path(sys.executable).parent / argv[0])
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([exe, *argv[1:]], stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE,
                              cwd=tmp_path, timeout=120)  # fmt: skip
    finally:
        os.close(slave)
        os.close(master)
    lines = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2, lines
    assert len(lines) == 1 and lines[0].startswith(f"{argv[0]}: error: refusing to write binary"), lines
    assert "to a terminal" in lines[0]
