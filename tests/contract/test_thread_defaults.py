"""What -j 0 (no -j) means per command: all cores, a fixed count, or the cores idle now (issue 22 item 12)."""

from __future__ import annotations

import json
import subprocess
import sys

from methodkit.core.threads import idle_cores


def test_idle_cores_is_cores_minus_load_and_at_least_one():
    assert idle_cores(load=0.0, cores=4) == 4
    assert idle_cores(load=1.2, cores=4) == 3
    assert idle_cores(load=3.6, cores=4) == 1
    assert idle_cores(load=9.0, cores=2) == 1
    assert idle_cores(load=-1.0, cores=2) == 2  # never more than the cores
    assert 1 <= idle_cores() <= 4096


def test_run_threads_applies_the_command_default_only_without_j():
    code = (
        "import json\n"
        "from methodkit.cli._common import Run\n"
        "from methodkit.core.threads import idle_cores\n"
        "r = lambda j, d: Run('t', {'threads': j}).threads(default=d)\n"
        "print(json.dumps([r(0, 1), r(2, 1), r(0, 'idle') <= idle_cores() + 1, r(1, 'idle')]))"
    )
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [1, 2, True, 1]


def test_the_helps_say_what_the_default_means(run_cli):
    for argv, words in (
        (["chess-wm", "train", "--help"], "0 = 1 thread"),
        (["cbf-fit", "fit", "--help"], "0 = the cores idle now"),
        (["pls-test", "test", "--help"], "0 = all cores"),
    ):
        text = " ".join(run_cli(argv).stdout.decode().split())
        assert words in text, argv


def test_every_executable_has_a_thread_row_or_a_reason():
    """A new executable with -j gets a default-vs-`-j 1` case (bench/threads/cases.py CASES) or says why not."""
    from importlib.metadata import distribution
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "threads"))
    from cases import CASES, NOT_MEASURED

    scripts = {ep.name for ep in distribution("methodkit").entry_points if ep.group == "console_scripts"}
    measured = {case.tool for case in CASES}
    assert not measured & set(NOT_MEASURED), "a tool is both measured and excused"
    missing = sorted(scripts - measured - set(NOT_MEASURED))
    assert not missing, f"add a thread case or a NOT_MEASURED reason for {missing} to bench/threads/cases.py"
    table = (Path(__file__).resolve().parents[2] / "bench" / "threads" / "threads.txt").read_text()
    unmeasured = sorted(t for t in measured if not any(line.split()[:1] == [t] for line in table.splitlines()))
    assert not unmeasured, f"run `python -P bench/threads/threads.py {' '.join(unmeasured)}`"
