"""Stop a training loop between two steps, never inside one.

A checkpoint written in the middle of an update (the critic stepped, the actor not yet) resumes into
a run that no uninterrupted run passes through. Within `stop_between_steps()`, SIGINT and SIGTERM only
set a flag; the loop calls `raise_if_requested()` at each step boundary, after saving its state, and
the signal then takes its usual course (KeyboardInterrupt -> exit 130, SIGTERM -> Terminated, 143).
"""

from __future__ import annotations

import contextlib
import signal

from methodkit.core.outputs import Terminated


class StepStop:
    def __init__(self):
        self.signal: int | None = None

    @property
    def requested(self) -> bool:
        return self.signal is not None

    def _note(self, signum, frame) -> None:
        self.signal = signum

    def raise_if_requested(self) -> None:
        if self.signal == signal.SIGTERM:
            raise Terminated()
        if self.signal is not None:
            raise KeyboardInterrupt


@contextlib.contextmanager
def stop_between_steps():
    """Yield a StepStop whose flag SIGINT/SIGTERM set (main thread; elsewhere signals act as usual)."""
    stop = StepStop()
    try:
        previous = {s: signal.signal(s, stop._note) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: the flag never rises
        yield stop
        return
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
