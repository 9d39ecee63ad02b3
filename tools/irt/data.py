"""Response matrices in and out: canonical NPZ, long tables, wide tables; validation.

NPZ keys: Y (uint8 N x J, 255 = missing), model_id, item_id, optional truth theta, a, b, c,
benchmark (per item), and meta (a JSON string with the full generating spec and seed).
Long tables have columns model_id, item_id, correct; wide tables have one row per model
and one column per item (0/1/empty), with an optional first column `model_id`.
"""

from __future__ import annotations

import io as _io
import json
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import DataError, UsageError

MISSING = 255
MIN_MODELS, MIN_ITEMS = 5, 3
MAX_MISSING = 0.95


@dataclass
class ResponseData:
    Y: np.ndarray
    model_id: np.ndarray
    item_id: np.ndarray
    theta: np.ndarray | None = None
    a: np.ndarray | None = None
    b: np.ndarray | None = None
    c: np.ndarray | None = None
    benchmark: np.ndarray | None = None
    meta: dict = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int]:
        return self.Y.shape

    def has_truth(self) -> bool:
        return self.theta is not None and self.b is not None

    def to_arrays(self) -> dict:
        arrays = {
            "Y": self.Y.astype(np.uint8),
            "model_id": np.asarray(self.model_id, dtype=str),
            "item_id": np.asarray(self.item_id, dtype=str),
            "meta": np.array(json.dumps(self.meta, sort_keys=True)),
        }
        for key in ("theta", "a", "b", "c"):
            value = getattr(self, key)
            if value is not None:
                arrays[key] = np.asarray(value, dtype=np.float64)
        if self.benchmark is not None:
            arrays["benchmark"] = np.asarray(self.benchmark, dtype=str)
        return arrays

    def subset(self, rows=None, cols=None) -> ResponseData:
        rows = slice(None) if rows is None else rows
        cols = slice(None) if cols is None else cols
        pick = lambda v, s: None if v is None else np.asarray(v)[s]  # noqa: E731
        return ResponseData(
            self.Y[rows][:, cols],
            np.asarray(self.model_id)[rows],
            np.asarray(self.item_id)[cols],
            pick(self.theta, rows),
            pick(self.a, cols),
            pick(self.b, cols),
            pick(self.c, cols),
            pick(self.benchmark, cols),
            dict(self.meta),
        )


def from_arrays(arrays: dict, name: str) -> ResponseData:
    """A ResponseData from NPZ arrays, checked."""
    if "Y" not in arrays:
        raise DataError(
            f"{name}: NPZ has no 'Y' array (keys: {', '.join(sorted(arrays))}); expected irt-sim draw output"
        )
    Y = np.asarray(arrays["Y"])
    if Y.ndim != 2:
        raise DataError(f"{name}: 'Y' must be a 2-D models x items matrix, got shape {Y.shape}")
    N, J = Y.shape
    model_id = np.asarray(arrays.get("model_id", [f"m{i}" for i in range(N)])).astype(str)
    item_id = np.asarray(arrays.get("item_id", [f"i{j}" for j in range(J)])).astype(str)
    if len(model_id) != N or len(item_id) != J:
        raise DataError(f"{name}: model_id/item_id lengths ({len(model_id)}, {len(item_id)}) do not match Y {Y.shape}")
    values = Y.astype(np.float64)
    values[Y == MISSING] = np.nan
    Y = binary_matrix(values, name, model_id, item_id)
    meta = {}
    if "meta" in arrays:
        try:
            meta = json.loads(str(arrays["meta"]))
        except json.JSONDecodeError:
            raise DataError(f"{name}: 'meta' is not a JSON string") from None
    get = lambda k, n: None if k not in arrays else np.asarray(arrays[k], dtype=np.float64).reshape(-1)[:n]  # noqa: E731
    data = ResponseData(Y, model_id, item_id, get("theta", N), get("a", J), get("b", J), get("c", J), meta=meta)
    if "benchmark" in arrays:
        data.benchmark = np.asarray(arrays["benchmark"]).astype(str)
    for key, n in (("theta", N), ("a", J), ("b", J), ("c", J)):
        if key in arrays and np.asarray(arrays[key]).size != n:
            raise DataError(f"{name}: truth '{key}' has {np.asarray(arrays[key]).size} values, expected {n}")
    check_ids(model_id, "model_id", name)
    check_ids(item_id, "item_id", name)
    return data


def binary_matrix(values: np.ndarray, name: str, model_id, item_id, binarize: float | None = None) -> np.ndarray:
    """Float matrix (NaN = missing) -> uint8 0/1/255; other values are an error listing offending cells."""
    if binarize is not None:
        values = np.where(np.isnan(values), np.nan, (values >= binarize).astype(float))
    bad = ~np.isnan(values) & (values != 0) & (values != 1)
    if bad.any():
        rows, cols = np.nonzero(bad)
        cells = ", ".join(
            f"model '{model_id[r]}' item '{item_id[c]}' = {values[r, c]:g}" for r, c in zip(rows[:3], cols[:3])
        )
        more = f" and {bad.sum() - 3} more" if bad.sum() > 3 else ""
        raise DataError(
            f"{name}: responses must be 0, 1 or empty; {bad.sum()} cells are not ({cells}{more}); "
            "pass --binarize THRESH for scores"
        )
    out = np.full(values.shape, MISSING, dtype=np.uint8)
    observed = ~np.isnan(values)
    out[observed] = values[observed].astype(np.uint8)
    return out


