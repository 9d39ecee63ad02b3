"""The canonical long table, its validation into dense arrays, the task simulator and the .mat importer.

Long table: one row per trial with subject, block (position in the session, 1-based), trial,
condition, true_vol, true_sto, outcome, response (made BEFORE seeing that trial's outcome), rt_ms,
and optionally latent and group. Arrays are [subject, block position, trial], padded with
`valid = False` where a block is shorter than the longest one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from methodkit.core.errors import DataError, UsageError

REQUIRED = ("subject", "block", "trial", "condition", "true_vol", "true_sto", "outcome", "response", "rt_ms")
OPTIONAL = ("latent", "group")
MIN_TRIALS = 3
ABSURD_RT_MS = 60_000.0

# The real design (Piray & Daw 2024): volatility variance x stochasticity variance, 4 blocks x 50 trials.
DESIGNS = {
    "stovol2x2": {
        "vol": (4.0, 49.0, 4.0, 49.0),
        "sto": (16.0, 16.0, 64.0, 64.0),
        "trials": 50,
        "start": 60.0,
        "within": (15.0, 85.0),
    }
}
WITHIN_BATCH, WITHIN_BATCHES = 256, 400  # redraws of a task sequence kept inside its range


@dataclass
class Cohort:
    """Dense per-subject arrays of a task data set; shapes [S, B, T] unless noted."""

    subjects: list
    outcome: np.ndarray
    response: np.ndarray  # NaN where missing
    rt_ms: np.ndarray  # NaN where missing
    valid: np.ndarray  # bool: the trial exists (blocks may differ in length)
    true_vol: np.ndarray  # [S, B]
    true_sto: np.ndarray  # [S, B]
    condition: np.ndarray  # [S, B] object labels
    group: list = field(default_factory=list)
    latent: np.ndarray | None = None
    counts: dict = field(default_factory=dict)  # excluded/missing trials, for the report

    @property
    def n_subjects(self) -> int:
        return self.outcome.shape[0]

    def response_mask(self) -> np.ndarray:
        return self.valid & np.isfinite(self.response)

    def subset(self, index) -> Cohort:
        index = np.asarray(index)
        return Cohort(
            subjects=[self.subjects[i] for i in index],
            outcome=self.outcome[index],
            response=self.response[index],
            rt_ms=self.rt_ms[index],
            valid=self.valid[index],
            true_vol=self.true_vol[index],
            true_sto=self.true_sto[index],
            condition=self.condition[index],
            group=[self.group[i] for i in index] if self.group else [],
            latent=None if self.latent is None else self.latent[index],
            counts=dict(self.counts),
        )

    def to_frame(self) -> pd.DataFrame:
        s, b, t = np.nonzero(self.valid)
        frame = pd.DataFrame(
            {
                "subject": [self.subjects[i] for i in s],
                "block": b + 1,
                "trial": t + 1,
                "condition": self.condition[s, b],
                "true_vol": self.true_vol[s, b],
                "true_sto": self.true_sto[s, b],
                "outcome": self.outcome[s, b, t],
                "response": self.response[s, b, t],
                "rt_ms": self.rt_ms[s, b, t],
            }
        )
        if self.latent is not None:
            frame["latent"] = self.latent[s, b, t]
        if self.group:
            frame["group"] = [self.group[i] for i in s]
        return frame


def condition_label(vol: float, sto: float) -> str:
    return f"v{vol:g}s{sto:g}"


def from_frame(frame: pd.DataFrame, *, clip: tuple[float, float] | None = (10.0, 90.0), warn=None) -> Cohort:
    """Validate a long table and build a Cohort; every problem names its row, subject or block."""
    from methodkit.core import io

    name = frame.attrs.get("source", "input")
    io.require_columns(frame, REQUIRED)
    frame = frame.reset_index(drop=True)
    numbers = {}
    for column in ("block", "trial", "true_vol", "true_sto", "outcome"):
        numbers[column] = io.numeric_matrix(frame, [column])[:, 0]
    for column in ("response", "rt_ms") + (("latent",) if "latent" in frame.columns else ()):
        numbers[column] = io.numeric_matrix(frame, [column], allow_missing=True)[:, 0]  # empty = no response
    for column in ("block", "trial"):
        values = numbers[column]
        bad = np.flatnonzero((values < 1) | (values != np.round(values)))
        if bad.size:
            i = int(bad[0])
            raise DataError(
                f"{name}: {io.row_label(frame, i)}: column '{column}' must be a positive integer, got {values[i]:g}"
            )
    for column in ("true_vol", "true_sto"):
        bad = np.flatnonzero(numbers[column] <= 0)
        if bad.size:
            i = int(bad[0])
            raise DataError(f"{name}: {io.row_label(frame, i)}: column '{column}' must be a positive variance")
    subject_key = frame["subject"].astype(str).to_numpy()
    keys = pd.DataFrame({"s": subject_key, "b": numbers["block"], "t": numbers["trial"]})
    dup = np.flatnonzero(keys.duplicated().to_numpy())
    if dup.size:
        i = int(dup[0])
        raise DataError(
            f"{name}: {io.row_label(frame, i)}: duplicated (subject, block, trial) = "
            f"({subject_key[i]}, {numbers['block'][i]:g}, {numbers['trial'][i]:g}); each trial must appear once"
        )
    if clip is not None:
        r = numbers["response"]
        bad = np.flatnonzero(np.isfinite(r) & ((r < clip[0]) | (r > clip[1])))
        if bad.size:
            i = int(bad[0])
            raise DataError(
                f"{name}: {io.row_label(frame, i)}: response {r[i]:g} is outside the response range "
                f"[{clip[0]:g}, {clip[1]:g}]; fix the row or pass --clip LO,HI"
            )
    subjects = list(pd.unique(subject_key))
    s_index = {s: i for i, s in enumerate(subjects)}
    si = np.array([s_index[s] for s in subject_key])
    bi = numbers["block"].astype(int) - 1
    ti = numbers["trial"].astype(int) - 1
    S, B, T = len(subjects), int(bi.max()) + 1, int(ti.max()) + 1
    valid = np.zeros((S, B, T), dtype=bool)
    valid[si, bi, ti] = True
    # Trials must be 1..n within each block (no holes), each block at least MIN_TRIALS long.
    lengths = valid.sum(axis=2)
    for s in range(S):
        for b in range(B):
            n = lengths[s, b]
            if n == 0:
                raise DataError(
                    f"{name}: subject {subjects[s]}: block {b + 1} is missing (blocks must be numbered 1..n)"
                )
            if not valid[s, b, :n].all():
                hole = int(np.flatnonzero(~valid[s, b, :n])[0]) + 1
                raise DataError(
                    f"{name}: subject {subjects[s]}, block {b + 1}: trial {hole} is missing (trials must be 1..n)"
                )
            if n < MIN_TRIALS:
                raise DataError(
                    f"{name}: subject {subjects[s]}, block {b + 1}: {n} trials, at least {MIN_TRIALS} needed"
                )

    def dense(values, fill=np.nan):
        out = np.full((S, B, T), fill, dtype=float)
        out[si, bi, ti] = values
        return out

    per_block = {}
    for column in ("true_vol", "true_sto", "condition"):
        arr = np.empty((S, B), dtype=object if column == "condition" else float)
        values = frame[column].to_numpy() if column == "condition" else numbers[column]
        arr[si, bi] = values
        check = pd.DataFrame({"s": si, "b": bi, "v": values}).groupby(["s", "b"])["v"].nunique()
        if (check > 1).any():
            s, b = check[check > 1].index[0]
            raise DataError(f"{name}: subject {subjects[s]}, block {b + 1}: column '{column}' changes within the block")
        per_block[column] = arr
    response = dense(numbers["response"])
    rt = dense(numbers["rt_ms"])
    group = []
    if "group" in frame.columns:
        first = pd.Series(frame["group"].astype(str).to_numpy()).groupby(si).first()
        group = [first[i] for i in range(S)]
    counts = {
        "missing_responses": int((valid & ~np.isfinite(response)).sum()),
        "missing_rts": int((valid & ~np.isfinite(rt)).sum()),
    }
    cohort = Cohort(
        subjects=subjects,
        outcome=dense(numbers["outcome"], 0.0),
        response=response,
        rt_ms=rt,
        valid=valid,
        true_vol=per_block["true_vol"],
        true_sto=per_block["true_sto"],
        condition=per_block["condition"],
        group=group,
        latent=dense(numbers["latent"]) if "latent" in numbers else None,
        counts=counts,
    )
    if warn is not None:
        for s in range(S):
            r = response[s][valid[s]]
            r = r[np.isfinite(r)]
            if r.size and np.ptp(r) == 0:
                warn(f"subject {subjects[s]}: all responses equal {r[0]:g}; its fit carries no learning information")
        if counts["missing_responses"]:
            warn(f"{counts['missing_responses']} trials without a response are left out of the likelihood")
    return cohort


# ---------------------------------------------------------------- task simulation


@dataclass
class Task:
    """Shared outcome sequences of a design: one column per condition."""

    design: str
    vol: np.ndarray  # [C]
    sto: np.ndarray  # [C]
    latent: np.ndarray  # [T, C]
    outcome: np.ndarray  # [T, C]


TASK_BYTES_PER_ROW = 300  # peak memory per row of the task table written as CSV (measured: ~280)


def task_rows(design: str = "stovol2x2", trials: int | None = None) -> int:
    """Rows of the task table: one per trial and condition (for the memory guard)."""
    spec = DESIGNS.get(design, DESIGNS["stovol2x2"])
    return (spec["trials"] if trials is None else trials) * len(spec["vol"])


def simulate_task(
    design: str = "stovol2x2",
    *,
    trials: int | None = None,
    start: float | None = None,
    seed: int = 0,
    within: tuple[float, float] | None | str = "design",
) -> Task:
    """Random-walk latent from `start`, outcome = latent + N(0, sto); one sequence per condition.

    `within` (LO, HI): each condition's sequence is redrawn until every outcome lies in [LO, HI], as the
    real task's sequences do (Piray & Daw's outcomes span 12.6-82.3 of the 10-90 response scale); an
    unconstrained walk with volatility 49 leaves the response range in ~13% of trials, and responses
    clipped there are not the Gaussian observations the fit assumes. "design" takes the design's range
    (15, 85 for stovol2x2); None draws the unconstrained walk.
    """
    if design not in DESIGNS:
        raise UsageError(f"--design must be one of {', '.join(DESIGNS)}, not {design!r}")
    spec = DESIGNS[design]
    trials = spec["trials"] if trials is None else trials
    if trials < MIN_TRIALS:
        raise UsageError(f"--trials must be at least {MIN_TRIALS}")
    start = spec["start"] if start is None else start
    within = spec["within"] if isinstance(within, str) and within == "design" else within
    rng = np.random.default_rng(seed)
    vol, sto = np.array(spec["vol"]), np.array(spec["sto"])
    if within is None:
        steps = rng.standard_normal((trials, vol.size)) * np.sqrt(vol)
        steps[0] = 0.0
        latent = start + np.cumsum(steps, axis=0)
        outcome = latent + rng.standard_normal((trials, vol.size)) * np.sqrt(sto)
        return Task(design, vol, sto, latent, outcome)
    lo, hi = within
    if not lo < start < hi:
        raise UsageError(f"--start {start:g} must lie inside --within {lo:g},{hi:g}")
    latent, outcome = np.empty((trials, vol.size)), np.empty((trials, vol.size))
    for c in range(vol.size):
        for _ in range(WITHIN_BATCHES):
            steps = rng.standard_normal((WITHIN_BATCH, trials)) * np.sqrt(vol[c])
            steps[:, 0] = 0.0
            lat = start + np.cumsum(steps, axis=1)
            out = lat + rng.standard_normal((WITHIN_BATCH, trials)) * np.sqrt(sto[c])
            ok = np.flatnonzero(((out >= lo) & (out <= hi)).all(axis=1))
            if ok.size:
                latent[:, c], outcome[:, c] = lat[ok[0]], out[ok[0]]
                break
        else:
            raise UsageError(
                f"no sequence of {trials} trials with volatility {vol[c]:g} and stochasticity {sto[c]:g} stayed "
                f"within [{lo:g}, {hi:g}] in {WITHIN_BATCHES * WITHIN_BATCH:,} draws; pass fewer --trials or "
                "--within none"
            )
    return Task(design, vol, sto, latent, outcome)


def task_frame(task: Task) -> pd.DataFrame:
    """A task as a long table with one pseudo-subject 'task' (block = condition column, no responses)."""
    T, C = task.outcome.shape
    rows = {
        "subject": "task",
        "block": np.repeat(np.arange(1, C + 1), T),
        "trial": np.tile(np.arange(1, T + 1), C),
        "condition": np.repeat([condition_label(v, s) for v, s in zip(task.vol, task.sto)], T),
        "true_vol": np.repeat(task.vol, T),
        "true_sto": np.repeat(task.sto, T),
        "outcome": task.outcome.T.ravel(),
        "response": np.nan,
        "rt_ms": np.nan,
        "latent": task.latent.T.ravel(),
    }
    return pd.DataFrame(rows)


def task_from_cohort(cohort: Cohort) -> Task:
    """The conditions of the first subject of a cohort (the shared sequences) as a Task."""
    B = cohort.outcome.shape[1]
    T = int(cohort.valid[0].sum(axis=1).min())
    latent = cohort.latent[0, :, :T].T if cohort.latent is not None else np.full((T, B), np.nan)
    return Task(
        "file", cohort.true_vol[0].astype(float), cohort.true_sto[0].astype(float), latent, cohort.outcome[0, :, :T].T
    )


def cohort_for_agents(task: Task, n: int, *, seed: int = 0, shuffle: bool = True) -> Cohort:
    """`n` participants on a task's shared sequences, each with a random block order (as in the real task)."""
    T, C = task.outcome.shape
    rng = np.random.default_rng(seed)
    orders = np.array([rng.permutation(C) if shuffle else np.arange(C) for _ in range(n)]).reshape(n, C)
    labels = np.array([condition_label(v, s) for v, s in zip(task.vol, task.sto)], dtype=object)
    return Cohort(
        subjects=[f"s{i + 1:04d}" for i in range(n)],
        outcome=task.outcome.T[orders].astype(float),
        response=np.full((n, C, T), np.nan),
        rt_ms=np.full((n, C, T), np.nan),
        valid=np.ones((n, C, T), dtype=bool),
        true_vol=task.vol[orders].astype(float),
        true_sto=task.sto[orders].astype(float),
        condition=labels[orders],
        latent=task.latent.T[orders].astype(float),
    )


