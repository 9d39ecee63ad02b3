"""run(): the tests the user asked for, at each pre-specified K, with gate, rotation and records."""

from __future__ import annotations

import functools
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from methodkit.core.errors import DataError, RunFailure, UsageError
from methodkit.core.progress import silent
from methodkit.tools.pls import batch, fused, gate, methods, select
from methodkit.tools.pls.data import Design
from methodkit.tools.pls.rotation import varimax

METHODS = ("auto", "nb", "nb-perm", "cvq2-perm", "jackknife", "all")
ROTATION_TOL = 1e-9
Q2_CENTERS = ("train", "fold")


@dataclass
class Options:
    method: str = "auto"
    splits: int = 50
    perms: int = 1000
    folds: int = 5
    seed: int = 0
    directions: methods.Directions = field(default_factory=methods.Directions)
    rotate: str = "none"  # none | varimax
    kaiser: bool = True
    force_nb: bool = False
    alpha: float = 0.05
    segments: int | None = None  # jackknife: None = delete-one
    jack_center: str = "mean"
    device: str = "cpu"
    select_k: int | None = None  # exploratory: choose K <= this by CV (one-sigma); invalidates p-values
    q2_center: str = "train"  # cvq2-perm's SS: around the training mean (Wold) or the fold's mean (plskit)


@dataclass
class TestResult:
    method: str
    method_requested: str
    k: int
    n: int
    p: int
    statistic: float
    pvalue: float
    alpha: float
    reject: bool
    mean_r: float | None = None
    heldout_r2: float | None = None
    t: float | None = None
    df: int | None = None
    n_splits: int | None = None
    n_train: int | None = None
    n_test: int | None = None
    n_perm: int | None = None
    n_folds: int | None = None
    q2: float | None = None
    gate: dict | None = None
    rho_hat: float | None = None
    rotation: str = "none"
    rotation_delta: float | None = None
    directions: str = "pls"
    degenerate_splits: int = 0
    truncated_splits: int = 0
    dropped_columns_per_split: int = 0
    failed_permutations: int = 0
    n_fits: int = 0
    seconds: float = 0.0
    seed: int = 0
    version: str = ""
    target: str = ""
    source: str = ""
    exploratory: bool = False  # K was selected on the same data (--select-k)
    selection: dict | None = None
    # files the CLI may write on request (not part of the JSON row)
    per_split: dict | None = field(default=None, repr=False)  # column name -> J values
    null: np.ndarray | None = field(default=None, repr=False)
    coef_table: dict | None = field(default=None, repr=False)
    basis: np.ndarray | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("per_split", "null", "coef_table", "basis"):
            d.pop(key)
        return d


@functools.cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("methodkit")
    except PackageNotFoundError:
        return "0"


def plan_methods(requested: str, gate_state: gate.Gate, force_nb: bool) -> list[tuple[str, str]]:
    """(method that runs, method requested) pairs; the gate reroutes NB-asymptotic to NB-permutation."""
    if requested not in METHODS:
        raise UsageError(f"--method must be one of {', '.join(METHODS)}, not {requested!r}")
    nb = "nb" if (force_nb or not gate_state.fired) else "nb-perm"
    if requested == "auto":
        return [(nb, "auto")]
    if requested == "nb":
        return [(nb, "nb")]
    if requested == "all":
        plan = [(nb, "nb"), ("nb-perm", "nb-perm"), ("cvq2-perm", "cvq2-perm"), ("jackknife", "jackknife")]
        if nb == "nb-perm":
            plan = plan[1:]
        return plan
    return [(requested, requested)]


def check_k(design: Design, K: int, options: Options) -> None:
    if K < 1:
        raise UsageError(f"-k/--components must be >= 1, got {K}")
    if design.n < K + 5:
        raise DataError(f"{design.source}: n = {design.n} rows is too few for K = {K} (need at least K + 5 = {K + 5})")
    if options.directions.kind == "fixed":
        W = options.directions.W
        if W.shape[0] != design.p or W.shape[1] < K:
            raise DataError(
                f"--directions fixed: W has shape {W.shape}, expected ({design.p}, >= {K}) "
                f"for {design.p} X columns and K = {K}"
            )


