"""Killing only the parent of a gloo run (what a scheduler does) leaves no rank process behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")


def _ranks_of(parent: int) -> list[int]:
    """The multiprocessing-spawned children of `parent` (the rank processes; not the resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"spawn_main" in cmdline:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _poll(condition, bound_s: float) -> bool:
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


@pytest.mark.parametrize("signum", [signal.SIGTERM, pytest.param(signal.SIGKILL, marks=pytest.mark.slow)])
def test_no_rank_outlives_its_parent(tmp_path, signum):
    args = ["run", "--task", "digits", "--stages", "2", "--width", "16", "--steps", "100000", "--ckpt-every", "20",
            "--backend", "gloo", "-q", "-o", "r"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    parent = subprocess.Popen([str(BIN / "clapping-train"), *args], cwd=tmp_path, env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    ranks: list[int] = []
    try:
        # training has begun once the first checkpoint set exists
        assert _poll(lambda: any((tmp_path / "r" / "ckpt").glob("step-*")), 120)
        ranks = _ranks_of(parent.pid)
        assert len(ranks) == 2, ranks
        parent.send_signal(signum)
        assert _poll(lambda: not any(_alive(pid) for pid in ranks), 30), [p for p in ranks if _alive(p)]
        parent.wait(30)
        if signum == signal.SIGTERM:
            assert parent.returncode == 128 + signal.SIGTERM, parent.stderr.read()
    finally:
        parent.kill()
        parent.wait()
        for pid in ranks:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
