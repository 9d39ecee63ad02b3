"""core.outputs.StagedFolder: a folder output appears whole, with the umask's mode, or not at all."""

from __future__ import annotations

import os
import stat

import pytest

from methodkit.core.outputs import StagedFolder


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_new_folder_gets_the_umask_mode_not_mkdtemps_0700(tmp_path, umask):
    old = os.umask(umask)
    try:
        with StagedFolder(tmp_path / "missing" / "out") as out:
            out.path("sub", "a.txt").write_text("1")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "missing" / "out") == 0o777 & ~umask
    assert (tmp_path / "missing" / "out" / "sub" / "a.txt").read_text() == "1"


def test_failure_leaves_nothing_and_an_existing_folder_keeps_its_mode(tmp_path):
    with pytest.raises(RuntimeError), StagedFolder(tmp_path / "out") as out:
        out.path("a.txt").write_text("1")
        raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []
    existing = tmp_path / "kept"
    existing.mkdir(mode=0o750)
    (existing / "sub").mkdir()
    (existing / "old.txt").write_text("old")
    with StagedFolder(existing) as out:
        out.path("sub", "b.txt").write_text("2")
        out.path("old.txt").write_text("new")
    assert _mode(existing) == 0o750
    assert (existing / "sub" / "b.txt").read_text() == "2" and (existing / "old.txt").read_text() == "new"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