def run(design: Design, ks: list[int], options: Options, progress=silent) -> list[TestResult]:
    """Every requested test at every K (separate tests, not a selection), or at a CV-selected K (exploratory)."""
    selection = None
    if options.select_k is not None:
        selection = choose_k(design, options)
        ks = [selection.chosen]
    for K in ks:
        check_k(design, K, options)
    gate_state = gate.check(design.X, design.w)
    results = []
    for K in ks:
        for method, requested in plan_methods(options.method, gate_state, options.force_nb):
            results.append(_one(design, K, method, requested, gate_state, options, progress))
    if selection is not None:
        for res in results:
            res.exploratory = True
            res.selection = selection.to_dict()
    return results


def choose_k(design: Design, options: Options) -> select.Selection:
    """--select-k: the one-sigma CV choice of K in 1..select_k (own folds stream; exploratory)."""
    k_max = options.select_k
    if k_max < 1:
        raise UsageError(f"--select-k must be >= 1, got {k_max}")
    if options.directions.kind != "pls":
        raise UsageError("--select-k works with --directions pls only")
    k_max = min(k_max, design.n - 5, design.p)
    if not 2 <= options.folds <= design.n:
        raise UsageError(f"--folds must be between 2 and n = {design.n}, got {options.folds}")
    folds = methods.draw_folds(design.n, options.folds, _streams(options.seed)["select"])
    return select.select_k(design.X, design.y, k_max, folds, batch.operations("cpu"), design.w)  # K_max fits


class _Streams(dict):
    """Independent generators per component, so a method's numbers do not depend on which others ran.

    Made on first use (a run needs one or two of them).
    """

    NAMES = ("splits", "nb-perm", "folds", "cvq2-perm", "jackknife", "select")

    def __init__(self, seed: int):
        super().__init__()
        self.seed = seed

    def __missing__(self, name: str) -> np.random.Generator:
        # child i of SeedSequence(seed).spawn(...), made alone: the same stream, without spawning all six
        child = np.random.SeedSequence(self.seed, spawn_key=(self.NAMES.index(name),))
        self[name] = rng = np.random.default_rng(child)
        return rng


def _streams(seed: int) -> _Streams:
    return _Streams(seed)


def _one(design, K, method, requested, gate_state, options, progress) -> TestResult:
    started = time.perf_counter()
    ops = batch.operations(options.device)
    rng = _streams(options.seed)
    X, y, w = design.X, design.y, design.w
    res = TestResult(
        method=method,
        method_requested=requested,
        k=K,
        n=design.n,
        p=design.p,
        statistic=float("nan"),
        pvalue=float("nan"),
        alpha=options.alpha,
        reject=False,
        gate=gate_state.to_dict(),
        rotation=options.rotate,
        directions=options.directions.kind,
        seed=options.seed,
        version=_version(),
        target=design.target,
        source=design.source,
    )
    if method in ("nb", "nb-perm"):
        _split_methods(res, X, y, w, K, method, options, ops, rng, progress)
    elif method == "cvq2-perm":
        _cvq2(res, X, y, w, K, options, ops, rng, progress)
    else:
        _jack(res, X, y, w, K, options, batch.operations("cpu"), rng, progress)  # n small refits: CPU
    res.reject = bool(res.pvalue <= options.alpha)
    res.seconds = time.perf_counter() - started
    return res


