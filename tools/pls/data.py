"""Turn a table or arrays into a checked design (X n x p, y n), with errors that name row and column."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

import numpy as np

from methodkit.core import io
from methodkit.core.errors import DataError, UsageError


@dataclass
class Design:
    X: np.ndarray
    y: np.ndarray
    names: list[str]
    target: str
    source: str
    warnings: list[str] = field(default_factory=list)
    w: np.ndarray | None = None  # observation weights (mean 1), None = unweighted

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def p(self) -> int:
        return self.X.shape[1]


def select_x(frame, target: str, x_glob: str | None, x_range: str | None) -> list[str]:
    """X columns: a glob (--x), a first:last range (--x-range), or every column but the target."""
    columns = [str(c) for c in frame.columns]
    name = frame.attrs.get("source", "input")
    if x_glob and x_range:
        raise UsageError("pass only one of --x and --x-range")
    if x_glob:
        chosen = [c for c in columns if fnmatch.fnmatchcase(c, x_glob) and c != target]
        if not chosen:
            raise DataError(f"--x '{x_glob}' matches no column of {name} (columns: {_preview(columns)})")
        return chosen
    if x_range:
        first, sep, last = x_range.partition(":")
        if not sep:
            raise UsageError(f"--x-range '{x_range}': expected FIRST:LAST column names")
        for end in (first, last):
            if end not in columns:
                raise DataError(f"--x-range: column '{end}' not found in {name} (columns: {_preview(columns)})")
        i, j = columns.index(first), columns.index(last)
        if j < i:
            raise UsageError(f"--x-range '{x_range}': '{last}' comes before '{first}' in {name}")
        return [c for c in columns[i : j + 1] if c != target]
    return [c for c in columns if c != target]


def _preview(columns: list[str], limit: int = 8) -> str:
    shown = ", ".join(columns[:limit])
    return shown + (f", ... ({len(columns)} in all)" if len(columns) > limit else "")


def from_frame(
    frame,
    target: str | None,
    *,
    x_glob: str | None = None,
    x_range: str | None = None,
    drop_nonnumeric: bool = False,
    dropna: bool = False,
    weights: str | None = None,
) -> Design:
    import pandas as pd

    name = frame.attrs.get("source", "input")
    if target is None:
        if "y" in frame.columns:
            target = "y"
        else:
            raise UsageError(
                f"no --target given and {name} has no column 'y' (columns: {_preview(list(map(str, frame.columns)))}); pass --target"
            )
    frame = frame.rename(columns=str)
    io.require_columns(frame, [target], "--target")
    if weights is not None:
        io.require_columns(frame, [weights], "--weights")
    x_cols = [c for c in select_x(frame, target, x_glob, x_range) if c != weights]
    warnings: list[str] = []
    numeric = [c for c in x_cols if pd.api.types.is_numeric_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c])]
    other = [c for c in x_cols if c not in numeric]
    if other:
        if not drop_nonnumeric:
            raise DataError(
                f"{name}: non-numeric column(s) {', '.join(repr(c) for c in other[:5])}"
                f"{' ...' if len(other) > 5 else ''}; select X with --x/--x-range or pass --drop-nonnumeric"
            )
        warnings.append(f"dropped {len(other)} non-numeric column(s): {', '.join(other)}")
        x_cols = numeric
    if not x_cols:
        raise DataError(f"{name}: no numeric X columns left besides the target '{target}'")
    used = frame[[*x_cols, target, *([weights] if weights is not None else [])]]
    if dropna:
        values = used.apply(pd.to_numeric, errors="coerce")
        finite = np.isfinite(values.to_numpy(dtype=float)).all(axis=1)
        if not finite.all():
            warnings.append(f"--dropna: dropped {int((~finite).sum())} row(s) with NaN/inf")
            used = used.loc[finite]
            used.attrs.update(frame.attrs)
            used.attrs["format"] = None  # positions no longer match file lines
    used.attrs.update({k: v for k, v in frame.attrs.items() if k not in used.attrs})
    X = io.numeric_matrix(used, x_cols)
    y = io.numeric_matrix(used, [target])[:, 0]
    design = finish(X, y, list(x_cols), target, name, warnings)
    if weights is not None:
        design = with_weights(design, io.numeric_matrix(used, [weights])[:, 0], f"--weights column '{weights}'")
    return design


MIN_N_EFF = 25  # Kish effective n below this is refused (the gate's n clause, which weights cannot reroute)


def with_weights(design: Design, w, label: str) -> Design:
    """Attach observation weights: finite, >= 0, not all 0, Kish n_eff = (sum w)^2 / sum w^2 >= 25; scaled to mean 1."""
    w = np.asarray(w, dtype=float).reshape(-1)
    if len(w) != design.n:
        raise DataError(f"{label}: {len(w)} weights for {design.n} rows; they must match")
    bad = np.flatnonzero(~np.isfinite(w))
    if bad.size:
        raise DataError(f"{label}: weight of row {bad[0]} is NaN/inf")
    negative = np.flatnonzero(w < 0)
    if negative.size:
        raise DataError(f"{label}: weight of row {negative[0]} is negative ({w[negative[0]]:g}); weights must be >= 0")
    if not w.sum() > 0:
        raise DataError(f"{label}: every weight is 0")
    n_eff = float(w.sum() ** 2 / (w * w).sum())
    if n_eff < MIN_N_EFF:
        raise DataError(f"{label}: Kish effective n = {n_eff:.3g} < {MIN_N_EFF}; too few effective rows to test")
    design.w = w / w.mean()
    return design


def from_arrays(X, y, source: str, names: list[str] | None = None) -> Design:
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise DataError(f"{source}: X must be a 2-D array, got shape {X.shape}")
    y = y.reshape(-1) if y.ndim == 2 and 1 in y.shape else y
    if y.ndim != 1:
        raise DataError(f"{source}: y must be a vector, got shape {y.shape}")
    if len(y) != X.shape[0]:
        raise DataError(f"{source}: X has {X.shape[0]} rows but y has {len(y)}; they must match")
    if not (np.issubdtype(X.dtype, np.number) and np.issubdtype(y.dtype, np.number)):
        raise DataError(f"{source}: X and y must be numeric arrays")
    X = X.astype(float)
    y = y.astype(float)
    bad = np.argwhere(~np.isfinite(X))
    if bad.size:
        i, j = bad[0]
        raise DataError(f"{source}: X[{i}, {j}] is NaN/inf; remove or impute it")
    bad_y = np.flatnonzero(~np.isfinite(y))
    if bad_y.size:
        raise DataError(f"{source}: y[{bad_y[0]}] is NaN/inf; remove or impute it")
    names = names or [f"x{j + 1}" for j in range(X.shape[1])]
    return finish(X, y, names, "y", source, [])


def finish(X, y, names, target, source, warnings) -> Design:
    """Refuse a constant y; drop (and name) zero-variance and duplicate X columns."""
    if len(y) < 2 or not np.std(y) > 0:
        raise DataError(f"{source}: target '{target}' is constant; nothing to test")
    sd = X.std(axis=0)
    flat = sd <= 1e-12 * np.maximum(1.0, np.abs(X.mean(axis=0)))
    if flat.any():
        dropped = [names[j] for j in np.flatnonzero(flat)]
        warnings.append(f"dropped {len(dropped)} zero-variance column(s): {', '.join(dropped)}")
    keep = ~flat
    _, first = np.unique(X.T, axis=0, return_index=True)
    duplicate = np.ones(X.shape[1], bool)
    duplicate[first] = False
    duplicate &= keep
    if duplicate.any():
        dropped = [names[j] for j in np.flatnonzero(duplicate)]
        warnings.append(f"dropped {len(dropped)} duplicate column(s): {', '.join(dropped)}")
    keep &= ~duplicate
    if not keep.any():
        raise DataError(f"{source}: no X column varies; nothing to test")
    return Design(
        np.ascontiguousarray(X[:, keep]), y.copy(), [n for n, k in zip(names, keep) if k], target, source, warnings
    )
