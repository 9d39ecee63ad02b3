"""core.io: every format round-trips; bad input gives a DataError naming file, line and column."""

from __future__ import annotations

import gzip
import lzma
import math

import numpy as np
import pandas as pd
import pytest

from methodkit.core import io
from methodkit.core.errors import DataError, UsageError


@pytest.fixture
def frame():
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {
            "x": rng.normal(size=7),
            "k": np.arange(7),
            "name": ["a", "b,c", 'q"uote', "d", "e", "f", "g"],
            "y": [0.1, 1 / 3, np.nan, 1e-300, -2.5, 7.0, 1e300],
        }
    )


@pytest.mark.parametrize("ext", ["csv", "tsv", "parquet", "jsonl", "json", "csv.gz", "csv.xz"])
def test_table_round_trip_through_files(tmp_path, frame, ext):
    path = tmp_path / f"t.{ext}"
    if ext.endswith((".gz", ".xz")):
        io.write_table(frame, tmp_path / "plain.csv")
        raw = (tmp_path / "plain.csv").read_bytes()
        path.write_bytes(gzip.compress(raw) if ext.endswith(".gz") else lzma.compress(raw))
    else:
        io.write_table(frame, path)
    back = io.read_table(path)
    pd.testing.assert_frame_equal(back, frame, check_dtype=False)
    # floats round-trip exactly, not just approximately
    assert back["x"].tolist() == frame["x"].tolist()


def test_csv_writes_minimal_quoting_and_empty_nan(tmp_path, frame):
    io.write_table(frame, tmp_path / "t.csv")
    text = (tmp_path / "t.csv").read_text()
    assert text.splitlines()[0] == "x,k,name,y"
    assert '"b,c"' in text and '"q""uote"' in text
    assert text.splitlines()[3].endswith(",")  # NaN -> empty
    assert "\r" not in text


