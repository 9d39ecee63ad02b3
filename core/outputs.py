"""Output targets: refused before any work, written atomically, committed together at the end.

The promises (CONVENTIONS: "Nothing is lost"):
  * `-` is stdout. A target that is not a regular file (/dev/null, a FIFO, /dev/stdout, a
    process substitution) is written straight into: it is never refused as existing, never
    replaced. A symlink is resolved and its target written; the link stays a link.
  * A regular file is written to a temporary file in its folder and renamed over the target
    only when the writer finishes; any exception (SIGTERM included) removes the temporary.
  * New files get mode 0666 & ~umask, like `>` in a shell; --force keeps an existing file's mode.
  * An existing file is refused without --force, and so is a non-empty folder for a folder output.

A command states its plan of outputs before it reads input (cli._common does so for every
option typed OutputPath, and `Run.claim_outputs` for paths a command computes); every claimed
file is checked then, and its atomic write is *deferred*: the renames happen together when
the whole command has succeeded (`output_plan`), --meta last, so a refused or failed run
writes nothing at all.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from methodkit.core.errors import UsageError


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (/proc), else set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def resolved(path: str | os.PathLike) -> Path:
    """The file a path names once symlinks are followed (a dangling link names its would-be target)."""
    return Path(os.path.realpath(os.fspath(path)))


def is_special(path: str | os.PathLike) -> bool:
    """True for an existing target that is neither a regular file nor a folder (device, FIFO, socket)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def writes_beside(path: str | os.PathLike | None) -> bool:
    """Whether files may be written beside OUTPUT (sidecars, partial rows): not for stdout or a special
    target such as /dev/null or a FIFO, whose folder (/dev) is no place for them."""
    return path not in (None, "", "-") and not is_special(path)


def check_output(path: str | os.PathLike, *, force: bool = False, folder: bool = False, flag: str = "") -> None:
    """Raise UsageError now if writing `path` later would be refused or fail.

    `folder` is for outputs that are folders (checkpoint and data directories): an existing
    non-empty folder needs --force, an existing file is refused. `flag` names the option in messages.
    """
    if str(path) in ("", "-"):
        return
    where = f"{flag} {path}" if flag else str(path)
    if is_special(path):
        return
    target = resolved(path)
    if folder:
        if target.exists() and not target.is_dir():
            raise UsageError(f"{where}: exists and is not a folder")
        if target.is_dir() and not force and any(target.iterdir()):
            raise UsageError(f"{where}: folder exists and is not empty; pass --force to write into it")
        parent = next((p for p in target.parents if p.exists()), Path("/"))
    else:
        if target.is_dir():
            raise UsageError(f"{where}: is a folder, expected a file name")
        if target.exists() and not force:
            raise UsageError(f"{where}: already exists; pass --force to overwrite")
        parent = target.parent
        if not parent.is_dir():
            raise UsageError(f"{where}: folder {_as_typed(path, parent)} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{where}: cannot write in folder {_as_typed(path, parent)} (permission denied)")


def _as_typed(path, parent: Path) -> str:
    """The folder as the user typed it (unless a symlink led elsewhere)."""
    typed = Path(os.fspath(path)).parent
    return str(parent) if os.path.islink(path) else str(typed)


# ---------------------------------------------------------------- the plan of one command


@dataclass
class _Pending:
    tmp: str
    target: Path
    last: bool


@dataclass
class OutputPlan:
    """The files one command has claimed, and the finished temporaries waiting to be renamed."""

    claimed: dict = field(default_factory=dict)  # resolved path -> (force, last, flag)
    pending: list = field(default_factory=list)
    _previous_sigterm: object = None

    def claim(self, path, *, force: bool = False, folder: bool = False, last: bool = False, flag: str = ""):
        check_output(path, force=force, folder=folder, flag=flag)
        if str(path) in ("", "-") or folder or is_special(path):
            return
        target = resolved(path)
        if target in self.claimed:
            other = self.claimed[target][2]
            raise UsageError(f"{flag} {path}: the same file as {other}; give each output its own path".lstrip())
        self.claimed[target] = (force, last, flag or str(path))

    def defers(self, target: Path) -> bool:
        return target in self.claimed

    def add(self, tmp: str, target: Path) -> None:
        if not self.pending:  # from now on SIGTERM must clean up the temporaries
            with contextlib.suppress(ValueError):
                self._previous_sigterm = signal.signal(signal.SIGTERM, _raise_terminated)
        self.pending = [p for p in self.pending if p.target != target or _unlink(p.tmp)]
        self.pending.append(_Pending(tmp, target, self.claimed[target][1]))

    def commit(self) -> None:
        """Rename every finished temporary over its target, the `last` ones (--meta) after the rest."""
        try:
            for item in sorted(self.pending, key=lambda p: p.last):
                force = self.claimed[item.target][0]
                if item.target.exists() and not force:  # appeared while we worked
                    raise UsageError(f"{item.target}: already exists; pass --force to overwrite")
                os.replace(item.tmp, item.target)
                item.tmp = ""
        finally:
            self.discard()

    def discard(self) -> None:
        for item in self.pending:
            if item.tmp:
                _unlink(item.tmp)
        self.pending = []
        if self._previous_sigterm is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None


