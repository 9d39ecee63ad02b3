"""A folder output written as a whole: files go to a hidden staging folder beside the target and
move into place only when the command has produced all of them (nothing is left on failure)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path


class StagedFolder:
    def __init__(self, target: str | os.PathLike):
        self.target = Path(target)
        parent = self.target.resolve().parent
        parent.mkdir(parents=True, exist_ok=True)  # as every folder output: missing parents are created
        self.stage = Path(tempfile.mkdtemp(prefix=f".{self.target.name}.", suffix=".part", dir=parent))

    def path(self, *parts: str) -> Path:
        """Where a file goes (its folder is created)."""
        p = self.stage.joinpath(*parts)
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def commit(self) -> None:
        if not self.target.exists():
            os.replace(self.stage, self.target)
            return
        for entry in sorted(self.stage.iterdir()):  # an existing (empty, or --force) folder: move entries in
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

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind is None:
            self.commit()
        else:
            with contextlib.suppress(OSError):
                self.discard()
