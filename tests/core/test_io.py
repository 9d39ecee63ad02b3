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
