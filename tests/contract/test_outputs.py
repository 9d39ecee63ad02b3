"""Outputs, for every command of every executable (issue 22, items 1-5).

Every declared output (-o, --meta, --params-out, --out-dir, ...) is checked before any input is
read: an existing file without --force, a non-empty folder, a missing folder are refused with
exit 2 and one line, and nothing at all is written, no temporary file either. The input named on
these command lines does not exist, so a command that read its input first would fail on it.
Modes and special targets (/dev/null, FIFOs, symlinks) are checked end to end on fast commands.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .contract_commands import LEAVES, call, required_args

BIN = Path(sys.executable).parent
OLD = b"old content\n"
WITH_OUTPUTS = [leaf for leaf in LEAVES if leaf.outputs()]


def _args_with(leaf, flag: str, value: str) -> list[str]:
    """The command's required arguments with `flag VALUE` set (replacing a required value of it)."""
    args = required_args(leaf)
    if flag in args:
        args[args.index(flag) + 1] = value
        return args
    return [*args, flag, value]


def _devnull_is_a_device() -> bool:
    """False where some other program (as root, with an older atomic write) replaced /dev/null."""
    return stat.S_ISCHR(os.stat("/dev/null").st_mode)


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".*.part"))


@pytest.mark.parametrize("leaf", WITH_OUTPUTS, ids=lambda leaf: leaf.id)
def test_existing_outputs_are_refused_before_the_input_is_read(leaf, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for flag, kind in leaf.outputs():
        if kind.folder:
            target = tmp_path / f"busy{flag}"
            target.mkdir()
            (target / "unrelated.txt").write_bytes(OLD)
            expected = "folder exists and is not empty; pass --force"
        else:
            target = tmp_path / f"old{flag}.json"
            target.write_bytes(OLD)
            expected = "already exists; pass --force"
        result = call(leaf, _args_with(leaf, flag, target.name))
        assert result.code == 2, (flag, result)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and f"{flag} {target.name}: {expected}" in lines[0], (flag, lines)
        assert result.stdout == ""
        if kind.folder:
            assert os.listdir(target) == ["unrelated.txt"]
        else:
            assert target.read_bytes() == OLD
    assert _temporaries(tmp_path) == []


@pytest.mark.parametrize("leaf", [leaf for leaf in WITH_OUTPUTS if leaf.has("--meta")], ids=lambda leaf: leaf.id)
def test_a_refused_output_writes_no_other_file(leaf, tmp_path, monkeypatch):
    """--meta refused: no other output is created; another output refused: no --meta."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "meta.json").write_bytes(OLD)
    files = [f for f, kind in leaf.outputs() if f != "--meta" and not kind.folder]
    args = required_args(leaf)
    for i, flag in enumerate(files):
        args = _args_with(leaf, flag, f"new{i}.out") if flag in args else [*args, flag, f"new{i}.out"]
    result = call(leaf, [*args, "--meta", "meta.json"])
    assert result.code == 2 and "--meta meta.json: already exists" in result.stderr, result
    assert sorted(os.listdir(tmp_path)) == ["meta.json"]
    if files:
        (tmp_path / "meta.json").unlink()
        (tmp_path / "new0.out").write_bytes(OLD)
        result = call(leaf, [*args, "--meta", "meta.json"])
        assert result.code == 2 and "already exists" in result.stderr, result
        assert sorted(os.listdir(tmp_path)) == ["new0.out"]


@pytest.mark.parametrize(
    "leaf", [leaf for leaf in WITH_OUTPUTS if "--output" in dict(leaf.outputs())], ids=lambda leaf: leaf.id
)
def test_special_targets_and_missing_folders(leaf, tmp_path, monkeypatch):
    """/dev/null and a FIFO are never refused as existing; a missing folder is refused up front."""
    monkeypatch.chdir(tmp_path)
    kind = dict(leaf.outputs())["--output"]
    if not kind.folder:
        os.mkfifo(tmp_path / "fifo")
        for target in ["fifo", *(["/dev/null"] if _devnull_is_a_device() else [])]:
            result = call(leaf, _args_with(leaf, "--output", target), body=False)
            assert result.code == 0, (target, result)  # neither refused as existing nor opened yet
            assert stat.S_ISFIFO((tmp_path / "fifo").lstat().st_mode)
        result = call(leaf, _args_with(leaf, "--output", "no/such/folder/out.json"))
        assert result.code == 2 and "folder no/such/folder does not exist" in result.stderr, result
    else:
        (tmp_path / "file").write_bytes(OLD)
        result = call(leaf, _args_with(leaf, "--output", "file"))
        assert result.code == 2 and "exists and is not a folder" in result.stderr, result


# ---------------------------------------------------------------- end to end on fast commands

FAST = [
    ["cbf-sim", "task", "--trials", "4"],
    ["pls-test", "sim", "-n", "8", "-p", "3", "--active", "2"],
    ["irt-sim", "draw", "-N", "4", "-J", "3", "--format", "csv"],
]


def _run(argv, cwd, umask=0o022, input=b""):
    def set_umask():
        os.umask(umask)

    return subprocess.run(
        [BIN / argv[0], *argv[1:]], cwd=cwd, capture_output=True, input=input, preexec_fn=set_umask, timeout=300
    )


@pytest.mark.parametrize("argv", FAST, ids=lambda a: " ".join(a[:2]))
def test_modes_follow_the_umask_and_force_keeps_them(argv, tmp_path):
    proc = _run([*argv, "-o", "new.csv", "--meta", "meta.json"], tmp_path, umask=0o022)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE((tmp_path / "new.csv").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "meta.json").stat().st_mode) == 0o644
    proc = _run([*argv, "-o", "private.csv"], tmp_path, umask=0o077)
    assert stat.S_IMODE((tmp_path / "private.csv").stat().st_mode) == 0o600
    os.chmod(tmp_path / "new.csv", 0o640)
    proc = _run([*argv, "-o", "new.csv", "--force"], tmp_path, umask=0o022)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE((tmp_path / "new.csv").stat().st_mode) == 0o640
    assert _temporaries(tmp_path) == []


@pytest.mark.parametrize("argv", FAST, ids=lambda a: " ".join(a[:2]))
def test_special_targets_are_written_into_and_links_stay_links(argv, tmp_path):
    proc = _run([*argv, "-o", "/dev/null"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    (tmp_path / "real.csv").write_bytes(OLD)
    os.symlink("real.csv", tmp_path / "link.csv")
    proc = _run([*argv, "-o", "link.csv", "--force"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "link.csv").is_symlink() and (tmp_path / "real.csv").read_bytes() != OLD
    os.mkfifo(tmp_path / "fifo.csv")
    proc = subprocess.run(
        ["bash", "-c", f"{BIN / argv[0]} {' '.join(argv[1:])} -o fifo.csv --force & cat fifo.csv; wait $!"],
        cwd=tmp_path,
        capture_output=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(b"\n") >= 2  # the table came through the FIFO
    assert stat.S_ISFIFO((tmp_path / "fifo.csv").lstat().st_mode)
    proc = _run([*argv, "-o", "/dev/stdout"], tmp_path)
    assert proc.returncode == 0 and proc.stdout.count(b"\n") >= 2, proc.stderr


def test_meta_is_written_last_and_only_on_success(tmp_path):
    """The main output is refused at write time (binary to a terminal is not the case here: a
    folder appears where -o should go while the command runs): nothing is renamed into place."""
    proc = _run(["cbf-sim", "task", "--trials", "4", "-o", "t.csv", "--meta", "m.json"], tmp_path)
    assert proc.returncode == 0
    before = {p: (tmp_path / p).read_bytes() for p in ("t.csv", "m.json")}
    proc = _run(["cbf-sim", "task", "--trials", "5", "-o", "t.csv", "--meta", "m.json"], tmp_path)
    assert proc.returncode == 2 and b"already exists" in proc.stderr
    assert {p: (tmp_path / p).read_bytes() for p in ("t.csv", "m.json")} == before


def test_no_sidecar_is_claimed_or_written_beside_a_special_target(tmp_path):
    """-o /dev/null or a FIFO: sidecars and partial rows would land in /dev (or beside the FIFO's reader)."""
    from methodkit.cli._common import OutputPath
    from methodkit.core.outputs import writes_beside

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with_sidecar = OutputPath(sidecars=(".jsonl",))
    assert with_sidecar.written(str(tmp_path / "t.npz")) == [str(tmp_path / "t.npz"), str(tmp_path / "t.jsonl")]
    assert with_sidecar.written(str(fifo)) == [str(fifo)]
    assert writes_beside(str(tmp_path / "t.npz")) and not writes_beside(str(fifo)) and not writes_beside("-")
    if _devnull_is_a_device():
        assert with_sidecar.written("/dev/null") == ["/dev/null"] and not writes_beside("/dev/null")
