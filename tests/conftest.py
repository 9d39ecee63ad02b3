"""Shared fixtures: run an installed executable in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]


def _run(args, *, input: bytes | str | None = None, cwd=None, env=None, timeout: float = 600):
    """Run `args` (argv list, the first an installed executable name) without a terminal on stdin."""
    exe = args[0] if os.sep in str(args[0]) else str(BIN / args[0])
    full_env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})}
    data = input.encode() if isinstance(input, str) else input
    return subprocess.run(
        [exe, *map(str, args[1:])],
        input=data if data is not None else b"",
        capture_output=True,
        cwd=cwd,
        env=full_env,
        timeout=timeout,
    )


@pytest.fixture
def run_cli():
    """run_cli(["pls-test", "test", "x.csv"], input=...) -> CompletedProcess with bytes stdout/stderr."""
    return _run


@pytest.fixture
def shell():
    """shell("methodkit-data get diabetes | head -1") -> CompletedProcess (bash, pipefail off)."""

    def run(command: str, cwd=None, timeout: float = 600):
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        return subprocess.run(["bash", "-c", command], capture_output=True, cwd=cwd, env=env, timeout=timeout)

    return run


def assert_one_line_error(proc, prog: str, *fragments: str, code: int = 2) -> str:
    """The process failed with `code`, printed nothing on stdout and one `prog: error:` line on stderr."""
    err = proc.stderr.decode()
    assert proc.returncode == code, (proc.returncode, err)
    assert proc.stdout == b"", proc.stdout[:200]
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


@pytest.fixture
def one_line_error():
    return assert_one_line_error


@pytest.fixture(autouse=True)
def _process_signal_state():
    """Restore the signal handlers a command installs when a test calls it in this process.

    A command's main() sets SIGPIPE to its default action (quiet exit on a closed pipe, as coreutils) and
    its own SIGINT handler. Left in a pytest-xdist worker, the first write to a closed pipe kills the
    worker without a word ("node down: Not properly terminated") and the session hangs at teardown.
    """
    import signal

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGPIPE, signal.SIGINT, signal.SIGTERM)}
    hook = sys.unraisablehook
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)
    sys.unraisablehook = hook
