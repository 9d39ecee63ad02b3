"""`make demo` reports each step as it ends; `make install-man` makes `man TOOL` work for every executable."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from importlib.metadata import distribution
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(ep.name for ep in distribution("methodkit").entry_points if ep.group == "console_scripts")

DEMO_DRIVER = """
import sys
from methodkit.cli import _demo
from methodkit.cli._common import DemoStep
go = sys.argv[1]
_demo.steps = lambda only=None: [
    ("first", DemoStep("echo '{\\"x\\": 1}'", "in", "x", "one")),
    ("second", DemoStep(f"while [ ! -e {go} ]; do sleep 0.05; done; echo '{{\\"x\\": 2}}'", "in", "x", "two")),
]
sys.exit(_demo.main([]))
"""


def test_demo_prints_each_step_before_the_next_one_ends(tmp_path):
    go = tmp_path / "go"
    proc = subprocess.Popen(
        [sys.executable, "-P", "-c", DEMO_DRIVER, str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(proc.stdout.readline()))
    reader.start()
    reader.join(timeout=120)  # the second step waits for `go`: a demo that prints only at the end never gets here
    try:
        assert first and first[0].startswith("[1/2] first  one: x = 1  "), first
        assert re.search(r"  \d+\.\d s \(CPU \d+\.\d s\)$", first[0].rstrip()), first
    finally:
        go.touch()
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert rest.splitlines()[0].startswith("[2/2] second  two: x = 2  ")
    assert "methodkit demo" in rest and "2 steps, 0 failed" in rest


def test_demo_refuses_an_unknown_executable():
    proc = subprocess.run([sys.executable, "-P", "-m", "methodkit.cli._demo", "no-such-tool"], capture_output=True)
    assert proc.returncode == 2 and proc.stderr == b"demo: error: no executable named no-such-tool\n"


@pytest.mark.skipif(not (shutil.which("make") and shutil.which("man")), reason="needs make and man-db")
def test_install_man_lets_man_find_every_executable(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    # -o install: use the venv as it is (the recipe under test only copies pages)
    subprocess.run(
        ["make", "-s", "-o", "install", "install-man", f"VENV={venv}"], cwd=REPO, check=True, capture_output=True
    )
    env = {k: v for k, v in os.environ.items() if k != "MANPATH"}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin"
    for name in SCRIPTS:
        found = subprocess.run(["man", "-w", name], env=env, capture_output=True, text=True)
        assert found.returncode == 0 and found.stdout.strip() == str(venv / "share/man/man1" / f"{name}.1"), name