_plan: OutputPlan | None = None


def _unlink(path: str) -> bool:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return False


def active_plan() -> OutputPlan | None:
    return _plan


@contextlib.contextmanager
def output_plan(commit_on: tuple = ()) -> Iterator[OutputPlan]:
    """Run a command inside a plan: claimed outputs are renamed into place only if the block
    returns (or raises one of `commit_on`, such as a failed --fail-below gate); otherwise removed."""
    global _plan
    previous, _plan = _plan, OutputPlan()
    plan = _plan
    try:
        yield plan
    except commit_on:
        plan.commit()
        raise
    except BaseException:
        plan.discard()
        raise
    else:
        plan.commit()
    finally:
        plan.discard()
        _plan = previous


def claim(
    path, *, force: bool = False, folder: bool = False, last: bool = False, flag: str = "", defer: bool = True
) -> None:
    """Check an output now and, inside a plan, defer its write to the plan's commit.

    defer=False only checks: for files a command keeps on purpose when it fails (partial results)."""
    if _plan is not None and defer:
        _plan.claim(path, force=force, folder=folder, last=last, flag=flag)
    else:
        check_output(path, force=force, folder=folder, flag=flag)


# ---------------------------------------------------------------- writing one file


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, *, binary: bool = True, force: bool = False) -> Iterator[IO]:
    """Yield a handle whose content replaces `path` only if the block completes.

    `-` is stdout; a device, FIFO or other special file is opened and written straight into;
    a symlink's target is written. Otherwise a temporary file in the target's folder, with the
    mode the target will have, is renamed over it on success (at the plan's commit when the
    path was claimed) and removed on any exception (SIGTERM is turned into one meanwhile).
    An existing file is refused unless `force`.
    """
    if str(path) == "-":
        stream = sys.stdout.buffer if binary else sys.stdout
        yield stream
        stream.flush()
        return
    if is_special(path):
        with open(path, "wb" if binary else "w", encoding=None if binary else "utf-8") as handle:
            yield handle
        return
    target = resolved(path)
    deferred = _plan is not None and _plan.defers(target)
    check_output(path, force=force or (deferred and _plan.claimed[target][0]))
    mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o666 & ~current_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    with _sigterm_raises():
        try:
            os.fchmod(fd, mode)
            with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8") as handle:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            if not deferred:
                os.replace(tmp, target)
        except BaseException:
            _unlink(tmp)
            raise
    if deferred:  # after the block: the plan keeps SIGTERM raising until its commit
        _plan.add(tmp, target)


class StagedFolder:
    """A folder output written as a whole: files go to a hidden staging folder beside the target and
    move into place only when the block completes (nothing is left on failure).

    Missing parents are created, as for every folder output; a new folder gets 0777 & ~umask (the
    staging folder mkdtemp makes is 0700, and the rename would keep that), an existing one keeps its
    mode and receives the entries (it was checked empty, or --force was given, by check_output).
    """

    def __init__(self, target: str | os.PathLike):
        self.target = Path(target)
        parent = self.target.resolve().parent
        parent.mkdir(parents=True, exist_ok=True)
        self.stage = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.", suffix=".part", dir=parent))

    def path(self, *parts: str) -> Path:
        """Where a file goes (its folder is created)."""
        p = self.stage.joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def commit(self) -> None:
        if not self.target.exists():
            os.chmod(self.stage, 0o777 & ~current_umask())
            os.replace(self.stage, self.target)
            return
        for entry in sorted(self.stage.iterdir()):
            dest = self.target / entry.name
            if dest.is_dir() and entry.is_dir():
                for sub in entry.iterdir():
                    os.replace(sub, dest / sub.name)
            else:
                if dest.is_dir():
                    shutil.rmtree(dest)
                os.replace(entry, dest)
        shutil.rmtree(self.stage, ignore_errors=True)

    def discard(self) -> None:
        shutil.rmtree(self.stage, ignore_errors=True)

    def __enter__(self) -> StagedFolder:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if kind is None:
            self.commit()
        else:
            with contextlib.suppress(OSError):
                self.discard()


class Terminated(SystemExit):
    """Raised in place of SIGTERM's default action so that cleanup runs (exit status 143)."""

    def __init__(self):
        super().__init__(128 + signal.SIGTERM)


def _raise_terminated(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def _sigterm_raises():
    """Within the block, SIGTERM raises Terminated (main thread only; elsewhere a no-op)."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# public name for code outside core that runs its own long block (the private name stays for old callers)
sigterm_raises = _sigterm_raises
