"""RCT tables for CUVET: validated arrays of features, arm, value and realized cost.

Cost is either a column (realized cost per row), deterministic per arm (kappa_t), or
paid on the outcome (Z = kappa_T * Y, a coupon paid on conversion).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from methodkit.core.errors import DataError, UsageError
from methodkit.core.io import require_columns, row_label

if TYPE_CHECKING:
    import pandas as pd

SMD_WARN = 0.1
# An integer feature with at least this many levels whose name reads as an identifier (villnum, hh_id, zipcode)
# is split as categories, not as a number: its order means nothing (ours; --numeric keeps it a number).
ID_MIN_LEVELS = 20
ID_NAME = re.compile(r"(?i:(?:^|[_\-. ])id$)|[a-z0-9]I[dD]$|ID$|(?i:(?:num|nr|code|number|key)$)")


@dataclass
class CostSpec:
    """How the cost of a row is known."""

    column: str | None = None
    arm_costs: list[float] | None = None
    on_outcome: bool = False

    def __post_init__(self):
        if self.column is not None and self.arm_costs is not None:
            raise UsageError("pass either --cost or --arm-costs, not both")
        if self.column is None and self.arm_costs is None:
            raise UsageError("no cost given; pass --cost COLUMN or --arm-costs k0,k1,...")
        if self.on_outcome and self.arm_costs is None:
            raise UsageError("--cost-on-outcome needs --arm-costs (the face value paid per unit of outcome)")
        if self.arm_costs is not None and any(c < 0 or not np.isfinite(c) for c in self.arm_costs):
            raise DataError(f"--arm-costs must be finite and non-negative, got {self.arm_costs}")

    @property
    def deterministic(self) -> bool:
        """True when each arm's cost is known exactly (no sampling noise in the spend)."""
        return self.arm_costs is not None and not self.on_outcome

    def to_dict(self) -> dict:
        return {"column": self.column, "arm_costs": self.arm_costs, "on_outcome": self.on_outcome}


@dataclass
class RCT:
    X: np.ndarray  # (n, d) float64; categorical features hold level codes, NaN = missing
    features: list[str]
    levels: dict[str, list[str]]  # categorical feature -> its levels (code = position)
    t: np.ndarray  # int64 arm, 0 = control
    y: np.ndarray  # value
    z: np.ndarray  # realized cost
    ids: np.ndarray
    n_arms: int
    cost: CostSpec
    dropped: int = 0
    warnings: list[str] = field(default_factory=list)
    rows: np.ndarray | None = None  # positions of these rows in the source table
    strata: np.ndarray | None = None  # randomization strata (propensities are arm frequencies within them)

    @property
    def n(self) -> int:
        return len(self.y)

    def arm_counts(self) -> np.ndarray:
        return np.bincount(self.t, minlength=self.n_arms)

    def subset(self, rows) -> RCT:
        return RCT(
            self.X[rows],
            self.features,
            self.levels,
            self.t[rows],
            self.y[rows],
            self.z[rows],
            self.ids[rows],
            self.n_arms,
            self.cost,
            0,
            [],
            None if self.rows is None else self.rows[rows],
            None if self.strata is None else self.strata[rows],
        )