def check_ids(ids, what: str, name: str) -> None:
    seen, dup = set(), []
    for value in ids:
        if value in seen:
            dup.append(value)
        seen.add(value)
    if dup:
        raise DataError(f"{name}: duplicate {what} '{dup[0]}' ({len(dup)} duplicates); ids must be unique")


def from_long(frame, name: str, binarize: float | None = None) -> ResponseData:
    """model_id, item_id, correct rows -> matrix (absent pairs are missing)."""
    import pandas as pd

    dup = frame.duplicated(["model_id", "item_id"])
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        row = frame.iloc[i]
        raise DataError(
            f"{name}: duplicate response for model '{row['model_id']}' item '{row['item_id']}' (row {i + 1}); "
            "each (model_id, item_id) pair must appear once"
        )
    correct = pd.to_numeric(frame["correct"], errors="coerce")
    text = correct.isna() & frame["correct"].notna()
    if text.any():
        i = int(np.flatnonzero(text.to_numpy())[0])
        raise DataError(f"{name}: row {i + 1}: 'correct' is not a number ({frame['correct'].iloc[i]!r})")
    models = pd.Index(pd.unique(frame["model_id"].astype(str)))
    items = pd.Index(pd.unique(frame["item_id"].astype(str)))
    values = np.full((len(models), len(items)), np.nan)
    values[models.get_indexer(frame["model_id"].astype(str)), items.get_indexer(frame["item_id"].astype(str))] = correct
    model_id, item_id = models.to_numpy(dtype=str), items.to_numpy(dtype=str)
    return ResponseData(binary_matrix(values, name, model_id, item_id, binarize), model_id, item_id)


def from_wide(frame, name: str, binarize: float | None = None) -> ResponseData:
    """Rows = models, columns = items; a first column `model_id` (or any text column first) names the rows."""
    import pandas as pd

    first = frame.columns[0]
    if str(first) == "model_id" or not pd.api.types.is_numeric_dtype(frame[first]) and _is_text(frame[first]):
        model_id = frame[first].astype(str).to_numpy()
        frame = frame.drop(columns=[first])
    else:
        model_id = np.array([f"m{i + 1}" for i in range(len(frame))])
    item_id = np.array([str(c) for c in frame.columns])
    check_ids(model_id, "model_id", name)
    check_ids(item_id, "item_id", name)
    values = np.empty(frame.shape)
    for j, column in enumerate(frame.columns):
        col = pd.to_numeric(frame[column], errors="coerce")
        text = col.isna() & frame[column].notna()
        if text.any():
            i = int(np.flatnonzero(text.to_numpy())[0])
            raise DataError(f"{name}: model '{model_id[i]}' item '{column}': not a number ({frame[column].iloc[i]!r})")
        values[:, j] = col.to_numpy(dtype=float)
    return ResponseData(binary_matrix(values, name, model_id, item_id, binarize), model_id, item_id)


def _is_text(series) -> bool:
    import pandas as pd

    return bool(pd.to_numeric(series, errors="coerce").isna().any())


def read_headerless_csv(raw: bytes, name: str):
    """A wide CSV without header (PSN-IRT's combine.csv): columns become i1..iJ."""
    import pandas as pd

    _refuse_ragged_rows(raw, name)
    try:
        frame = pd.read_csv(_io.BytesIO(raw), header=None)
    except pd.errors.ParserError as exc:
        raise DataError(f"{name}: malformed CSV ({str(exc).strip().splitlines()[0]})") from None
    except pd.errors.EmptyDataError:
        raise DataError(f"{name}: empty input, expected a CSV table") from None
    frame.columns = [f"i{j + 1}" for j in range(frame.shape[1])]
    frame.attrs["source"] = name
    return frame


def _refuse_ragged_rows(raw: bytes, name: str) -> None:
    """Every row as long as the first: pandas pads a short row with NaN (read as missing responses)."""
    import csv

    reader = csv.reader(_io.StringIO(raw.decode("utf-8", errors="replace"), newline=""))
    expected = None
    for row in reader:
        if not row:
            continue
        if expected is None:
            expected = len(row)
        elif len(row) != expected:
            raise DataError(f"{name}: line {reader.line_num}: expected {expected} fields, saw {len(row)}")


def from_table(frame, name: str, binarize: float | None = None) -> ResponseData:
    cols = {str(c) for c in frame.columns}
    if {"model_id", "item_id", "correct"} <= cols:
        return from_long(frame, name, binarize)
    return from_wide(frame, name, binarize)


