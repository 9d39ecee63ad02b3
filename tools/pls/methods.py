"""The four tests at a pre-specified K: NB-asymptotic, NB-permutation, CV-permutation-Q2, jackknife t.

Each takes a standardisable design (X n x p, y n) and returns a MethodOutcome; the
orchestration (gate, rotation, output record) lives in api.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.special import stdtr  # Student t cdf; scipy.stats costs seconds to import

from methodkit.core.errors import DataError, RunFailure
from methodkit.core.progress import silent
from methodkit.tools.pls import batch

CHUNK = 256  # least permutation columns per batched fit
CHUNK_ELEMENTS = 2**22  # most K x max(n, p) x columns per batched fit (32 MB of float64 per array)


def chunk_columns(B: int, K: int, n: int, p: int) -> int:
    """Columns per batched fit: as many as fit CHUNK_ELEMENTS, at least CHUNK (each kernel launch and
    GEMM call has a fixed cost: at n = 60, p = 401 a 256-column chunk spent more in launches than in work).
    Columns are independent, so the chunking changes no result."""
    return max(CHUNK, min(B, CHUNK_ELEMENTS // max(1, K * max(n, p))))


# ---------------------------------------------------------------- splits and learners


def n_train_for(n: int, K: int) -> int:
    """Half the rows for training (NB calibration assumes 50/50), at least K+2, at most n-3."""
    return min(max(n // 2, K + 2), n - 3)


@dataclass
class Splits:
    train: np.ndarray  # J x n_train row indices
    test: np.ndarray  # J x n_test

    @property
    def n_train(self) -> int:
        return self.train.shape[1]

    @property
    def n_test(self) -> int:
        return self.test.shape[1]


def draw_splits(n: int, K: int, J: int, rng: np.random.Generator) -> Splits:
    n_tr = n_train_for(n, K)
    orders = np.empty((J, n), dtype=np.int64)
    orders[:] = np.arange(n)
    rng.permuted(orders, axis=1, out=orders)  # each row shuffled in place: the stream of J rng.permutation(n)
    return Splits(np.sort(orders[:, :n_tr], axis=1), np.sort(orders[:, n_tr:], axis=1))


@dataclass(frozen=True)
class Directions:
    """Which direction learner D(X_tr, y_tr) -> W to use."""

    kind: str = "pls"  # pls | spca | fixed
    keep: int | None = None  # spca: columns kept by the screen
    W: np.ndarray | None = None  # fixed: p x K' directions in X's units

    def learner(self, split: batch.StandardSplit) -> Callable:
        if self.kind == "pls":
            return batch.pls1_weights
        if self.kind == "spca":
            keep = self.keep

            def spca(Xtr, Ytr, K, ops):
                return batch.spca_weights(Xtr, Ytr, K, ops, keep or max(K, int(np.ceil(0.2 * Xtr.shape[1]))))

            return spca
        if self.kind == "fixed":
            W = self.W

            def fixed(Xtr, Ytr, K, ops):
                return batch.fixed_weights(W, split, K, ops)

            return fixed
        raise ValueError(f"unknown directions {self.kind!r}")


def rotated_learner(W_std: np.ndarray) -> Callable:
    """A learner that returns a given standardised-space basis (K x p), broadcast over columns."""
    W = np.ascontiguousarray(W_std[:, :, None])

    def given(Xtr, Ytr, K, ops):
        return ops.xp.asarray(W), np.full(1, W.shape[0])

    return given


# ---------------------------------------------------------------- the split pass


@dataclass
class SplitPass:
    """z (J x B) and flags for columns B of Y over J splits (column 0 is the observed y)."""

    r: np.ndarray
    z: np.ndarray
    degenerate: np.ndarray
    truncated: np.ndarray
    dropped: np.ndarray  # zero-variance train columns per split
    r2: np.ndarray | None = None  # observed column only
    W: list = field(default_factory=list)  # observed basis per split (for rotation)
    n_fits: int = 0


def split_pass(
    X,
    Y,
    splits: Splits,
    K: int,
    directions: Directions,
    ops,
    *,
    observed: bool = False,
    progress=silent,
    phase: str = "splits",
    w: np.ndarray | None = None,
) -> SplitPass:
    """Run the held-out refit on every split for every column of Y (n x B)."""
    J = splits.train.shape[0]
    B = Y.shape[1]
    out = SplitPass(
        np.zeros((J, B)), np.zeros((J, B)), np.zeros((J, B), bool), np.zeros((J, B), bool), np.zeros(J, int)
    )
    if observed:
        out.r2 = np.zeros(J)
    use_k1 = K == 1 and directions.kind == "pls" and not observed
    size = chunk_columns(B, K, *X.shape)
    chunks = [(s, min(s + size, B)) for s in range(0, B, size)]
    total = J * len(chunks)
    progress(phase, 0, total)
    done = 0
    for j in range(J):
        split = batch.standardize_split(X, splits.train[j], splits.test[j], ops.xp, w)
        out.dropped[j] = split.dropped
        learner = directions.learner(split)
        Ytr_all = Y[splits.train[j]]
        Yte_all = Y[splits.test[j]]
        for s, e in chunks:
            Ytr = ops.xp.asarray(Ytr_all[:, s:e])
            Yte = ops.xp.asarray(Yte_all[:, s:e])
            if use_k1:
                res = batch.k1_corr_batch(split, Ytr, Yte, ops)
            else:
                res = batch.split_corr_batch(split, Ytr, Yte, K, learner, ops, want_r2=observed, keep_w=observed)
            out.r[j, s:e], out.z[j, s:e] = res.r, res.z
            out.degenerate[j, s:e], out.truncated[j, s:e] = res.degenerate, res.truncated
            if observed:
                out.r2[j] = res.r2[0]
                out.W.append(res.W[:, :, 0])
            done += 1
            progress(phase, done, total)
    out.n_fits = J * B
    return out


# ---------------------------------------------------------------- NB-asymptotic


@dataclass
class NBOutcome:
    zbar: float
    statistic: float
    t: float
    df: int
    pvalue: float
    se: float
    rho_hat: float | None


def nb_asymptotic(z: np.ndarray, n_train: float, n_test: float) -> NBOutcome:
    """Nadeau-Bengio corrected resampled t on the split Fisher-z values, one-sided."""
    J = len(z)
    zbar = float(z.sum()) / J
    dev = z - zbar
    s2 = float(dev @ dev) / (J - 1) if J > 1 else 0.0
    se = math.sqrt(s2) * math.sqrt(1.0 / J + n_test / n_train)
    t = zbar / max(se, 1e-15)
    p = float(stdtr(J - 1, -t)) if J > 1 else float("nan")
    rho = min(max(1.0 - s2 * (n_test - 3), 0.0), 1.0) if n_test >= 4 else None
    return NBOutcome(zbar, math.tanh(zbar), t, J - 1, p, se, rho)


# ---------------------------------------------------------------- permutation nulls


def permuted_columns(y: np.ndarray, B: int, rng: np.random.Generator) -> np.ndarray:
    """n x (B+1): column 0 the observed y, then B independent permutations of it."""
    perms = rng.permuted(np.tile(y, (B, 1)), axis=1)
    return np.ascontiguousarray(np.column_stack([y, perms.T]))


@dataclass
class PermOutcome:
    observed: float
    null: np.ndarray  # B statistics (NaN where the null fit failed)
    pvalue: float
    failed: int


def perm_pvalue(observed: float, null: np.ndarray, failed: np.ndarray, what: str) -> PermOutcome:
    """p = (1 + #{null >= observed}) / (B + 1); a failed null fit counts as an exceedance."""
    B = len(null)
    n_failed = int(failed.sum())
    if n_failed > B / 2:
        raise RunFailure(
            f"{what}: {n_failed} of {B} permutations failed (degenerate resampling); "
            "check for near-constant y or fewer rows than components"
        )
    exceed = (null >= observed) | failed
    null = np.where(failed, np.nan, null)
    return PermOutcome(float(observed), null, (1.0 + exceed.sum()) / (B + 1.0), n_failed)


def nb_permutation(passed: SplitPass) -> PermOutcome:
    """NB-permutation: same splits for every permutation; null of mean z over splits."""
    J = passed.z.shape[0]
    zbar = passed.z.mean(axis=0)
    failed = passed.degenerate[:, 1:].sum(axis=0) > J / 2
    return perm_pvalue(float(np.tanh(zbar[0])), np.tanh(zbar[1:]), failed, "nb-perm")


# ---------------------------------------------------------------- CV-permutation-Q2


@dataclass
class Q2Pass:
    q2: np.ndarray  # B (column 0 observed)
    failed: np.ndarray
    truncated: int
    W: list  # observed basis per fold
    folds: list
    n_fits: int


def draw_folds(n: int, F: int, rng: np.random.Generator) -> list[np.ndarray]:
    return [np.sort(f) for f in np.array_split(rng.permutation(n), F)]


def cv_q2_pass(
    X, Y, folds, K, directions: Directions, ops, progress=silent, phase="cv folds", w=None, center: str = "train"
) -> Q2Pass:
    """Q2 = 1 - PRESS / SS pooled over fixed folds, per column of Y (standardised validation y; weighted with w).

    SS is around the training mean of each fold (center="train") or the validation fold's mean ("fold")."""
    n, B = Y.shape
    press = np.zeros(B)
    total = np.zeros(B)
    failed = np.zeros(B, bool)
    truncated = 0
    Ws = []
    chunks = [(s, min(s + CHUNK, B)) for s in range(0, B, CHUNK)]
    steps = len(folds) * len(chunks)
    progress(phase, 0, steps)
    done = 0
    everything = np.arange(n)
    for test in folds:
        train = np.setdiff1d(everything, test)
        split = batch.standardize_split(X, train, test, ops.xp, w)
        learner = directions.learner(split)
        for s, e in chunks:
            Ytr_s, Yte_s, flat = batch.standardize_y(
                split, ops.xp.asarray(Y[train, s:e]), ops.xp.asarray(Y[test, s:e]), ops
            )
            W, ranks = learner(split.Xtr, Ytr_s, K, ops)
            yhat = batch.heldout_predict(split.Xtr, Ytr_s, split.Xte, W, ops)
            p_, t_ = batch.weighted_sum_squares(split, yhat, Yte_s, ops, center)
            press[s:e] += batch._host(p_)
            total[s:e] += batch._host(t_)
            failed[s:e] |= batch._host(flat) | ~np.isfinite(batch._host(p_))
            truncated += int((ranks < K).sum())
            if s == 0:
                Ws.append(batch._host(W)[:, :, 0])
            done += 1
            progress(phase, done, steps)
    with np.errstate(divide="ignore", invalid="ignore"):
        q2 = 1.0 - press / total
    failed |= ~np.isfinite(q2)
    return Q2Pass(q2, failed, truncated, Ws, folds, len(folds) * B)


def q2_with_bases(X, y, folds, K, bases, ops, w=None, center: str = "train") -> float:
    """Observed Q2 recomputed with given standardised-space bases per fold (rotation check)."""
    n = len(y)
    press = total = 0.0
    for test, W in zip(folds, bases):
        train = np.setdiff1d(np.arange(n), test)
        split = batch.standardize_split(X, train, test, ops.xp, w)
        Ytr_s, Yte_s, _ = batch.standardize_y(split, y[train, None], y[test, None], ops)
        yhat = batch.heldout_predict(split.Xtr, Ytr_s, split.Xte, np.ascontiguousarray(W[:, :, None]), ops)
        p_, t_ = batch.weighted_sum_squares(split, yhat, Yte_s, ops, center)
        press += float(p_[0])
        total += float(t_[0])
    return 1.0 - press / total


# ---------------------------------------------------------------- PLS coefficients and the jackknife


def pls_coefficients(X, y, K, ops, basis: np.ndarray | None = None, w=None) -> tuple[np.ndarray, np.ndarray]:
    """K-component PLS1 regression coefficients in X's units (scale=True), and the standardised basis.

    Same model as sklearn PLSRegression(scale=True): coef = W (W'X'XW)^-1 W'X'y on
    standardised data, mapped back by sd_y / sd_x. `basis` (K x p) replaces W (rotation check).
    With weights w it is weighted PLS + weighted least squares (rows x sqrt(w) after weighted centring).
    """
    n = len(y)
    rows = np.arange(n)
    split = batch.standardize_split(X, rows, rows[:1], ops.xp, w)
    mu_y, sd_y = batch.weighted_moments(y[:, None], w)
    mu_y, sd_y = float(mu_y[0]), float(sd_y[0])
    if not sd_y > 0:
        raise DataError("y is constant; nothing to predict")
    ys = ((y - mu_y) / sd_y)[:, None]
    if w is not None:
        ys = ys * np.sqrt(w)[:, None]
    if basis is None:
        W, _ = batch.pls1_weights(split.Xtr, np.ascontiguousarray(ys), K, ops)
    else:
        W = np.ascontiguousarray(basis[:, :, None])
    W = batch._host(W)
    T = np.ascontiguousarray(np.stack([split.Xtr @ W[k] for k in range(W.shape[0])]))
    beta = batch._host(ops.refit_coefficients(T, np.ascontiguousarray(ys), batch.RCOND))[0]
    coef_std = W[:, :, 0].T @ beta
    coef = coef_std * sd_y / split.scale  # dropped columns have scale inf -> 0
    return coef, W[:, :, 0]


@dataclass
class JackknifeOutcome:
    coef: np.ndarray
    sd: np.ndarray
    t: np.ndarray
    df: int
    p: np.ndarray
    p_holm: np.ndarray
    pvalue: float  # omnibus: Holm (= Bonferroni) minimum p
    segments: int
    n_fits: int
    basis: np.ndarray


def jackknife_segments(n: int, g: int | None, rng: np.random.Generator) -> list[np.ndarray]:
    if g is None or g >= n:
        return [np.array([i]) for i in range(n)]
    return [np.sort(s) for s in np.array_split(rng.permutation(n), g)]


def jackknife(
    X, y, K, ops, segments: list[np.ndarray], center: str = "mean", progress=silent, w=None
) -> JackknifeOutcome:
    """Martens & Martens (2000) jackknife t of the PLS coefficients, as R pls::jack.test.

    var = (g-1)/g * sum (b_-i - c)^2, c = the replicate mean ('mean', R's default) or the
    full-data estimate ('full'); t = b / sd with g-1 df, two-sided p, Holm over variables.
    Known to be anti-conservative (R says so); reported for comparison only.
    """
    n = len(y)
    coef, basis = pls_coefficients(X, y, K, ops, w=w)
    g = len(segments)
    reps = np.empty((g, X.shape[1]))
    progress("jackknife", 0, g)
    for i, seg in enumerate(segments):
        keep = np.setdiff1d(np.arange(n), seg)
        reps[i], _ = pls_coefficients(X[keep], y[keep], K, ops, w=None if w is None else w[keep])
        progress("jackknife", i + 1, g)
    c = reps.mean(axis=0) if center == "mean" else coef
    var = (g - 1) / g * ((reps - c) ** 2).sum(axis=0)
    sd = np.sqrt(var)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(sd > 0, coef / sd, 0.0)
    p = 2.0 * stdtr(g - 1, -np.abs(t))
    p_holm = holm(p)
    return JackknifeOutcome(coef, sd, t, g - 1, p, p_holm, float(p_holm.min()), g, g + 1, basis)


def holm(p: np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values (monotone, capped at 1)."""
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    return out