def parse_arm_costs(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise DataError(f"--arm-costs must be comma-separated numbers, got {text!r}") from None


def encode_features(
    frame: pd.DataFrame, features: list[str], levels: dict[str, list[str]] | None = None, categorical=()
):
    """Features as a float matrix: numeric as is, text/categorical as codes of their levels.

    With `levels` given (from a model), the same codes are used and unseen levels become NaN.
    Columns in `categorical` are coded as levels even when numeric.
    """
    import pandas as pd  # here, not at import: the CLI checks its flags with CostSpec before loading pandas

    name = frame.attrs.get("source", "input")
    require_columns(frame, features, "--features")
    known = dict(levels or {})
    out = np.empty((len(frame), len(features)))
    for j, col in enumerate(features):
        series = frame[col]
        is_num = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
        if col in known or col in categorical or not (is_num or pd.api.types.is_bool_dtype(series)):
            if col not in known:
                known[col] = _numeric_levels(series) if is_num else sorted(str(v) for v in series.dropna().unique())
            present = series.notna().to_numpy()
            text = series[present].map(_level_text) if is_num else series[present].astype(str)
            codes = pd.Categorical(text.to_numpy(), categories=known[col]).codes
            out[:, j] = np.nan
            out[present, j] = np.where(codes >= 0, codes, np.nan)  # -1: a level the model has not seen
        else:
            values = series.to_numpy(dtype="float64")
            bad = np.flatnonzero(np.isinf(values))
            if bad.size:
                raise DataError(f"{name}: {row_label(frame, int(bad[0]))}: feature '{col}' is infinite")
            out[:, j] = values
    return out, {k: v for k, v in known.items() if k in features}


def _numeric_levels(series) -> list[str]:
    """The levels of a numeric column read as categories: integers without '.0', in numeric order."""
    values = np.unique(series.dropna().to_numpy(dtype="float64"))
    return [_level_text(v) for v in values]


def _level_text(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def id_like_columns(frame: pd.DataFrame, features: list[str], skip=()) -> list[str]:
    """Integer features with >= ID_MIN_LEVELS levels whose name reads as an identifier (villnum, hh_id)."""
    import pandas as pd

    out = []
    for col in features:
        series = frame[col]
        if col in skip or not pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
            continue
        if not ID_NAME.search(str(col)):
            continue
        values = series.dropna().to_numpy(dtype="float64")
        if values.size and np.all(np.isfinite(values) & (values == np.round(values))):
            if np.unique(values).size >= ID_MIN_LEVELS:
                out.append(col)
    return out


def stray_text_warnings(frame: pd.DataFrame, categorical: list[str]) -> list[str]:
    """A text column whose cells are numbers but for a few is more likely a typo than categories."""
    from methodkit.core.io import stray_text

    out = []
    for column in categorical:
        found = stray_text(frame[column])
        if found is not None:
            i, value = found
            out.append(
                f"{frame.attrs.get('source', 'input')}: {row_label(frame, i)}: column '{column}' is numeric but for "
                f"{value!r}, so it is treated as categorical; fix the cell if that is a typo"
            )
    return out


def load_rct(
    frame: pd.DataFrame,
    treatment: str,
    value: str,
    cost: CostSpec,
    features: list[str] | None = None,
    id_col: str | None = None,
    exclude: tuple[str, ...] = (),
    levels: dict[str, list[str]] | None = None,
    n_arms: int | None = None,
    categorical: tuple[str, ...] = (),
    numeric: tuple[str, ...] = (),
) -> RCT:
    """Validate an RCT table and return its arrays (rows with NaN treatment or value dropped).

    `categorical` columns are split as categories even when numeric (--categorical); an integer feature
    whose name reads as an id and that has many levels is too, with a warning, unless listed in `numeric`.
    """
    import pandas as pd

    name = frame.attrs.get("source", "input")
    require_columns(frame, [treatment], "--treatment")
    require_columns(frame, [value], "--value")
    if cost.column is not None:
        require_columns(frame, [cost.column], "--cost")
    if id_col is None and "id" in frame.columns:
        id_col = "id"  # a column named id is the user id, never a feature
    if id_col is not None:
        require_columns(frame, [id_col], "--id")
    warnings: list[str] = []

    t_raw = pd.to_numeric(frame[treatment], errors="coerce").to_numpy(dtype="float64")
    bad_text = np.flatnonzero(np.isnan(t_raw) & frame[treatment].notna().to_numpy())
    if bad_text.size:
        i = int(bad_text[0])
        raise DataError(
            f"{name}: {row_label(frame, i)}: treatment '{treatment}' is not an integer arm "
            f"({frame[treatment].iloc[i]!r}); arms are 0 (control), 1, 2, ..."
        )
    y_raw = pd.to_numeric(frame[value], errors="coerce").to_numpy(dtype="float64")
    bad_text = np.flatnonzero(np.isnan(y_raw) & frame[value].notna().to_numpy())
    if bad_text.size:
        i = int(bad_text[0])
        raise DataError(f"{name}: {row_label(frame, i)}: value '{value}' is not numeric ({frame[value].iloc[i]!r})")
    keep = np.isfinite(t_raw) & np.isfinite(y_raw)
    if cost.column is not None:
        z_raw = pd.to_numeric(frame[cost.column], errors="coerce").to_numpy(dtype="float64")
        keep &= np.isfinite(z_raw)
    dropped = int((~keep).sum())
    if dropped:
        warnings.append(f"dropped {dropped} of {len(frame)} rows with a missing treatment, value or cost")
    rows = np.flatnonzero(keep)
    if rows.size == 0:
        raise DataError(f"{name}: no row has both a treatment and a value")
    t_f = t_raw[rows]
    frac = np.flatnonzero((t_f != np.round(t_f)) | (t_f < 0))
    if frac.size:
        i = int(rows[frac[0]])
        raise DataError(
            f"{name}: {row_label(frame, i)}: treatment '{treatment}' = {t_raw[i]!r} is not a non-negative integer arm"
        )
    t = t_f.astype(np.int64)
    k = int(t.max()) + 1
    if cost.arm_costs is not None:
        if k > len(cost.arm_costs):
            raise DataError(
                f"{name}: treatment '{treatment}' has arm {k - 1} but --arm-costs lists {len(cost.arm_costs)} arms"
            )
        if n_arms is None and len(cost.arm_costs) != k:
            raise DataError(
                f"--arm-costs lists {len(cost.arm_costs)} arms but '{treatment}' in {name} has {k} (0..{k - 1})"
            )
        k = len(cost.arm_costs)
    if n_arms is not None:
        if k > n_arms:
            raise DataError(f"{name}: treatment '{treatment}' has arm {k - 1}; the model knows arms 0..{n_arms - 1}")
        k = n_arms
    counts = np.bincount(t, minlength=k)
    if n_arms is None and (k < 2 or (counts == 0).any()):
        listing = ", ".join(f"{a}:{c}" for a, c in enumerate(counts))
        what = "the control arm 0 has no rows" if counts[0] == 0 else "an arm has no rows"
        if k < 2:
            what = "there is only one arm"
        raise DataError(f"{name}: {what} (arm counts {listing}); CUVET needs every arm 0..K in an RCT")
    y = y_raw[rows]
    if cost.column is not None:
        z = z_raw[rows]
        neg = np.flatnonzero(z < 0)
        if neg.size:
            raise DataError(f"{name}: {row_label(frame, int(rows[neg[0]]))}: cost '{cost.column}' is negative")
    else:
        kappa = np.asarray(cost.arm_costs, float)[t]
        z = kappa * y if cost.on_outcome else kappa

    if id_col is not None:
        ids = frame[id_col].to_numpy()[rows]
        dup = pd.Series(ids).duplicated()
        if dup.any():
            j = int(np.flatnonzero(dup.to_numpy())[0])
            raise DataError(f"{name}: {row_label(frame, int(rows[j]))}: duplicate id {ids[j]!r} in column '{id_col}'")
    else:
        ids = rows.astype(np.int64)

    used = {treatment, value, cost.column, id_col} | set(exclude)
    if features is None:
        features = [c for c in frame.columns if c not in used]
    if not features:
        raise DataError(f"{name}: no feature columns left; pass --features")
    for col in (*categorical, *numeric):
        if col not in features:
            raise DataError(f"{name}: --categorical/--numeric column '{col}' is not a feature")
    both = set(categorical) & set(numeric)
    if both:
        raise UsageError(f"column '{sorted(both)[0]}' is given both --categorical and --numeric")
    # with `levels` (a model's or a training table's coding) the categorical features are those it lists
    id_like = [] if levels is not None else id_like_columns(frame.iloc[rows], features, skip={*categorical, *numeric})
    for col in id_like:
        n_lev = frame[col].iloc[rows].nunique()
        warnings.append(
            f"{name}: feature '{col}' holds {n_lev} integer levels and its name reads as an identifier, so it is "
            f"split as categories, not as a number; pass --numeric {col} if its order means something, "
            f"or --exclude {col}"
        )
    X, lev = encode_features(frame.iloc[rows], features, levels, categorical=(*categorical, *id_like))
    warnings.extend(stray_text_warnings(frame, [f for f in lev if f not in (levels or {})]))
    data = RCT(X, list(features), lev, t, y, z, ids, k, cost, dropped, warnings, rows)
    if n_arms is None:
        warnings.extend(balance_warnings(data))
    return data


def balance_warnings(data: RCT) -> list[str]:
    """Covariate balance across arms: an SMD above 0.1 against control suggests non-randomized data."""
    from scipy.stats import norm

    worst: list[tuple[float, str, int]] = []
    ctl = data.t == 0
    for j, f in enumerate(data.features):
        x = data.X[:, j]
        ok = np.isfinite(x)
        if f in data.levels:
            # unordered levels: the mean of their codes means nothing; each level's indicator instead
            columns = [(x == c).astype(float) for c in np.unique(x[ok])]
        else:
            columns = [x]
        # an SMD above 0.1 that sampling noise explains (3 standard errors, Bonferroni over a
        # categorical's levels) is no evidence (ours)
        z_noise = 3.0 if len(columns) == 1 else float(norm.isf(norm.sf(3.0) / len(columns)))
        for a in range(1, data.n_arms):
            rows_a, rows_0 = (data.t == a) & ok, ctl & ok
            if rows_a.sum() < 2 or rows_0.sum() < 2:
                continue
            noise = z_noise * np.sqrt(1.0 / rows_a.sum() + 1.0 / rows_0.sum())
            for col in columns:
                xa, x0 = col[rows_a], col[rows_0]
                sd = np.sqrt(0.5 * (xa.var(ddof=1) + x0.var(ddof=1)))
                smd = abs(xa.mean() - x0.mean()) / sd if sd > 0 else 0.0
                if smd > SMD_WARN and smd > noise:
                    worst.append((smd, f, a))
    if not worst:
        return []
    worst.sort(reverse=True)
    seen: dict[str, tuple[float, int]] = {}
    for smd, f, a in worst:
        seen.setdefault(f, (smd, a))
    listing = ", ".join(f"{f} (SMD {smd:.2f}, arm {a})" for f, (smd, a) in seen.items())
    return [
        f"covariates unbalanced across arms (SMD > {SMD_WARN}): {listing}; if the arms were not randomized "
        "uniformly, evaluate with --propensity or --strata"
    ]
