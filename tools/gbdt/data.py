"""The attack's view of a table: label, column roles, splits, and the matrix LightGBM sees.

Roles (issue §1): categorical columns (non-numeric unless --categorical says) are
always immutable; integer columns (all values integral unless --integer says) stay
on the integer lattice; the rest of the numeric columns are what an attacker may move.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from methodkit.core.errors import DataError, UsageError


@dataclass
class Problem:
    """Train part D, attacker validation V and optional test T, encoded for LightGBM."""

    frame: pd.DataFrame  # the train file as read (D and V rows, original order)
    label: str
    positive: str  # the class whose F1 is reported, as text
    negative: str
    features: list[str]
    categorical: list[str]
    integer: list[str]
    mutable: list[str]  # numeric, not immutable, not categorical
    categories: dict[str, list[str]]
    tr_rows: np.ndarray  # positions in `frame` of D
    v_rows: np.ndarray  # positions in `frame` of V
    X_tr: np.ndarray
    y_tr: np.ndarray
    X_v: np.ndarray
    y_v: np.ndarray
    X_te: np.ndarray | None = None
    y_te: np.ndarray | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def cat_idx(self) -> list[int]:
        return [self.features.index(c) for c in self.categorical]

    def index(self, column: str) -> int:
        return self.features.index(column)


def _name(frame) -> str:
    return frame.attrs.get("source", "input")


def _check_columns(frame, columns, flag) -> None:
    present = [str(c) for c in frame.columns]
    for column in columns:
        if column not in frame.columns:
            raise DataError(
                f"column '{column}' not found in {_name(frame)} (columns: {', '.join(present)}); check {flag}"
            )


def _is_numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def _label_text(series: pd.Series) -> pd.Series:
    """Labels as text, so '--positive 1' matches an integer column and '>50K' a string one."""
    if pd.api.types.is_float_dtype(series) and np.all(np.mod(series.dropna(), 1) == 0):
        return series.map(lambda v: str(int(v)) if pd.notna(v) else v)
    return series.map(lambda v: str(v) if pd.notna(v) else v)


def resolve_label(frame: pd.DataFrame, label: str | None) -> str:
    if label is None:
        return "label" if "label" in frame.columns else str(frame.columns[-1])
    _check_columns(frame, [label], "--label")
    return label


def binary_target(frame: pd.DataFrame, label: str, positive: str | None) -> tuple[np.ndarray, str, str]:
    """y in {0,1} (1 = positive), the positive and the negative class as text."""
    text = _label_text(frame[label])
    missing = np.flatnonzero(text.isna().to_numpy())
    if missing.size:
        from methodkit.core.io import row_label

        raise DataError(f"{_name(frame)}: {row_label(frame, int(missing[0]))}: label '{label}' is empty")
    counts = text.value_counts()
    if len(counts) > 2:
        raise DataError(f"binary labels required; found {len(counts)} classes in '{label}'")
    if len(counts) < 2:
        raise DataError(f"binary labels required; found only class '{counts.index[0]}' in '{label}'")
    classes = sorted(counts.index)
    if positive is None:
        # the minority class; a tie goes to the later one in sorted order
        positive = min(classes, key=lambda c: (counts[c], -classes.index(c)))
    elif str(positive) not in classes:
        raise DataError(f"positive class '{positive}' not found in '{label}' (classes: {', '.join(classes)})")
    positive = str(positive)
    negative = next(c for c in classes if c != positive)
    return (text.to_numpy() == positive).astype(np.float64), positive, negative


def column_roles(
    frame: pd.DataFrame,
    label: str,
    categorical: list[str] | None,
    immutable: list[str] | None,
    integer: list[str] | None,
    need_mutable: bool = True,
) -> tuple[list[str], list[str], list[str], list[str]]:
    """(features, categorical, integer, mutable) from the flags and the column types."""
    features = [str(c) for c in frame.columns if c != label]
    for flag, given in (("--categorical", categorical), ("--immutable", immutable), ("--integer", integer)):
        _check_columns(frame, given or [], flag)
        if given and label in given:
            raise UsageError(f"{flag}: '{label}' is the label column")
    if categorical is None:
        categorical = [c for c in features if not _is_numeric(frame[c])]
        _refuse_stray_text(frame, categorical)
    else:
        bad = [c for c in features if c not in categorical and not _is_numeric(frame[c])]
        _refuse_stray_text(frame, bad)
        categorical = [c for c in features if c in categorical or c in bad]
    numeric = [c for c in features if c not in categorical]
    if integer is None:
        integer = [c for c in numeric if _integral(frame[c])]
    else:
        bad = [c for c in integer if c in categorical]
        if bad:
            raise UsageError(f"--integer: '{bad[0]}' is categorical")
        integer = [c for c in numeric if c in integer]
    mutable = [c for c in numeric if c not in set(immutable or [])]
    if not mutable and need_mutable:
        raise DataError(
            f"no mutable numeric column left in {_name(frame)} after --immutable/--categorical "
            f"(numeric: {', '.join(numeric) or 'none'})"
        )
    return features, categorical, integer, mutable


def _refuse_stray_text(frame: pd.DataFrame, columns) -> None:
    """A mostly numeric column with a stray word would silently become categorical: name the cell."""
    from methodkit.core.io import row_label, stray_text

    for column in columns:
        found = stray_text(frame[column])
        if found is not None:
            i, value = found
            raise DataError(
                f"{_name(frame)}: {row_label(frame, i)}: column '{column}' is numeric but for {value!r}; "
                f"fix the cell, or pass --categorical {column} to treat the column as categories"
            )


def _integral(series: pd.Series) -> bool:
    values = series.dropna().to_numpy(dtype=np.float64)
    return values.size > 0 and bool(np.all(values == np.round(values)))


def encode(frame: pd.DataFrame, features, categorical, categories) -> tuple[np.ndarray, dict[str, int]]:
    """Float matrix for LightGBM: categories as codes of the train file (unseen -> NaN), with unseen counts."""
    X = np.empty((len(frame), len(features)), dtype=np.float64)
    unseen: dict[str, int] = {}
    for j, column in enumerate(features):
        if column in categorical:
            text = frame[column].map(lambda v: str(v) if pd.notna(v) else None)
            lookup = {c: i for i, c in enumerate(categories[column])}
            codes = text.map(lambda v, lookup=lookup: lookup.get(v, np.nan) if v is not None else np.nan)
            X[:, j] = codes.to_numpy(dtype=np.float64)
            n_unseen = int((text.notna() & codes.isna()).sum())
            if n_unseen:
                unseen[column] = n_unseen
        else:
            values = pd.to_numeric(frame[column], errors="coerce")
            bad = np.flatnonzero(values.isna().to_numpy() & frame[column].notna().to_numpy())
            if bad.size:
                from methodkit.core.io import row_label

                i = int(bad[0])
                raise DataError(
                    f"{_name(frame)}: {row_label(frame, i)}: column '{column}' is not numeric "
                    f"({frame[column].iloc[i]!r}); list it in --categorical"
                )
            X[:, j] = values.to_numpy(dtype=np.float64)
            infinite = np.flatnonzero(np.isinf(X[:, j]))
            if infinite.size:  # NaN is LightGBM's missing value; Inf is not a value at all
                from methodkit.core.io import row_label

                i = int(infinite[0])
                raise DataError(
                    f"{_name(frame)}: {row_label(frame, i)}: column '{column}' is {float(X[i, j])}; "
                    "use a finite value, or leave the cell empty for missing"
                )
    return X, unseen


def compare_schema(train: pd.DataFrame, test: pd.DataFrame, label: str, categorical) -> None:
    """The test table must have the train table's columns, with the same numeric/text kinds."""
    diffs = []
    missing = [c for c in train.columns if c not in test.columns]
    extra = [c for c in test.columns if c not in train.columns]
    if missing:
        diffs.append("missing " + ", ".join(map(str, missing)))
    if extra:
        diffs.append("extra " + ", ".join(map(str, extra)))
    for column in train.columns:
        if column in test.columns and column != label and column not in categorical:
            if not _is_numeric(test[column]) and test[column].notna().any():
                diffs.append(f"'{column}' is numeric in train but not in test")
    if diffs:
        raise DataError(f"test table {_name(test)} differs from the train table: {'; '.join(diffs)}")


