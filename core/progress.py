"""Progress on stderr: rich bars with an ETA on a terminal, phase lines with -v elsewhere.

Tools never print: they call a `ProgressCallback(phase, done, total)` handed to them.
The CLI builds one with `reporter()`; it is silent in a cron log unless -v is given.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Protocol


class ProgressCallback(Protocol):
    def __call__(self, phase: str, done: int, total: int | None) -> None: ...


def silent(phase: str, done: int, total: int | None) -> None:
    """A callback that reports nothing (the default in library use)."""


@contextlib.contextmanager
def reporter(console, *, quiet: bool = False, verbose: int = 0) -> Iterator[ProgressCallback]:
    """Yield a progress callback drawing on `console` (a stderr rich Console).

    Terminal and not quiet: one transient bar per phase, with ETA.
    Not a terminal: nothing, or with -v one line when a phase starts and when it ends.
    """
    if quiet:
        yield silent
        return
    if console.is_terminal:
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

        bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=True,
        )
        tasks: dict[str, int] = {}

        def on_terminal(phase: str, done: int, total: int | None) -> None:
            if phase not in tasks:
                tasks[phase] = bars.add_task(phase, total=total)
            bars.update(tasks[phase], completed=done, total=total)

        with bars:
            yield on_terminal
        return
    if verbose <= 0:
        yield silent
        return
    started: dict[str, float] = {}

    def on_log(phase: str, done: int, total: int | None) -> None:
        from rich.markup import escape

        if phase not in started:
            started[phase] = time.monotonic()
            console.print(f"{escape(phase)}: started" + (f" ({total} steps)" if total else ""))
        if total is not None and done >= total:
            seconds = time.monotonic() - started[phase]
            console.print(f"{escape(phase)}: done in {seconds:.1f} s")

    yield on_log


def iterate(items, callback: Callable, phase: str, total: int | None = None):
    """Yield from `items`, reporting progress of `phase` after each one."""
    total = len(items) if total is None and hasattr(items, "__len__") else total
    callback(phase, 0, total)
    for i, item in enumerate(items, start=1):
        yield item
        callback(phase, i, total)
