"""Suite-wide contract, held by EVERY registered console script without new code.

--help exits 0 without importing heavy stacks; --version; a man page, three
completions and a README row exist; a missing input file exits 2 with one line;
`| head -1` ends quietly.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import click
import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SCRIPTS = sorted(ep.name for ep in distribution("methodkit").entry_points if ep.group == "console_scripts")
HEAVY = ("torch", "numba", "lightgbm", "cupy", "pandas", "scipy", "sklearn", "statsmodels", "mujoco")

IMPORT_PROBE = """
import json, sys
from importlib.metadata import distribution
name = sys.argv[1]
ep = next(e for e in distribution("methodkit").entry_points if e.group == "console_scripts" and e.name == name)
command = ep.load()
try:
    command.main(["--help"], prog_name=name)
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "heavy": sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)}))
""".replace("HEAVY", repr(HEAVY))


def test_there_are_executables():
    assert "methodkit-data" in SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_is_light_and_has_examples(name):
    proc = subprocess.run([sys.executable, "-P", "-c", IMPORT_PROBE, name], capture_output=True, text=True)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    assert report["heavy"] == [], f"{name} --help imports {report['heavy']}: import them inside the command"
    help_text = subprocess.run([BIN / name, "-h"], capture_output=True, text=True, check=True).stdout
    assert "EXAMPLES" in help_text and "EXIT STATUS" in help_text


@pytest.mark.parametrize("name", SCRIPTS)
def test_version(name):
    proc = subprocess.run([BIN / name, "-V"], capture_output=True, text=True)
    assert proc.returncode == 0
    assert re.fullmatch(rf"{re.escape(name)} \(methodkit\) \d+\.\d+\.\d+\S*\n", proc.stdout)


@pytest.mark.parametrize("name", SCRIPTS)
def test_man_page_completions_and_readme_row(name):
    page = (REPO / "man" / f"{name}.1").read_text()
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "EXAMPLES"):
        assert f".SH {section}" in page, f"man/{name}.1 lacks {section}"
    for shell, suffix in (("bash", ".bash"), ("zsh", ".zsh"), ("fish", ".fish")):
        script = (REPO / "completions" / shell / f"{name}{suffix}").read_text()
        assert "_COMPLETE" in script
    readme = (REPO / "README.md").read_text()
    # a row per method may name several executables: | `cbf-sim`, `cbf-fit` | ...
    row = rf"^\| (`[\w-]+`, )*`{re.escape(name)}`(, `[\w-]+`)* \|"
    assert re.search(row, readme, re.M), f"README has no table row for {name}"


def _commands_with_input(name):
    """(argv prefix, command) for the command and every verb that takes a positional INPUT."""
    from methodkit.cli._docs import load_command

    root = load_command(name)
    stack = [([], root)]
    while stack:
        prefix, command = stack.pop()
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            stack += [([*prefix, verb], command.get_command(ctx, verb)) for verb in command.list_commands(ctx)]
        elif any(isinstance(p, click.Argument) and p.name == "input" for p in command.params):
            yield prefix, command


@pytest.mark.parametrize("name", SCRIPTS)
def test_missing_input_file_exits_2_with_one_line(name, tmp_path, one_line_error):
    for prefix, _ in _commands_with_input(name):
        proc = subprocess.run([BIN / name, *prefix, "no-such-file.csv"], capture_output=True, cwd=tmp_path)
        one_line_error(proc, name, "no-such-file.csv")


@pytest.mark.parametrize("name", SCRIPTS)
def test_head_ends_quietly(name, shell):
    proc = shell(f'{name} --help | head -1; echo "status=${{PIPESTATUS[0]}}"')
    assert proc.stderr == b""
    assert proc.stdout.decode().strip().splitlines()[-1] in ("status=0", "status=141")
