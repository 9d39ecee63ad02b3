"""Real PLS regression data from Debian's R packages, read without R.

r-cran-caret ships tecator, BloodBrain and cox2 as .RData files; r-cran-pls ships
gasoline, yarn, mayonnaise and oliveoil in a lazy-load database (Rdata.rdx + Rdata.rdb).
We never `apt-get install` them (that pulls R): `fetch()` runs `apt-get download` and
`dpkg-deb -x` into a cache folder, converts every data set once to Parquet there, and
the loaders read the Parquet files. Reading R files needs the PyPI package `rdata`.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import tempfile
import warnings
import zlib
from pathlib import Path

from methodkit.core import io
from methodkit.core.errors import DataError, RunFailure, require

PACKAGES = ("r-cran-caret", "r-cran-pls")
CARET = "usr/lib/R/site-library/caret/data"
PLS = "usr/lib/R/site-library/pls/data"


def cache_dir() -> Path:
    """$METHODKIT_PLS_DATA, else ~/.cache/methodkit/pls."""
    env = os.environ.get("METHODKIT_PLS_DATA")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "methodkit" / "pls"


def parquet_path(name: str) -> Path:
    return cache_dir() / f"{name}.parquet"


# ---------------------------------------------------------------- matrix columns -> flat frames


def _matrix_frame(prefix: str, matrix, labels=None):
    import numpy as np
    import pandas as pd

    values = np.asarray(matrix, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    names = [f"{prefix}_{j + 1}" for j in range(values.shape[1])] if labels is None else [str(x) for x in labels]
    return pd.DataFrame(values, columns=names)


def tecator_frame(rdata_file: Path):
    """absorp_1..absorp_100 (NIR absorbance, 850-1050 nm), then moisture, fat, protein (percent)."""
    import pandas as pd

    rdata = require("rdata", "pls")
    objects = rdata.read_rda(str(rdata_file))
    ends = _matrix_frame("e", objects["endpoints"], ["moisture", "fat", "protein"])
    return pd.concat([_matrix_frame("absorp", objects["absorp"]), ends], axis=1)


def caret_descriptor_frame(rdata_file: Path, descriptors: str, response: str, response_name: str):
    import pandas as pd

    rdata = require("rdata", "pls")
    objects = rdata.read_rda(str(rdata_file))
    frame = pd.DataFrame(objects[descriptors]).reset_index(drop=True)
    frame.columns = [str(c) for c in frame.columns]
    frame = frame.apply(pd.to_numeric, errors="coerce").astype(float)
    frame[response_name] = pd.Series(objects[response]).astype(float).to_numpy()
    return frame


def lazyload_objects(folder: Path) -> dict:
    """Every object of an R lazy-load database: the .rdx index is gzip'd R serialisation of
    {variables: {name: (offset, length)}}; each .rdb record is a 4-byte length then a zlib stream.
    data.frame columns are kept as they are (pls stores AsIs matrices inside data frames)."""
    rdata = require("rdata", "pls")
    from rdata import conversion, parser

    def keep_columns(obj, attrs):
        return dict(obj)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rdata: "Unknown file type: assumed RDS"
        index = conversion.convert(parser.parse_data(gzip.decompress((folder / "Rdata.rdx").read_bytes())))
        blob = (folder / "Rdata.rdb").read_bytes()
        out = {}
        for name, (offset, length) in index["variables"].items():
            record = blob[int(offset) : int(offset) + int(length)]
            parsed = parser.parse_data(zlib.decompress(record[4:]))
            out[str(name)] = conversion.convert(parsed, {**conversion.DEFAULT_CLASS_MAP, "data.frame": keep_columns})
    del rdata
    return out


def pls_frames(folder: Path) -> dict:
    """gasoline, yarn, mayonnaise, oliveoil as flat frames (matrix columns become PREFIX_j)."""
    import numpy as np
    import pandas as pd

    objects = lazyload_objects(folder)
    frames = {}
    for name, columns in objects.items():
        parts = []
        for column, values in columns.items():
            column = str(column).replace(".", "_")
            array = np.asarray(values)
            if array.ndim == 2:
                parts.append(_matrix_frame(column, array))
            elif array.dtype.kind in "biuf":
                parts.append(pd.DataFrame({column: array.astype(float)}))
            else:
                parts.append(pd.DataFrame({column: array.astype(str)}))
        frames[name] = pd.concat(parts, axis=1)
    return frames


# ---------------------------------------------------------------- fetch


def convert(root: Path, out: Path) -> list[str]:
    """Convert the extracted package trees under root into Parquet files in out; return the names."""
    out.mkdir(parents=True, exist_ok=True)
    frames = {
        "tecator": tecator_frame(root / CARET / "tecator.RData"),
        "bloodbrain": caret_descriptor_frame(root / CARET / "BloodBrain.RData", "bbbDescr", "logBBB", "logBBB"),
        "cox2": caret_descriptor_frame(root / CARET / "cox2.RData", "cox2Descr", "cox2IC50", "IC50"),
    }
    frames.update(pls_frames(root / PLS))
    for name, frame in frames.items():
        io.write_table(frame, out / f"{name}.parquet", force=True)  # atomic: tmp file + rename
    return sorted(frames)


def fetch(out: Path | None = None) -> list[str]:
    """apt-get download the two packages, dpkg-deb -x them, convert to Parquet in the cache."""
    require("rdata", "pls")
    out = out or cache_dir()
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise RunFailure(f"'{tool}' not found: fetching the R data sets needs a Debian-based system")
    with tempfile.TemporaryDirectory(prefix="methodkit-pls-") as tmp:
        work = Path(tmp)
        proc = subprocess.run(["apt-get", "download", *PACKAGES], cwd=work, capture_output=True, text=True)
        debs = sorted(work.glob("*.deb"))
        if proc.returncode != 0 or len(debs) < len(PACKAGES):
            last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
            raise RunFailure(f"apt-get download {' '.join(PACKAGES)} failed ({last}); run 'apt-get update' first")
        for deb in debs:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(work / "root")], check=True)
        return convert(work / "root", out)


def load(name: str):
    """A fetched data set from the Parquet cache."""
    path = parquet_path(name)
    if not path.exists():
        raise DataError(f"data set '{name}' is not fetched yet; run 'pls-test datasets --fetch' (apt-get download)")
    return io.read_table(path)