# ---------------------------------------------------------------- the public .mat files


def import_stovol_mat(raw: bytes, name: str) -> Cohort:
    """Read Piray & Daw's data.mat: data(i).bucket/response_time/randomization_order, meta_data.bag/bird/true_*.

    Columns of the 50 x 4 arrays are conditions; randomization_order[k] (0-based) is the condition
    shown at block position k (our reading), so block = position in the session.
    """
    import io as _io

    import scipy.io as sio

    try:
        mat = sio.loadmat(_io.BytesIO(raw), squeeze_me=True, struct_as_record=False)
    except Exception as exc:
        raise DataError(f"{name}: not a MATLAB .mat file readable by scipy ({str(exc).splitlines()[0]})") from None
    for key in ("data", "meta_data"):
        if key not in mat:
            raise DataError(
                f"{name}: the .mat file has no field '{key}' (fields: {', '.join(k for k in mat if not k.startswith('__'))})"
            )
    meta = mat["meta_data"]
    for key in ("bag", "bird", "true_vol", "true_sto"):
        if not hasattr(meta, key):
            raise DataError(f"{name}: meta_data has no field '{key}'")
    bag, bird = np.atleast_2d(np.asarray(meta.bag, float)), np.atleast_2d(np.asarray(meta.bird, float))
    vol, sto = np.asarray(meta.true_vol, float).ravel(), np.asarray(meta.true_sto, float).ravel()
    T, C = bag.shape
    people = np.atleast_1d(mat["data"])
    S = len(people)
    response = np.empty((S, C, T))
    rt = np.empty((S, C, T))
    orders = np.empty((S, C), dtype=int)
    for i, person in enumerate(people):
        for key in ("bucket", "response_time", "randomization_order"):
            if not hasattr(person, key):
                raise DataError(f"{name}: data({i + 1}) has no field '{key}'")
        order = np.asarray(person.randomization_order, int).ravel()
        if sorted(order.tolist()) != list(range(C)):
            raise DataError(f"{name}: data({i + 1}).randomization_order is not a permutation of 0..{C - 1}")
        orders[i] = order
        bucket = np.asarray(person.bucket, float)
        times = np.asarray(person.response_time, float)
        if bucket.shape != (T, C) or times.shape != (T, C):
            raise DataError(f"{name}: data({i + 1}).bucket/response_time are not {T}x{C} like meta_data.bag")
        response[i] = bucket.T[order]
        rt[i] = times.T[order]
    labels = np.array([condition_label(v, s) for v, s in zip(vol, sto)], dtype=object)
    return Cohort(
        subjects=[f"{i + 1}" for i in range(S)],
        outcome=bag.T[orders],
        response=response,
        rt_ms=rt,
        valid=np.ones((S, C, T), dtype=bool),
        true_vol=vol[orders],
        true_sto=sto[orders],
        condition=labels[orders],
        latent=bird.T[orders],
        counts={"missing_responses": int(np.isnan(response).sum()), "missing_rts": int(np.isnan(rt).sum())},
    )
