"""Rank processes live no longer than the parent that spawned them.

A scheduler stops a job by signalling its parent only (`kill PID`); the ranks must not keep training
and checkpointing as orphans. Two guards: the parent turns SIGTERM/SIGHUP into an exception so its
cleanup terminates and joins the ranks, and each rank asks Linux to SIGKILL it when its parent dies
(PR_SET_PDEATHSIG), with a getppid watchdog thread where prctl is unavailable or the parent died
before the rank got that far.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class ParentSignalled(SystemExit):
    """SIGTERM or SIGHUP reached the parent of the ranks: exit 128 + signal once the ranks are stopped."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)


def _raise_signalled(signum, frame):
    raise ParentSignalled(signum)


@contextlib.contextmanager
def signals_raise():
    """Within the block, SIGTERM and SIGHUP raise ParentSignalled (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _raise_signalled) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def stop(procs, grace_s: float = 10.0, terminate: bool = True) -> None:
    """Terminate every live process (or, with terminate=False, wait for it), join each, and kill any
    that outlive the grace period."""
    for proc in procs:
        if terminate and proc.is_alive():
            proc.terminate()
    grace_s = grace_s if terminate else 6 * grace_s
    deadline = time.monotonic() + grace_s
    for proc in procs:
        if proc.pid is None:  # never started
            continue
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.pid is not None and proc.is_alive():
            proc.kill()
            proc.join()


def die_with_parent(parent_pid: int, poll_s: float = 0.5) -> None:
    """Called first thing in a rank: exit as soon as the process `parent_pid` is gone."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # died before prctl took effect
        os._exit(1)

    def watch() -> None:  # also covers platforms without prctl
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()