def _split_methods(res, X, y, w, K, method, options, ops, rng, progress):
    J = options.splits
    if J < 2:
        raise UsageError(f"--splits must be >= 2, got {J}")
    splits = methods.draw_splits(len(y), K, J, rng["splits"])
    if options.directions.kind == "pls":  # all splits in one batched pass (fused.py), weighted or not
        progress("splits", 0, 1)
        observed = fused.observed_pass(X, y, splits, K, ops, w)
        progress("splits", 1, 1)
    else:
        observed = methods.split_pass(
            X,
            y[:, None].copy(),
            splits,
            K,
            options.directions,
            ops,
            observed=True,
            progress=progress,
            phase="splits",
            w=w,
        )
    _check_splits(observed, J)
    z = observed.z[:, 0]
    nb = methods.nb_asymptotic(z, *_half_sizes(splits, w))
    res.n_splits, res.n_train, res.n_test = J, splits.n_train, splits.n_test
    res.mean_r = float(observed.r[:, 0].sum()) / J
    res.heldout_r2 = float(observed.r2.sum()) / J
    res.degenerate_splits = int(observed.degenerate[:, 0].sum())
    res.truncated_splits = int(observed.truncated[:, 0].sum())
    res.dropped_columns_per_split = int(observed.dropped.max())
    res.rho_hat = nb.rho_hat
    res.per_split = {  # columns; the CLI writes them with --per-split
        "split": np.arange(J),
        "n_train": np.full(J, splits.n_train),
        "n_test": np.full(J, splits.n_test),
        "r": observed.r[:, 0],
        "z": z,
        "degenerate": observed.degenerate[:, 0],
        "truncated": observed.truncated[:, 0],
    }
    res.basis = observed.W[0] if observed.W else None
    if method == "nb":
        res.statistic, res.t, res.df, res.pvalue = nb.statistic, nb.t, nb.df, nb.pvalue
        res.n_fits = J
    else:
        B = options.perms
        if B < 1:
            raise UsageError(f"--perms must be >= 1, got {B}")
        Y = methods.permuted_columns(y, B, rng["nb-perm"])
        null_pass = methods.split_pass(
            X, Y[:, 1:], splits, K, options.directions, ops, progress=progress, phase="permutations", w=w
        )
        zbar_null = null_pass.z.mean(axis=0)
        failed = null_pass.degenerate.sum(axis=0) > J / 2
        outcome = methods.perm_pvalue(float(np.tanh(z.mean())), np.tanh(zbar_null), failed, "nb-perm")
        res.statistic, res.pvalue = outcome.observed, outcome.pvalue
        res.null = outcome.null
        res.n_perm = B
        res.failed_permutations = outcome.failed
        res.n_fits = J * (B + 1)
    if options.rotate == "varimax":
        _rotate_splits(res, X, y, w, K, splits, observed, options, batch.operations("cpu"), nb, method)


def _half_sizes(splits: methods.Splits, w) -> tuple[float, float]:
    """n_train, n_test for the NB correction; with weights the mean Kish effective sizes of the halves."""
    if w is None:
        return splits.n_train, splits.n_test
    n_tr = np.mean([batch.kish(w[rows]) for rows in splits.train])
    n_te = np.mean([batch.kish(w[rows]) for rows in splits.test])
    return float(n_tr), float(n_te)


def _check_splits(observed: methods.SplitPass, J: int) -> None:
    degenerate = int(observed.degenerate[:, 0].sum())
    if degenerate > J / 2:
        raise RunFailure(
            f"{degenerate} of {J} splits are degenerate (held-out prediction or y has no variance); "
            "degenerate resampling: check y and X"
        )
    truncated = int(observed.truncated[:, 0].sum())
    if truncated > J / 2:
        raise RunFailure(
            f"K exceeds the rank reachable on the train half in {truncated} of {J} splits; "
            "degenerate resampling: use a smaller -k"
        )


def _rotate_splits(res, X, y, w, K, splits, observed, options, ops, nb, method):
    """Recompute every split correlation with the varimax-rotated basis W M of that split."""
    z_rot = np.zeros(len(observed.W))
    for j, W in enumerate(observed.W):
        W_rot, _ = varimax(W.T, options.kaiser)
        split = batch.standardize_split(X, splits.train[j], splits.test[j], ops.xp, w)
        out = batch.split_corr_batch(
            split, y[splits.train[j], None], y[splits.test[j], None], K, methods.rotated_learner(W_rot.T), ops
        )
        z_rot[j] = out.z[0]
    nb_rot = methods.nb_asymptotic(z_rot, *_half_sizes(splits, w))
    if method == "nb":
        delta = max(abs(nb_rot.statistic - res.statistic), abs(nb_rot.pvalue - res.pvalue))
    else:
        null = res.null
        exceed = (null >= nb_rot.statistic) | np.isnan(null)
        p_rot = (1.0 + exceed.sum()) / (len(null) + 1.0)
        delta = max(abs(nb_rot.statistic - res.statistic), abs(p_rot - res.pvalue))
    res.rotation_delta = float(delta)
    _require_invariance(delta)