def test_arrays_round_trip(tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.array([1, 2, 3], dtype=np.int64)
    io.write_arrays(tmp_path / "a.npz", {"a": a, "b": b})
    back = io.read_arrays(tmp_path / "a.npz")
    np.testing.assert_array_equal(back["a"], a)
    assert back["b"].dtype == np.int64
    io.write_arrays(tmp_path / "a.npy", {"a": a})
    np.testing.assert_array_equal(io.read_arrays(tmp_path / "a.npy")["arr_0"], a)
    with pytest.raises(UsageError, match="NPY holds one array"):
        io.write_arrays(tmp_path / "two.npy", {"a": a, "b": b})


def test_json_nan_becomes_null_and_numpy_is_plain(tmp_path):
    text = io.dumps_json({"p": float("nan"), "q": np.float64(0.5), "v": np.arange(2), "i": np.inf})
    assert text == '{"p": null, "q": 0.5, "v": [0, 1], "i": null}'
    io.write_json({"a": 1}, tmp_path / "r.json")
    assert io.read_json(tmp_path / "r.json") == {"a": 1}


def test_format_from_path():
    assert io.format_from_path("a.CSV") == "csv"
    assert io.format_from_path("a.tsv.gz") == "tsv"
    assert io.format_from_path("-", None, "csv") == "csv"
    assert io.format_from_path("a.csv", "parquet") == "parquet"
    with pytest.raises(UsageError, match="cannot tell the format"):
        io.format_from_path("a.weird")


# ---------------------------------------------------------------- bad input


def test_missing_file():
    with pytest.raises(DataError, match=r"^nope\.csv: no such file$"):
        io.read_table("nope.csv")


def test_malformed_row_names_its_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("a,b\n1,2\n3,4\n5,6,7\n")
    with pytest.raises(DataError) as info:
        io.read_table(path)
    assert info.value.message == f"{path}: line 4: expected 2 fields, saw 3"
    assert info.value.exit_code == 2


def test_empty_input_and_header_only(tmp_path):
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(DataError, match="empty input"):
        io.read_table(tmp_path / "e.csv")
    (tmp_path / "h.csv").write_text("a,b\n")
    with pytest.raises(DataError, match="has no rows"):
        io.read_table(tmp_path / "h.csv")


def test_unknown_format_and_corrupt_parquet(tmp_path):
    (tmp_path / "t.xlsx").write_text("a")
    with pytest.raises(UsageError, match="cannot tell the format"):
        io.read_table(tmp_path / "t.xlsx", default_format=None)
    (tmp_path / "t.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match="malformed PARQUET: .*magic bytes"):
        io.read_table(tmp_path / "t.parquet")


def test_missing_column_lists_columns_and_flag(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b,c\n1,2,3\n")
    frame = io.read_table(path)
    with pytest.raises(DataError) as info:
        io.require_columns(frame, ["y"], flag="--target")
    assert info.value.message == f"column 'y' not found in {path} (columns: a, b, c); pass --target"


def test_nan_and_text_in_numeric_columns(tmp_path):
    path = tmp_path / "n.csv"
    path.write_text("a,b\n1,2\n3,\n5,x\n")
    frame = io.read_table(path)
    np.testing.assert_array_equal(io.numeric_matrix(frame, ["a"]), [[1], [3], [5]])
    with pytest.raises(DataError, match=r"line 4: column 'b' is not numeric \('x'\)"):
        io.numeric_matrix(frame, ["b"], allow_nonfinite=True)
    with pytest.raises(DataError, match=r"line 3: column 'b' is empty/NaN"):
        io.numeric_matrix(frame.iloc[:2], ["b"])
    path.write_text("a\n1\ninf\n")
    with pytest.raises(DataError, match=r"line 3: column 'a' is infinite"):
        io.numeric_matrix(io.read_table(path), ["a"])
    assert math.isinf(io.numeric_matrix(io.read_table(path), ["a"], allow_nonfinite=True)[1, 0])


def test_bad_json_names_line(tmp_path):
    (tmp_path / "b.jsonl").write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(DataError, match="line 2: invalid JSON"):
        io.read_jsonl(tmp_path / "b.jsonl")


# ---------------------------------------------------------------- atomic writes


def test_atomic_write_keeps_old_file_on_error(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old\n")
    with pytest.raises(RuntimeError):
        with io.atomic_write(target, force=True) as handle:
            handle.write(b"partial")
            raise RuntimeError("boom")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_atomic_write_refuses_overwrite_without_force(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old\n")
    with pytest.raises(UsageError, match="already exists; pass --force"):
        with io.atomic_write(target) as handle:
            handle.write(b"new")
    with io.atomic_write(target, force=True) as handle:
        handle.write(b"new")
    assert target.read_text() == "new"


def test_atomic_write_missing_folder(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        with io.atomic_write(tmp_path / "no" / "x.csv"):
            pass


def test_refuse_existing_names_the_file_unless_forced(tmp_path):
    out = tmp_path / "out.csv"
    io.refuse_existing(out)  # absent: fine
    io.refuse_existing("-")  # stdout never exists
    out.write_text("kept\n")
    with pytest.raises(UsageError, match=r"out\.csv: already exists; pass --force to overwrite"):
        io.refuse_existing(out)
    io.refuse_existing(out, force=True)
    assert out.read_text() == "kept\n"


def test_parquet_runs_on_one_arrow_thread_each_way(tmp_path):
    """Parquet reads and writes cut pyarrow's pools to one thread (with more, pyarrow 26 aborts the
    process at exit now and then: see io._parquet_engine)."""
    import json
    import subprocess
    import sys

    script = (
        "import json, sys, pandas as pd, pyarrow\n"
        "from methodkit.core import io\n"
        "pools = lambda: [pyarrow.cpu_count(), pyarrow.io_thread_count()]\n"
        "before = pools()\n"
        "io.write_table(pd.DataFrame({'a': [1.0, 2.0]}), sys.argv[1])\n"
        "written = pools()\n"
        "pyarrow.set_cpu_count(4); pyarrow.set_io_thread_count(4)\n"
        "frame = io.read_table(sys.argv[1])\n"
        "print(json.dumps([before, written, pools(), list(frame['a'])]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-P", "-c", script, str(tmp_path / "t.parquet")],
        capture_output=True, text=True, check=True, env={"OMP_NUM_THREADS": "4", "PATH": ""},
    )  # fmt: skip
    before, written, read, values = json.loads(proc.stdout)
    assert before[0] == 4 and written == read == [1, 1] and values == [1.0, 2.0]


# ---------------------------------------------------------------- outputs: modes, special targets, the plan


def _mode(path) -> int:
    import os
    import stat

    return stat.S_IMODE(os.stat(path).st_mode)


def test_new_files_follow_the_umask_and_force_keeps_the_mode(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        io.write_json({"a": 1}, tmp_path / "new.json")
        assert _mode(tmp_path / "new.json") == 0o644
        os.umask(0o077)
        io.write_json({"a": 1}, tmp_path / "private.json")
        assert _mode(tmp_path / "private.json") == 0o600
        os.chmod(tmp_path / "new.json", 0o664)
        io.write_json({"a": 2}, tmp_path / "new.json", force=True)
        assert _mode(tmp_path / "new.json") == 0o664 and io.read_json(tmp_path / "new.json") == {"a": 2}
    finally:
        os.umask(old)


def test_special_targets_are_written_into_and_symlinks_resolved(tmp_path):
    import os
    import stat
    import threading

    # /dev/null exists but is never refused; never pass force=True here: with the fix reverted, a test
    # run as root would replace the machine's /dev/null by a regular file (the bug of issue 22)
    io.write_json({"a": 1}, "/dev/null")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    io.write_json({"b": 2}, fifo, force=True)
    reader.join(10)
    assert got == [b'{"b": 2}\n'] and stat.S_ISFIFO(fifo.lstat().st_mode)
    (tmp_path / "real.json").write_text("old\n")
    os.symlink("real.json", tmp_path / "link.json")
    with pytest.raises(UsageError, match="already exists"):
        io.write_json({"c": 3}, tmp_path / "link.json")
    io.write_json({"c": 3}, tmp_path / "link.json", force=True)
    assert (tmp_path / "link.json").is_symlink() and io.read_json(tmp_path / "real.json") == {"c": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "link.json", "real.json"]


def test_a_plan_renames_claimed_files_together_at_the_end_meta_last(tmp_path, monkeypatch):
    import os

    from methodkit.core import outputs

    order = []
    replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: order.append(os.path.basename(b)) or replace(a, b))
    with outputs.output_plan():
        outputs.claim(tmp_path / "meta.json", last=True, flag="--meta")
        outputs.claim(tmp_path / "out.csv", flag="--output")
        io.write_json({}, tmp_path / "meta.json")
        io.write_table(pd.DataFrame({"a": [1]}), tmp_path / "out.csv")
        io.write_json({}, tmp_path / "unclaimed.json")  # not part of the plan: written at once
        assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["unclaimed.json"]
    assert order == ["unclaimed.json", "out.csv", "meta.json"]
    with pytest.raises(UsageError, match="--meta .*: the same file as --output"):
        with outputs.output_plan():
            outputs.claim(tmp_path / "x.json", flag="--output", force=True)
            outputs.claim(tmp_path / "x.json", flag="--meta", force=True)


def test_a_failed_plan_writes_nothing_and_leaves_no_temporary(tmp_path):
    from methodkit.core import outputs

    (tmp_path / "old.csv").write_text("old\n")
    with pytest.raises(RuntimeError):
        with outputs.output_plan():
            outputs.claim(tmp_path / "old.csv", force=True)
            outputs.claim(tmp_path / "meta.json", last=True)
            io.write_json({}, tmp_path / "meta.json")
            io.write_table(pd.DataFrame({"a": [1]}), tmp_path / "old.csv", force=True)
            raise RuntimeError("the work failed after the writes")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.csv"]
    assert (tmp_path / "old.csv").read_text() == "old\n"


def test_sigterm_while_claimed_files_wait_removes_them(tmp_path):
    """Between a deferred write and the commit SIGTERM ends the command (143) without leftovers."""
    import subprocess
    import sys

    script = (
        "import os, signal, sys\n"
        "from methodkit.core import io, outputs\n"
        "with outputs.output_plan():\n"
        "    outputs.claim(sys.argv[1])\n"
        "    io.write_json({'a': 1}, sys.argv[1])\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    print('not reached')\n"
    )
    proc = subprocess.run([sys.executable, "-P", "-c", script, str(tmp_path / "r.json")], capture_output=True)
    assert proc.returncode == 143 and proc.stdout == b""
    assert list(tmp_path.iterdir()) == []


def test_folder_outputs(tmp_path):
    from methodkit.core.outputs import check_output

    check_output(tmp_path / "new" / "run", folder=True)  # parents are created by the command
    (tmp_path / "empty").mkdir()
    check_output(tmp_path / "empty", folder=True)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    with pytest.raises(UsageError, match="folder exists and is not empty; pass --force"):
        check_output(tmp_path / "busy", folder=True)
    check_output(tmp_path / "busy", folder=True, force=True)
    with pytest.raises(UsageError, match="exists and is not a folder"):
        check_output(tmp_path / "busy" / "x", folder=True)
    with pytest.raises(UsageError, match="is a folder, expected a file name"):
        check_output(tmp_path / "busy")


# ---------------------------------------------------------------- inputs: cut tables, stray text, garbage


@pytest.mark.parametrize(
    "content, message",
    [
        (b"a,b\n1,2\n3,4\n5", "line 4: the last line has no newline"),
        (b"a,b\n1,2\n3,4\n5,6", "line 4: the last line has no newline"),
        (b"a,b\n1,2\n3\n5,6\n", "line 3: expected 2 fields, saw 1"),
        (b'a,b\n1,"x\ny"\n3\n', "line 4: expected 2 fields, saw 1"),  # a quoted newline counts as a line
    ],
)
def test_cut_and_short_rows_are_refused(tmp_path, content, message):
    (tmp_path / "t.csv").write_bytes(content)
    with pytest.raises(DataError) as info:
        io.read_table(tmp_path / "t.csv")
    assert info.value.message.startswith(f"{tmp_path / 't.csv'}: {message}")


def test_empty_trailing_cells_are_not_short_rows(tmp_path):
    (tmp_path / "t.csv").write_bytes(b"a,b\n1,\n3,4\n")
    assert io.read_table(tmp_path / "t.csv")["b"].isna().tolist() == [True, False]


def test_stray_text():
    assert io.stray_text(pd.Series(["1", "2.5", "abc", "4"])) == (2, "abc")
    assert io.stray_text(pd.Series(["a", "b", "1"])) is None  # mostly text: categories
    assert io.stray_text(pd.Series([1.0, 2.0])) is None
    assert io.stray_text(pd.Series(["1", None, "2"])) is None


def test_garbage_and_binary_inputs(tmp_path):
    (tmp_path / "g.npz").write_bytes(bytes(range(256)))
    with pytest.raises(DataError, match=r"g\.npz: not a NPY/NPZ file \(unrecognised content"):
        io.read_arrays(tmp_path / "g.npz")
    (tmp_path / "g.json").write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(DataError, match=r"g\.json: not UTF-8 text \(byte 0\)"):
        io.read_json(tmp_path / "g.json")
    (tmp_path / "n.jsonl").write_bytes(b'{"a": 1}\n\x00\x01\n')
    with pytest.raises(DataError, match=r"n\.jsonl: binary data"):
        io.read_jsonl(tmp_path / "n.jsonl")


@pytest.mark.parametrize(
    "content, message",
    [
        (b'{"a": 1, "b": 2}\n{"a": 3, "b": 4}', "line 2: the last line has no newline"),
        (b'{"a": 1, "b": 2}\n{"a": 3}\n', "line 2: expected 2 fields like line 1, saw 1 (missing b)"),
        (
            b'{"a": 1, "b": 2}\n\n{"a": 3, "c": 4}\n',
            "line 3: expected 2 fields like line 1, saw 2 (missing b; unexpected c)",
        ),
        (
            b'{"a": 1, "b": 2}\n{"a": 3, "b": 4, "c": 5}\n',
            "line 2: expected 2 fields like line 1, saw 3 (unexpected c)",
        ),
        (b'{"a": 1}\n[1]\n', "line 2: expected a JSON object, saw list"),
        (b'{"a": 1}\n{"a": \n', "line 2: invalid JSON"),
    ],
)
def test_short_and_ragged_jsonl_records_are_refused(tmp_path, content, message):
    (tmp_path / "t.jsonl").write_bytes(content)
    with pytest.raises(DataError) as info:
        io.read_table(tmp_path / "t.jsonl")
    assert info.value.message.startswith(f"{tmp_path / 't.jsonl'}: {message}")
    if b"[1]" not in content:
        with pytest.raises(DataError) as info:
            io.read_jsonl(tmp_path / "t.jsonl", same_keys=True)
        assert info.value.message.startswith(f"{tmp_path / 't.jsonl'}: {message}")


def test_jsonl_from_a_pipe_may_end_without_a_newline(tmp_path):
    src = io.InputBytes(b'{"a": 1}\n{"a": 2}', "<stdin>", "", True)
    assert io.read_table(src, "jsonl")["a"].tolist() == [1, 2]
    assert io.read_jsonl(src) == [{"a": 1}, {"a": 2}]
    (tmp_path / "h.jsonl").write_bytes(b'{"a": 1}\n{"b": 2}\n')
    assert io.read_jsonl(tmp_path / "h.jsonl") == [{"a": 1}, {"b": 2}]  # records of a list may differ