def stratified_split(y: np.ndarray, frac: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(kept, held) positions: `frac` of each class held out, chosen with `seed`."""
    rng = np.random.default_rng(seed)
    held = []
    for c in np.unique(y):
        members = np.flatnonzero(y == c)
        take = int(round(frac * members.size))
        held.append(rng.permutation(members)[:take])
    held = np.sort(np.concatenate(held))
    kept = np.setdiff1d(np.arange(len(y)), held)
    return kept, held


def prepare(
    train: pd.DataFrame,
    test: pd.DataFrame | None = None,
    *,
    label: str | None = None,
    positive: str | None = None,
    categorical: list[str] | None = None,
    immutable: list[str] | None = None,
    integer: list[str] | None = None,
    val_frac: float = 0.2,
    seed: int = 0,
) -> Problem:
    """Validate the tables and build the Problem (D, V, T) the attack works on."""
    if not 0.0 < val_frac < 1.0:
        raise UsageError(f"--val-frac must be in (0, 1), got {val_frac}")
    label = resolve_label(train, label)
    y, positive, negative = binary_target(train, label, positive)
    features, categorical, integer, mutable = column_roles(train, label, categorical, immutable, integer)
    categories = {c: sorted(train[c].dropna().map(str).unique()) for c in categorical}
    X, _ = encode(train, features, categorical, categories)
    counts = np.bincount(y.astype(int), minlength=2)
    if counts.min() < 4:
        raise DataError(f"too few rows of class '{positive if counts[1] < 4 else negative}' in '{label}' to split")
    tr_rows, v_rows = stratified_split(y, val_frac, seed)
    for part, rows in (("train", tr_rows), ("attacker validation", v_rows)):
        if len(np.unique(y[rows])) < 2:
            raise DataError(f"the {part} split holds a single class of '{label}'; change --val-frac")
    problem = Problem(
        frame=train,
        label=label,
        positive=positive,
        negative=negative,
        features=features,
        categorical=categorical,
        integer=integer,
        mutable=mutable,
        categories=categories,
        tr_rows=tr_rows,
        v_rows=v_rows,
        X_tr=X[tr_rows],
        y_tr=y[tr_rows],
        X_v=X[v_rows],
        y_v=y[v_rows],
    )
    if test is not None:
        problem.X_te, problem.y_te = encode_test(problem, test)
    return problem


def encode_test(problem: Problem, test: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Encode a test table with the train table's roles and categories (unseen categories are reported)."""
    compare_schema(problem.frame, test, problem.label, problem.categorical)
    text = _label_text(test[problem.label])
    missing = np.flatnonzero(text.isna().to_numpy())
    if missing.size:
        from methodkit.core.io import row_label

        raise DataError(f"{_name(test)}: {row_label(test, int(missing[0]))}: label '{problem.label}' is empty")
    classes = set(text)
    stray = sorted(classes - {problem.positive, problem.negative})
    if stray:
        raise DataError(
            f"test table {_name(test)}: label '{problem.label}' has class '{stray[0]}' not in the train table"
        )
    X, unseen = encode(test, problem.features, problem.categorical, problem.categories)
    for column, count in unseen.items():
        problem.warnings.append(f"test column '{column}': {count} rows with categories unseen in train (as missing)")
    return X, (text.to_numpy() == problem.positive).astype(np.float64)


def whole(
    train: pd.DataFrame,
    test: pd.DataFrame,
    *,
    label: str | None = None,
    positive: str | None = None,
    categorical: list[str] | None = None,
) -> Problem:
    """A Problem whose train part is every row of `train` (no attacker split), for `eval`."""
    label = resolve_label(train, label)
    y, positive, negative = binary_target(train, label, positive)
    features, categorical, integer, mutable = column_roles(train, label, categorical, None, None, need_mutable=False)
    categories = {c: sorted(train[c].dropna().map(str).unique()) for c in categorical}
    X, _ = encode(train, features, categorical, categories)
    rows = np.arange(len(train))
    empty = np.empty((0, len(features)))
    problem = Problem(
        frame=train,
        label=label,
        positive=positive,
        negative=negative,
        features=features,
        categorical=categorical,
        integer=integer,
        mutable=mutable,
        categories=categories,
        tr_rows=rows,
        v_rows=rows[:0],
        X_tr=X,
        y_tr=y,
        X_v=empty,
        y_v=np.empty(0),
    )
    problem.X_te, problem.y_te = encode_test(problem, test)
    return problem


def frame_sha256(frame: pd.DataFrame) -> str:
    """A digest of a table's content (for the manifest when the data did not come from a file)."""
    import hashlib

    return hashlib.sha256(pd.util.hash_pandas_object(frame, index=False).to_numpy().tobytes()).hexdigest()