def _require_invariance(delta: float) -> None:
    if not delta <= ROTATION_TOL:
        raise RunFailure(f"rotation changed the result by {delta:.3g} (> {ROTATION_TOL:g}); numerical breakdown")


def _cvq2(res, X, y, w, K, options, ops, rng, progress):
    F, B = options.folds, options.perms
    if not 2 <= F <= len(y):
        raise UsageError(f"--folds must be between 2 and n = {len(y)}, got {F}")
    folds = methods.draw_folds(len(y), F, rng["folds"])
    Y = methods.permuted_columns(y, B, rng["cvq2-perm"])
    if options.q2_center not in Q2_CENTERS:
        raise UsageError(f"--q2-center must be one of {', '.join(Q2_CENTERS)}, not {options.q2_center!r}")
    q = methods.cv_q2_pass(X, Y, folds, K, options.directions, ops, progress, w=w, center=options.q2_center)
    if q.failed[0]:
        raise RunFailure("cvq2-perm: the observed Q2 is undefined (a validation fold has no variance in y)")
    outcome = methods.perm_pvalue(float(q.q2[0]), q.q2[1:], q.failed[1:], "cvq2-perm")
    res.statistic = res.q2 = outcome.observed
    res.pvalue = outcome.pvalue
    res.null = outcome.null
    res.n_perm, res.n_folds = B, F
    res.failed_permutations = outcome.failed
    res.truncated_splits = q.truncated
    res.n_fits = q.n_fits
    res.basis = q.W[0]
    if options.rotate == "varimax":
        rotated = [varimax(W.T, options.kaiser)[0].T for W in q.W]
        q2_rot = methods.q2_with_bases(X, y, folds, K, rotated, batch.operations("cpu"), w, options.q2_center)
        res.rotation_delta = float(abs(q2_rot - res.q2))
        _require_invariance(res.rotation_delta)


def _jack(res, X, y, w, K, options, ops, rng, progress):
    segments = methods.jackknife_segments(len(y), options.segments, rng["jackknife"])
    out = methods.jackknife(X, y, K, ops, segments, options.jack_center, progress, w)
    res.statistic = float(np.max(np.abs(out.t)))
    res.t = res.statistic
    res.df = out.df
    res.pvalue = out.pvalue
    res.n_fits = out.n_fits
    res.basis = out.basis
    res.coef_table = {"coef": out.coef, "sd": out.sd, "t": out.t, "df": out.df, "p": out.p, "p_holm": out.p_holm}
    if options.rotate == "varimax":
        W_rot, _ = varimax(out.basis.T, options.kaiser)
        coef_rot, _ = methods.pls_coefficients(X, y, K, ops, basis=W_rot.T, w=w)
        scale = max(float(np.max(np.abs(out.coef))), 1e-300)
        res.rotation_delta = float(np.max(np.abs(coef_rot - out.coef)) / scale)
        _require_invariance(res.rotation_delta)


def loadings(design: Design, K: int, options: Options) -> dict:
    """Full-data directions W (standardised X, p x K), their varimax rotation W M, and M."""
    ops = batch.operations("cpu")
    rows = np.arange(design.n)
    split = batch.standardize_split(design.X, rows, rows[:1], np, design.w)
    ys, _, _ = batch.standardize_y(split, design.y[:, None], design.y[:1, None], ops)
    learner = options.directions.learner(split)
    W, _ = learner(split.Xtr, ys, K, ops)
    W = batch._host(W)[:, :, 0].T
    W_rot, M = varimax(W, options.kaiser)
    return {"W": W, "W_varimax": W_rot, "rotation": M}
