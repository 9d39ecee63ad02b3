"""Reading and writing the standard formats, with errors a user can act on.

Tables: CSV, TSV, Parquet, JSONL, JSON (array of records). Arrays: NPY, NPZ.
Documents: JSON. `-` is stdin/stdout. `.gz`, `.xz` and `.bz2` inputs are
decompressed by extension. Every file output goes through `atomic_write`.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import json
import lzma
import math
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from methodkit.core.errors import DataError, UsageError
from methodkit.core.outputs import Terminated, atomic_write, check_output  # noqa: F401 (re-exported)

TABLE_FORMATS = ("csv", "tsv", "parquet", "jsonl", "json")
ARRAY_FORMATS = ("npy", "npz")
BINARY_FORMATS = ("parquet", "npy", "npz")
_EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".npy": "npy",
    ".npz": "npz",
}
_DECOMPRESSORS = {".gz": gzip.decompress, ".xz": lzma.decompress, ".bz2": bz2.decompress}


def display_name(path: str | os.PathLike) -> str:
    """How a path is named in messages (`<stdin>` for `-`)."""
    return "<stdin>" if str(path) == "-" else str(path)


def format_from_path(path: str | os.PathLike, explicit: str | None = None, default: str | None = None) -> str:
    """The format of `path`: the explicit flag wins, then the extension, then `default`."""
    if explicit:
        return explicit.lower()
    name = str(path)
    if name != "-":
        suffixes = [s.lower() for s in Path(name).suffixes]
        if suffixes and suffixes[-1] in _DECOMPRESSORS:
            suffixes.pop()
        if suffixes and suffixes[-1] in _EXTENSIONS:
            return _EXTENSIONS[suffixes[-1]]
    if default:
        return default
    known = ", ".join(sorted(_EXTENSIONS))
    raise UsageError(f"{display_name(path)}: cannot tell the format from the extension (known: {known}); pass --format")


@dataclass(frozen=True)
class InputBytes:
    """The bytes of one input, decompressed, with its name and digest (for --meta).

    `pipe` is True when it came through a pipe or FIFO, where a last line without a newline is
    normal (`printf`), whereas in a file it means the file was cut short.
    """

    data: bytes
    name: str
    sha256: str
    pipe: bool = False


def _is_pipe(fd_or_path) -> bool:
    try:
        mode = os.fstat(fd_or_path).st_mode if isinstance(fd_or_path, int) else os.stat(fd_or_path).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def require_input(path: str | os.PathLike) -> None:
    """Refuse a missing input (or a folder) by name without reading it: a command checks this, then
    its flags, then reads, so a missing file is named first and a bad flag fails before a large read."""
    if str(path) == "-":
        return
    p = Path(path)
    if p.is_dir():
        raise DataError(f"{display_name(path)}: is a directory, expected a file")
    if not p.exists():
        raise DataError(f"{display_name(path)}: no such file")


def read_input_bytes(path: str | os.PathLike) -> InputBytes:
    """Read a whole input (file or `-`), decompressing .gz/.xz/.bz2 by extension."""
    name = display_name(path)
    if str(path) == "-":
        raw = sys.stdin.buffer.read()
        pipe = _is_pipe(sys.stdin.fileno()) if hasattr(sys.stdin, "fileno") else True
    else:
        p = Path(path)
        pipe = _is_pipe(p)
        require_input(path)
        try:
            raw = p.read_bytes()
        except FileNotFoundError:
            raise DataError(f"{name}: no such file") from None
        except PermissionError:
            raise DataError(f"{name}: permission denied") from None
        decompress = _DECOMPRESSORS.get(p.suffix.lower())
        if decompress is not None:
            try:
                raw = decompress(raw)
            except Exception as exc:
                raise DataError(f"{name}: cannot decompress ({exc})") from None
    return InputBytes(raw, name, hashlib.sha256(raw).hexdigest(), pipe)


def decode_text(source: str | os.PathLike | InputBytes) -> str:
    """An input as UTF-8 text; a binary or otherwise undecodable file is a DataError naming it."""
    src = _as_input(source)
    try:
        text = src.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{src.name}: not UTF-8 text (byte {exc.start}); is it the right file? (convert with iconv -t utf-8)"
        ) from None
    if "\x00" in text:
        raise DataError(f"{src.name}: binary data (a NUL byte at offset {text.index(chr(0))}), expected text")
    return text


def _as_input(source: str | os.PathLike | InputBytes) -> InputBytes:
    return source if isinstance(source, InputBytes) else read_input_bytes(source)


# ---------------------------------------------------------------- tables

_FIELDS_RE = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def _parquet_engine() -> None:
    """Cut pyarrow's CPU and I/O thread pools to one thread each, before every Parquet read and write.

    With bigger pools pyarrow 26 aborts the process at exit now and then ("terminate called without
    an active exception", apache/arrow#34314), more often on a loaded machine: read_table("-") then
    write_table("-") of Parquet, 4 processes at a time on 2 cores, died in 23 of 300 runs with the
    default pools and in 0 of 300 with one thread (the suite's stdin round-trip test had failed so in
    a fresh-clone CI). A finished tool must not die on the way out; the price is single-threaded
    decoding of large Parquet files.
    """
    import pyarrow

    pyarrow.set_cpu_count(1)
    pyarrow.set_io_thread_count(1)


def read_table(
    source: str | os.PathLike | InputBytes,
    fmt: str | None = None,
    *,
    default_format: str = "csv",
    allow_empty: bool = False,
):
    """Read a table into a pandas DataFrame; malformed rows are reported with their line number."""
    import pandas as pd

    src = _as_input(source)
    name = src.name
    kind = format_from_path(name if name != "<stdin>" else "-", fmt, default_format)
    if kind not in TABLE_FORMATS:
        raise UsageError(f"{name}: '{kind}' is not a table format (expected one of {', '.join(TABLE_FORMATS)})")
    if not src.data.strip() and kind != "parquet":
        raise DataError(f"{name}: empty input, expected a {kind.upper()} table")
    if kind in ("csv", "tsv"):
        refuse_cut_text(src, kind)
    if kind == "jsonl":
        _refuse_ragged_records(src, _jsonl_records(src))  # pandas fills a short or misspelt record with NaN
    buffer = io.BytesIO(src.data)
    try:
        if kind in ("csv", "tsv"):
            frame = pd.read_csv(buffer, sep="," if kind == "csv" else "\t", engine="c")
        elif kind == "parquet":
            _parquet_engine()
            frame = pd.read_parquet(buffer)
        elif kind == "jsonl":
            frame = pd.read_json(buffer, lines=True, precise_float=True)
        else:
            records = json.loads(src.data)
            if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
                raise DataError(f"{name}: a JSON table must be an array of objects")
            frame = pd.DataFrame.from_records(records)
    except DataError:
        raise
    except pd.errors.ParserError as exc:
        match = _FIELDS_RE.search(str(exc))
        if match:
            expected, line, saw = match.groups()
            raise DataError(f"{name}: line {line}: expected {expected} fields, saw {saw}") from None
        raise DataError(f"{name}: malformed {kind.upper()}: {_first_line(exc)}") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{name}: not UTF-8 text (byte {exc.start}); convert it with iconv -t utf-8") from None
    except ValueError as exc:
        raise DataError(f"{name}: malformed {kind.upper()}: {_first_line(exc)}") from None
    except Exception as exc:  # pyarrow raises its own types for corrupt files
        raise DataError(f"{name}: cannot read as {kind.upper()}: {_first_line(exc)}") from None
    if kind in ("csv", "tsv") and len(frame.columns) and frame.iloc[:, -1].isna().any():
        _refuse_short_rows(src, "," if kind == "csv" else "\t", len(frame.columns))  # a short row ends in NaN
    if not allow_empty and len(frame) == 0:
        raise DataError(f"{name}: the table has no rows")
    frame.attrs["source"] = name
    frame.attrs["format"] = kind
    return frame


def refuse_cut_text(src: InputBytes, kind: str) -> None:
    """A text table from a file whose last line has no newline was most likely cut short (a full
    disk, a killed writer): its last value may be cut too, which no parser can see. From a pipe
    it is common (`printf`) and accepted."""
    if src.pipe or src.data.endswith(b"\n"):
        return
    line = src.data.count(b"\n") + 1
    raise DataError(
        f"{src.name}: line {line}: the last line has no newline, so the file looks cut short; "
        f"if it is complete, end it with a newline (echo >> {src.name})"
    )


def _refuse_short_rows(src: InputBytes, sep: str, expected: int) -> None:
    """pandas pads a row with too few fields with NaN; name the first such row instead."""
    import csv

    reader = csv.reader(io.StringIO(src.data.decode("utf-8", errors="replace"), newline=""), delimiter=sep)
    for row in reader:
        if row and len(row) != expected:
            if reader.line_num == 1:
                continue  # the header itself
            raise DataError(f"{src.name}: line {reader.line_num}: expected {expected} fields, saw {len(row)}")


def stray_text(series) -> tuple[int, str] | None:
    """(position, value) of the first cell that is not a number in a column whose other cells
    mostly are (at least half): one typo that would silently turn a numeric column into text."""
    import numpy as np
    import pandas as pd

    if pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
        return None
    present = series.notna().to_numpy()
    if not present.any():
        return None
    numbers = pd.to_numeric(series, errors="coerce").notna().to_numpy()
    if numbers.sum() * 2 < present.sum() or numbers.sum() == present.sum():
        return None
    i = int(np.flatnonzero(present & ~numbers)[0])
    return i, str(series.iloc[i])


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def row_label(frame, position: int) -> str:
    """How row `position` (0-based) is named: its file line for CSV/TSV/JSONL, else its row number."""
    kind = frame.attrs.get("format")
    if kind in ("csv", "tsv"):
        return f"line {position + 2}"  # header is line 1
    if kind == "jsonl":
        return f"line {position + 1}"
    return f"row {position + 1}"


def require_columns(frame, columns, flag: str | None = None) -> None:
    """Raise DataError naming the first missing column, the columns present and the flag to fix it."""
    name = frame.attrs.get("source", "input")
    present = [str(c) for c in frame.columns]
    for column in columns:
        if column not in frame.columns:
            hint = f"; pass {flag}" if flag else ""
            raise DataError(f"column '{column}' not found in {name} (columns: {', '.join(present)}){hint}")


def numeric_matrix(frame, columns=None, *, allow_nonfinite: bool = False, allow_missing: bool = False, dtype="float64"):
    """The given columns as a float array; non-numeric cells and (unless allowed) NaN/inf are errors.

    allow_missing lets empty cells (NaN) through but still refuses infinite ones."""
    import numpy as np
    import pandas as pd

    name = frame.attrs.get("source", "input")
    columns = list(frame.columns if columns is None else columns)
    require_columns(frame, columns)
    out = np.empty((len(frame), len(columns)), dtype=dtype)
    for j, column in enumerate(columns):
        values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype="float64")
        original = frame[column]
        bad_text = np.flatnonzero(np.isnan(values) & original.notna().to_numpy())
        if bad_text.size:
            i = int(bad_text[0])
            raise DataError(
                f"{name}: {row_label(frame, i)}: column '{column}' is not numeric ({str(original.iloc[i])!r})"
            )
        if not allow_nonfinite:
            bad = np.flatnonzero(np.isinf(values) if allow_missing else ~np.isfinite(values))
            if bad.size:
                i = int(bad[0])
                what = "empty/NaN" if np.isnan(values[i]) else "infinite"
                raise DataError(f"{name}: {row_label(frame, i)}: column '{column}' is {what}; remove or impute it")
        out[:, j] = values
    return out


def write_table(frame, path: str | os.PathLike = "-", fmt: str | None = None, *, force: bool = False) -> None:
    """Write a DataFrame as CSV/TSV/Parquet/JSONL/JSON (format from flag or extension, CSV on stdout)."""
    kind = format_from_path(path, fmt, "csv")
    if kind not in TABLE_FORMATS:
        raise UsageError(f"'{kind}' is not a table format (expected one of {', '.join(TABLE_FORMATS)})")
    binary = kind == "parquet"
    with atomic_write(path, binary=True, force=force) as handle:
        if kind in ("csv", "tsv"):
            text = frame.to_csv(index=False, sep="," if kind == "csv" else "\t", lineterminator="\n", na_rep="")
            handle.write(text.encode("utf-8"))
        elif binary:
            buffer = io.BytesIO()
            _parquet_engine()
            frame.to_parquet(buffer, index=False)
            handle.write(buffer.getvalue())
        elif kind == "jsonl":
            for record in frame.to_dict(orient="records"):
                handle.write((dumps_json(record) + "\n").encode("utf-8"))
        else:
            handle.write((dumps_json(frame.to_dict(orient="records")) + "\n").encode("utf-8"))


# ---------------------------------------------------------------- arrays and documents


def read_arrays(source: str | os.PathLike | InputBytes) -> dict[str, Any]:
    """Read NPY (as {'arr_0': a}) or NPZ into a dict of arrays; pickled objects are refused."""
    import numpy as np

    src = _as_input(source)
    try:
        loaded = np.load(io.BytesIO(src.data), allow_pickle=False)
        if isinstance(loaded, np.ndarray):
            return {"arr_0": loaded}
        with loaded:
            return {key: loaded[key] for key in loaded.files}
    except Exception as exc:
        raise DataError(f"{src.name}: not a NPY/NPZ file ({_array_problem(src.data, exc)})") from None


def _array_problem(data: bytes, exc: BaseException) -> str:
    """Why bytes are not a usable NPY/NPZ, in words that never advise unpickling."""
    if data[:6] == b"\x93NUMPY":
        text = str(exc)
        if "pickle" in text.lower():
            return "it holds Python objects (a pickle), which are never loaded; save plain numeric arrays"
        return "a damaged NPY: " + _first_line(exc)
    if data[:4] == b"PK\x03\x04":
        return "a damaged or non-array ZIP: " + _first_line(exc)[:120]
    return "unrecognised content: neither the NPY magic nor a ZIP archive"


def write_arrays(
    path: str | os.PathLike, arrays: dict[str, Any], *, force: bool = False, compressed: bool = True
) -> None:
    """Write arrays as NPZ (or NPY when the path ends in .npy and there is one array)."""
    import numpy as np

    kind = format_from_path(path, None, "npz")
    buffer = io.BytesIO()
    if kind == "npy":
        if len(arrays) != 1:
            raise UsageError(f"{display_name(path)}: NPY holds one array, got {len(arrays)}; use .npz")
        np.save(buffer, next(iter(arrays.values())), allow_pickle=False)
    elif compressed:
        np.savez_compressed(buffer, **arrays)
    else:
        np.savez(buffer, **arrays)
    with atomic_write(path, binary=True, force=force) as handle:
        handle.write(buffer.getvalue())


def read_json(source: str | os.PathLike | InputBytes):
    """Read one JSON document."""
    src = _as_input(source)
    text = decode_text(src)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{src.name}: line {exc.lineno}: invalid JSON ({exc.msg})") from None


def _jsonl_records(src: InputBytes) -> list[tuple[int, Any]]:
    """(line number, value) of every non-blank line: binary data, a file cut short (as for CSV) and
    the first line that is not JSON are refused, in that order."""
    text = decode_text(src)
    refuse_cut_text(src, "jsonl")
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise DataError(f"{src.name}: line {number}: invalid JSON ({exc.msg})") from None
    return out


def _refuse_ragged_records(src: InputBytes, records: list[tuple[int, Any]]) -> None:
    """Every record of a JSONL table is an object with the first record's keys: a short record
    (a key left out) or a ragged one (a key added or misspelt) is named with its line and keys."""
    keys = None
    for number, record in records:
        if not isinstance(record, dict):
            raise DataError(f"{src.name}: line {number}: expected a JSON object, saw {type(record).__name__}")
        if keys is None:
            keys = list(record)
            continue
        if record.keys() != set(keys):
            missing = [k for k in keys if k not in record]
            extra = [k for k in record if k not in set(keys)]
            what = "; ".join(
                part
                for part in (
                    f"missing {', '.join(missing)}" if missing else "",
                    f"unexpected {', '.join(extra)}" if extra else "",
                )
                if part
            )
            raise DataError(
                f"{src.name}: line {number}: expected {len(keys)} fields like line {records[0][0]}, "
                f"saw {len(record)} ({what})"
            )


def read_jsonl(source: str | os.PathLike | InputBytes, *, same_keys: bool = False) -> list:
    """Read JSON Lines into a list of objects, naming the first malformed line.

    A file whose last line has no newline is refused as cut short (as for tables; a pipe may end
    without one); with `same_keys` every record must be an object with the first one's keys.
    """
    src = _as_input(source)
    records = _jsonl_records(src)
    if same_keys:
        _refuse_ragged_records(src, records)
    return [record for _, record in records]


def jsonable(value):
    """Convert NumPy scalars/arrays, paths and non-finite floats (-> None) into JSON-ready values."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    tolist = getattr(value, "tolist", None)  # NumPy scalars and arrays
    if callable(tolist):
        return jsonable(tolist())
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return jsonable(to_dict())
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def dumps_json(value) -> str:
    """One-line JSON with NaN/Inf written as null."""
    return json.dumps(jsonable(value), ensure_ascii=False, allow_nan=False)


def write_json(value, path: str | os.PathLike = "-", *, force: bool = False, indent: int | None = None) -> None:
    """Write one JSON document (one line unless indent is given) followed by a newline."""
    text = dumps_json(value) if indent is None else json.dumps(jsonable(value), indent=indent, allow_nan=False)
    with atomic_write(path, binary=True, force=force) as handle:
        handle.write((text + "\n").encode("utf-8"))


# ---------------------------------------------------------------- atomic output


def refuse_existing(path: str | os.PathLike, force: bool = False) -> None:
    """An output that could not be written (an existing file without --force, a missing folder)
    is a usage error now; stdout and special files such as /dev/null are never refused."""
    check_output(path, force=force)