@dataclass
class Screen:
    """What `screen` found: extreme rows/items, and the warnings to show."""

    all_correct_models: int
    all_wrong_models: int
    all_correct_items: int
    all_wrong_items: int
    dropped_models: int = 0
    dropped_items: int = 0
    warnings: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "warnings"}


def extremes(Y: np.ndarray):
    obs = Y != MISSING
    ones = (Y == 1).sum(axis=1), (Y == 1).sum(axis=0)
    nobs = obs.sum(axis=1), obs.sum(axis=0)
    return (ones[0] == nobs[0]), (ones[0] == 0), (ones[1] == nobs[1]), (ones[1] == 0)


EXTREME_WARN_SHARE = 0.05  # MML/MCMC: warn when more than this share of models or items is all-0/all-1


def _extreme_share(report: Screen, N: int, J: int) -> float:
    models = (report.all_correct_models + report.all_wrong_models) / N
    return max(models, (report.all_correct_items + report.all_wrong_items) / J)


def screen(
    data: ResponseData, name: str, *, model: str, method: str, drop_extreme: bool = False
) -> tuple[ResponseData, Screen]:
    """Refuse unusable matrices; count (and optionally drop) all-0/all-1 rows and items; collect warnings."""
    N, J = data.shape
    if N < MIN_MODELS or J < MIN_ITEMS:
        raise DataError(
            f"{name}: {N} models x {J} items is too small; IRT needs at least {MIN_MODELS} models and {MIN_ITEMS} items"
        )
    missing = float((data.Y == MISSING).mean())
    if missing > MAX_MISSING:
        raise DataError(
            f"{name}: {missing:.1%} of responses are missing (more than {MAX_MISSING:.0%}); too sparse to fit"
        )
    observed = data.Y[data.Y != MISSING]
    if observed.size and (observed == observed[0]).all():
        raise DataError(
            f"{name}: every observed response is {int(observed[0])}, so no item or ability parameter is"
            " identified; check the scoring (--binarize THRESH for non-binary scores)"
        )
    rc, rw, ic, iw = extremes(data.Y)
    report = Screen(int(rc.sum()), int(rw.sum()), int(ic.sum()), int(iw.sum()))
    n_extreme = rc.sum() + rw.sum() + ic.sum() + iw.sum()
    if drop_extreme and n_extreme:
        # dropping items can make models extreme and vice versa: repeat until stable
        keep_r, keep_c = np.ones(N, bool), np.ones(J, bool)
        while True:
            sub = data.Y[keep_r][:, keep_c]
            rc, rw, ic, iw = extremes(sub)
            if not (rc.any() or rw.any() or ic.any() or iw.any()):
                break
            keep_r[np.flatnonzero(keep_r)[rc | rw]] = False
            keep_c[np.flatnonzero(keep_c)[ic | iw]] = False
            if keep_r.sum() < MIN_MODELS or keep_c.sum() < MIN_ITEMS:
                raise DataError(f"{name}: --drop-extreme leaves fewer than {MIN_MODELS} models or {MIN_ITEMS} items")
        report.dropped_models, report.dropped_items = int(N - keep_r.sum()), int(J - keep_c.sum())
        data = data.subset(np.flatnonzero(keep_r), np.flatnonzero(keep_c))
    elif n_extreme and (method in ("vi", "psn") or _extreme_share(report, N, J) > EXTREME_WARN_SHARE):
        # MML and MCMC hold such rows at their bounds and priors without harm to the others: warn when
        # they are a sizeable part of the matrix
        drift = (
            "drift without bound" if method in ("vi", "psn") else "are set by the bounds and priors, not by the data"
        )
        report.warnings.append(
            f"{report.all_correct_models + report.all_wrong_models} models and "
            f"{report.all_correct_items + report.all_wrong_items} items answer all-correct or all-wrong; "
            f"{method} estimates for them {drift}; pass --drop-extreme to remove them"
        )
    if model == "3pl" and data.shape[0] < 50:
        report.warnings.append(f"3PL with {data.shape[0]} models (< 50): the guessing parameter c is barely identified")
    return data, report


def read_response_data(
    source, fmt: str | None, *, no_header: bool = False, binarize: float | None = None
) -> ResponseData:
    """Read NPZ / CSV / TSV / Parquet / JSONL response data from core.io InputBytes."""
    from methodkit.core import io

    name = source.name
    kind = io.format_from_path(name if name != "<stdin>" else "-", fmt, "csv")
    if kind in ("npz", "npy"):
        data = from_arrays(io.read_arrays(source), name)
        if binarize is not None:
            raise UsageError("--binarize applies to CSV/Parquet scores, not to NPZ (already 0/1)")
        return data
    if no_header:
        if kind != "csv":
            raise UsageError("--no-header applies to CSV input only")
        io.refuse_cut_text(source, "csv")
        return from_wide(read_headerless_csv(source.data, name), name, binarize)
    return from_table(io.read_table(source, kind), name, binarize)
