"""pls-test: confirmatory inference for PLS via held-out OLS refits of the supervised subspace."""

from __future__ import annotations

import click

from methodkit.cli._common import (
    DemoStep,
    FiniteFloatRange,
    OutputPath,
    Run,
    common_options,
    input_argument,
    tool_group,
    warn,
)

PROG = "pls-test"
METHODS = ("auto", "nb", "nb-perm", "cvq2-perm", "jackknife", "all")

DEMO = [
    DemoStep(
        "pls-test sim --geometry toeplitz0.5 -n 150 --seed 1 | pls-test test -k 2 --method nb -j 1",
        "sim toeplitz0.5 n=150 p=50",
        "pvalue",
        "NB-asymptotic p",
    ),
    DemoStep(
        "pls-test sim --geometry toeplitz0.5 -n 150 --seed 1 | pls-test test -k 2 --method cvq2-perm --perms 200 -j 1",
        "sim toeplitz0.5 n=150 p=50",
        "pvalue",
        "CV-permutation-Q2 p (B=200)",
    ),
    DemoStep(
        "pls-test test builtin:diabetes -k 2 --method nb-perm --perms 199 --rotate varimax -j 1",
        "diabetes (scikit-learn)",
        "statistic",
        "NB-permutation tanh(mean z)",
    ),
]


@tool_group(name=PROG)
def main():
    """Confirmatory tests for PLS regression at a pre-specified number of components K.

    The held-out OLS refit of the supervised subspace: on J random 50/50 splits, PLS1
    directions learned on the train half are refitted by OLS on the train scores and
    correlated with y on the test half; the test statistic is tanh of the mean
    Fisher z. NB-asymptotic calibrates it with the Nadeau-Bengio corrected resampled t
    (J fits); NB-permutation permutes y on the same splits; CV-permutation-Q2 and the
    jackknife t (R pls::jack.test) are the baselines. A gate (p <= 4, n < 25 or a
    stable rank of X below 3) reroutes NB-asymptotic to NB-permutation.

    \b
    EXAMPLES
      pls-test datasets --fetch                       # once: tecator & co. from Debian
      pls-test test builtin:tecator:fat -k 3
      pls-test test data.csv --target y -k 1,2,3 --method all | jq .pvalue
      pls-test sim --geometry toeplitz0.5 -n 100 | pls-test test -k 2 --method nb
      pls-test power --geometry toeplitz0.5 -n 40,60,80 --methods nb,cvq2-perm --reps 50

    \b
    NOTES
      Our reading where the paper is vague:
      --force overwrites output files, as in every methodkit tool; the gate
        override is --force-nb.
      Degenerate resampling exits 1 (failure while running), not 4.
      CV-permutation-Q2 pools PRESS over folds against the train-fold mean,
        y standardised with train moments; a failed null fit is an exceedance.
      spca keeps the 20% of columns most correlated with y (--spca-keep).
      fixed:W.npy directions are in the units of X's columns.
      Jackknife omnibus p = Holm-adjusted minimum p over the coefficients.
      --device auto runs on the CPU; --device cuda uses the CuPy twins.
      NB-asymptotic with PLS directions fits all J splits in one pass (each
        train half a weight column, so every Lanczos step is one GEMM over all
        splits), weighted or not; other directions loop over the splits.

    \b
    EXIT STATUS
      0  success (a test that does not reject is success)
      1  failure while running, including degenerate resampling (more than half
         of the splits or permutations failed)
      2  bad usage or bad input data
      3  --fail-if-reject was given and a test rejected
      130  interrupted
    """


def _limit_threads(run: Run, one_caller: bool = False):
    """Apply -j to Numba; BLAS keeps one thread (core.threads): its pool on top of Numba's oversubscribed
    the small batched GEMMs between the prange kernels. `one_caller` (no Dask threads): Numba's workqueue
    layer, whose idle workers sleep (OpenMP's spun between the many small kernels: -j 0 was 2-6x -j 1)."""
    from methodkit.core.threads import prefer_workqueue, single_blas

    run.threads()
    if one_caller:
        prefer_workqueue()
    return single_blas()


def data_columns(target_help: str, x_help: str):
    """--target and --x: which columns of DATA are y and X (test, power, bench)."""

    def deco(f):
        f = click.option("--x", "x_glob", default=None, metavar="GLOB", help=x_help)(f)
        return click.option("--target", default=None, help=target_help)(f)

    return deco


def resampling(splits_help: str, perms: int, perms_help: str, folds_help: str):
    """--splits, --perms and --folds (test, power, bench)."""

    def deco(f):
        f = click.option("--folds", type=int, default=5, show_default=True, help=folds_help)(f)
        f = click.option("--perms", type=int, default=perms, show_default=True, help=perms_help)(f)
        return click.option("--splits", type=int, default=50, show_default=True, help=splits_help)(f)

    return deco


@main.command("test")
@input_argument()
@click.option("-k", "--components", "ks", metavar="K[,K...]", help="Components (required); a list runs separate tests.")
@data_columns("Response column [default: the data set's target, else 'y'].", "X columns by glob, e.g. 'absorp_*'.")
@click.option("--x-range", default=None, metavar="FIRST:LAST", help="X columns from FIRST to LAST (by name).")
@click.option("--y", "y_path", default=None, metavar="PATH", help="y as .npy when INPUT is an X .npy.")
@click.option("--drop-nonnumeric", is_flag=True, help="Drop non-numeric X columns instead of failing.")
@click.option("--dropna", is_flag=True, help="Drop rows with NaN/inf instead of failing.")
@click.option(
    "--weights",
    default=None,
    metavar="COL|W.npy",
    help="Observation weights (a column, an NPZ array or a .npy); Kish n_eff must be >= 25.",
)
@click.option(
    "--select-k",
    type=int,
    default=None,
    metavar="KMAX",
    help="EXPLORATORY: choose K in 1..KMAX by CV (one-sigma rule) on the same data; p-values not valid.",
)
@click.option("--method", type=click.Choice(METHODS), default="auto", show_default=True, help="Test(s) to run.")
@resampling(
    "Random 50/50 splits J (nb, nb-perm).", 1000, "Permutations B (nb-perm, cvq2-perm).", "CV folds F (cvq2-perm)."
)
@click.option("--segments", type=int, default=None, help="Jackknife segments g [default: delete-one].")
@click.option(
    "--jack-center", type=click.Choice(["mean", "full"]), default="mean", show_default=True, help="Jackknife centre."
)
@click.option(
    "--directions", default="pls", show_default=True, metavar="pls|spca|fixed:W.npy", help="Direction learner."
)
@click.option("--spca-keep", type=int, default=None, help="spca: columns kept by the screen [default: 20% of p].")
@click.option(
    "--rotate",
    type=click.Choice(["none", "varimax"]),
    default="none",
    show_default=True,
    help="Recheck in a rotated basis.",
)
@click.option("--kaiser/--no-kaiser", default=True, show_default=True, help="Kaiser normalisation for varimax.")
@click.option("--force-nb", is_flag=True, help="Run NB-asymptotic even when the gate fires.")
@click.option(
    "--alpha",
    type=FiniteFloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Level for the 'reject' field.",
)
@click.option("--fail-if-reject", is_flag=True, help="Exit 3 when any test rejects at --alpha.")
@click.option(
    "--per-split",
    "per_split_path",
    type=OutputPath(),
    default=None,
    metavar="CSV",
    help="Write per-split r and z here.",
)
@click.option(
    "--null",
    "null_path",
    type=OutputPath(),
    default=None,
    metavar="NPY",
    help="Write permutation null statistics here.",
)
@click.option(
    "--loadings",
    "loadings_path",
    type=OutputPath(),
    default=None,
    metavar="CSV",
    help="Write W, varimax W and rotation.",
)
@click.option(
    "--coef", "coef_path", type=OutputPath(), default=None, metavar="CSV", help="Write the jackknife coefficient table."
)
@common_options(
    "output",
    "format",
    "in_format",
    "seed",
    "device",
    "threads",
    "meta",
    "force",
    "quiet",
    "verbose",
    formats=("jsonl", "table"),
)
def test_(input, ks, target, x_glob, x_range, y_path, drop_nonnumeric, dropna, weights, select_k, method, splits, perms, folds,
          segments, jack_center, directions, spca_keep, rotate, kaiser, force_nb, alpha, fail_if_reject,
          per_split_path, null_path, loadings_path, coef_path, **_):  # fmt: skip
    """Test H0: y is unrelated to the K-component PLS subspace of X (one JSON line per method and K).

    Tests at each K given with -k (separate tests, not a selection: -k auto is refused).
    Fields: method, method_requested, k, n, p, statistic (tanh of mean z; Q2 for
    cvq2-perm; max |t| for jackknife), pvalue, mean_r, heldout_r2, t, df, n_splits,
    n_perm, n_folds, q2, gate {fired, reason, stable_rank, n_eff}, rho_hat,
    rotation_delta, n_fits, seconds, seed, version.

    --directions fixed:W.npy takes p x K directions in the units of X's columns,
    learned on independent data (directions learned on the same rows invalidate the test).

    --weights gives observation weights (survey or frequency weights): weighted train
    moments, PLS and the OLS refit on sqrt(w)-scaled train rows (weighted least squares),
    weighted Pearson r / PRESS on the held-out rows; NB's variance correction uses the
    Kish effective sizes of the halves, and gate.n_eff is the Kish n_eff (sum w)^2 / sum w^2,
    which must be >= 25. Permutations move y; the weights stay with the rows of X.

    --select-k KMAX is exploratory only: K is chosen in 1..KMAX by F-fold CV (smallest
    K within one standard error of the lowest CV error, R pls::selectNcomp 'onesigma')
    on the same rows, then tested. Selection on the same data biases p-values low: every
    row then has exploratory: true, a selection record with the warning, and stderr says so.

    \b
    EXAMPLES
      pls-test test builtin:tecator:fat -k 3
      pls-test test builtin:tecator:moisture -k 3 --method all --rotate varimax
      pls-test test data.csv --target y --x 'f_*' -k 1,2 --per-split splits.csv
      pls-test test emb.npz -k 2 --directions fixed:probe.npy --method nb-perm

    \b
    EXIT STATUS
      0  success (no rejection is success too)
      1  failure while running, including degenerate resampling
      2  bad usage or bad input data (NaN, constant y, n < K+5, -k auto...)
      3  --fail-if-reject and a test rejected
      130  interrupted
    """
    import sys

    from methodkit.core import io
    from methodkit.core.errors import CheckFailed, UsageError
    from methodkit.tools.pls import api, methods, runs

    run = Run.from_context()
    outputs = [run.output, per_split_path, null_path, loadings_path, coef_path, run.params.get("meta")]
    run.refuse_existing_output(*outputs)
    if null_path and io.format_from_path(null_path, None, "npy") not in ("npy", "npz"):
        raise UsageError(f"--null {null_path}: expected a .npy or .npz path")
    if select_k is not None and ks is not None:
        raise UsageError("pass either -k/--components or --select-k, not both")
    k_list = runs.parse_ks(ks) if ks is not None else None
    with _limit_threads(run, one_caller=True):
        design = runs.load_design(run, input, target, x_glob, x_range, y_path, drop_nonnumeric, dropna, weights)
        for message in design.warnings:
            warn(PROG, message)
        k_list = k_list or ([] if select_k is not None else runs.parse_ks(ks))
        kind, W = runs.directions(directions, run)
        if perms < 99 and method in ("nb-perm", "all", "cvq2-perm"):
            warn(PROG, f"--perms {perms} < 99: the p-value floor 1/(B+1) = {1 / (perms + 1):.3g} is too coarse")
        options = api.Options(
            method=method,
            splits=splits,
            perms=perms,
            folds=folds,
            seed=run.seed,
            directions=methods.Directions(kind, spca_keep, W),
            rotate=rotate,
            kaiser=kaiser,
            force_nb=force_nb,
            alpha=alpha,
            segments=segments,
            jack_center=jack_center,
            # auto stays on the CPU: the CuPy twins have not been validated on a device yet
            device="cpu" if run.params.get("device") == "auto" else run.device(),
            select_k=select_k,
        )
        for K in k_list:
            api.check_k(design, K, options)
        if kind == "fixed":
            warn(
                PROG,
                "fixed directions must come from independent data; directions learned on these rows invalidate the test",
            )
        gate_state = api.gate.check(design.X, design.w)
        if gate_state.fired and method in ("auto", "nb", "all") and not force_nb:
            warn(
                PROG,
                f"gate fired ({gate_state.reason}): NB-asymptotic rerouted to NB-permutation; --force-nb overrides",
            )
        with run.progress() as progress:
            results = api.run(design, k_list, options, progress)
        if select_k is not None:
            chosen = results[0].selection
            warn(
                PROG,
                f"--select-k chose K = {chosen['chosen']} of 1..{chosen['k_max']} (CV one-sigma). {chosen['warning']}",
            )
            k_list = [chosen["chosen"]]
        loadings = {K: api.loadings(design, K, options) for K in k_list} if loadings_path else None
    _write_files(run, design, results, per_split_path, null_path, loadings_path, loadings, coef_path)
    rows = [r.to_dict() for r in results]
    record = run.write_meta()
    if record is not None:
        rows = [{**row, "meta": record} for row in rows]
    if run.fmt == "table" or (run.fmt is None and run.output == "-" and sys.stdout.isatty()):
        from methodkit.cli._common import _print_frame

        frame = runs.summary_rows(rows)
        if run.output == "-":
            _print_frame(frame)  # the human table, also when piped with --format table
        else:
            io.write_table(frame, run.output, "csv", force=run.force)
    else:
        with io.atomic_write(run.output, force=run.force) as handle:
            for row in rows:
                handle.write((io.dumps_json(row) + "\n").encode("utf-8"))
    if fail_if_reject and any(r.reject for r in results):
        hits = ", ".join(f"{r.method} k={r.k} p={r.pvalue:.3g}" for r in results if r.reject)
        raise CheckFailed(f"--fail-if-reject: rejected at alpha = {alpha}: {hits}")


def _write_files(run, design, results, per_split_path, null_path, loadings_path, loadings, coef_path):
    from methodkit.core import io
    from methodkit.tools.pls import runs

    if per_split_path:
        io.write_table(runs.per_split_table(results), per_split_path, force=run.force)
    if null_path:
        io.write_arrays(null_path, runs.null_arrays(results, null_path), force=run.force)
    if loadings_path:
        io.write_table(runs.loadings_table(design, loadings), loadings_path, force=run.force)
    if coef_path:
        io.write_table(runs.coef_table(design, results), coef_path, force=run.force)


@main.command("sim")
@click.option("--geometry", default="toeplitz0.5", show_default=True, help="iid, onefactor or toeplitzR (toeplitz0.5).")
@click.option("-n", "--rows", "n", type=int, default=100, show_default=True, help="Rows.")
@click.option("-p", "--columns", "p", type=int, default=50, show_default=True, help="X columns.")
@click.option("--active", type=int, default=5, show_default=True, help="Non-zero coefficients (the first ones).")
@click.option("--snr", type=FiniteFloatRange(), default=0.3, show_default=True, help="var(X beta) / var(noise).")
@click.option("--null", "null", is_flag=True, help="y independent of X (same as --snr 0).")
@common_options("output", "format", "seed", "force", "meta", "quiet", "verbose")
def sim(geometry, n, p, active, snr, null, **_):
    """Write synthetic (X, y) as a table: columns x1..xp, y.

    \b
    EXAMPLES
      pls-test sim --geometry toeplitz0.5 -n 100 -p 50 --snr 0.3 > sim.csv
      pls-test sim --geometry onefactor -n 40 --null -o null.parquet

    \b
    EXIT STATUS
      0  success
      2  bad usage
      130  interrupted
    """
    import pandas as pd

    from methodkit.core.rng import generator
    from methodkit.tools.pls.simulate import simulate

    run = Run.from_context()
    X, y = simulate(geometry, n, p, active=active, snr=0.0 if null else snr, rng=generator(run.seed))
    frame = pd.DataFrame(X, columns=[f"x{j + 1}" for j in range(p)])
    frame["y"] = y
    run.emit_table(frame)


@main.command("power")
@click.option("--geometry", default="toeplitz0.5", show_default=True, help="Simulated design (ignored with --data).")
@click.option("-p", "--columns", "p", type=int, default=50, show_default=True, help="X columns (simulated).")
@click.option("--active", type=int, default=5, show_default=True, help="Non-zero coefficients (simulated).")
@click.option(
    "--snr", type=FiniteFloatRange(), default=0.3, show_default=True, help="Signal-to-noise ratio (simulated)."
)
@click.option("--data", "data_source", default=None, metavar="DATA", help="Subsample rows of real data instead.")
@data_columns("Response column of --data.", "X columns of --data by glob.")
@click.option("--null", "null", is_flag=True, help="Size study: y independent of X (permuted y with --data).")
@click.option("-n", "--sizes", "sizes", default="40,60,80,100,120", show_default=True, help="Sample sizes.")
@click.option("--reps", type=int, default=100, show_default=True, help="Replications per size.")
@click.option("--methods", "method_list", default="nb,cvq2-perm", show_default=True, help="Methods, comma list.")
@click.option("-k", "--components", "k", type=int, default=2, show_default=True, help="Components K.")
@resampling("Splits J.", 200, "Permutations B.", "CV folds F.")
@click.option(
    "--alpha",
    type=FiniteFloatRange(0, 1, min_open=True, max_open=True),
    default=0.05,
    show_default=True,
    help="Test level.",
)
@click.option("--force-nb", is_flag=True, help="Run NB-asymptotic even when the gate fires.")
@click.option(
    "--summary",
    "summary_path",
    type=OutputPath(),
    default=None,
    metavar="JSON",
    help="Write n for 80% power per method.",
)
@click.option(
    "--scheduler",
    default="sync",
    show_default=True,
    metavar="sync|local|ADDRESS",
    help="Run replications in a plain loop, on a Dask LocalCluster, or on a Dask scheduler (host:port).",
)
@click.option("--workers", type=int, default=2, show_default=True, help="Worker processes of --scheduler local.")
@common_options("output", "format", "seed", "threads", "force", "meta", "quiet", "verbose")
def power(geometry, p, active, snr, data_source, target, x_glob, null, sizes, reps, method_list, k, splits, perms,
          folds, alpha, force_nb, summary_path, scheduler, workers, **_):  # fmt: skip
    """Size/power curves: rejection rate per method and n (one CSV row each).

    Each replication draws fresh data (a simulated geometry, or a row subsample of
    --data, with y permuted under --null) and runs every method on it. Replications
    are independent Dask tasks with --scheduler local (a LocalCluster of --workers
    processes) or --scheduler host:port (a running cluster); each draws everything from
    its own seed, so the curves equal the --scheduler sync ones for the same --seed.

    \b
    EXAMPLES
      pls-test power --geometry toeplitz0.5 -n 40,60,80,100,120 --reps 200 --summary n80.json
      pls-test power --geometry iid --null -n 40,100 --methods nb,nb-perm --reps 500
      pls-test power --data builtin:tecator:fat -k 3 --null -n 100 --reps 50 --force-nb
      pls-test power --reps 500 --scheduler local --workers 8 --summary n80.json

    \b
    EXIT STATUS
      0  success
      1  failure while running
      2  bad usage or bad input data
      130  interrupted
    """
    import pandas as pd

    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.pls import api, runs
    from methodkit.tools.pls import power as power_mod

    run = Run.from_context()
    run.refuse_existing_output(run.output, summary_path)
    ns = runs.parse_sizes(sizes)
    chosen = runs.parse_methods(method_list)
    if workers < 1:
        raise UsageError(f"--workers must be >= 1, got {workers}")
    with _limit_threads(run):
        design = None
        if data_source:
            design = runs.load_design(run, data_source, target, x_glob, None, None, False, False)
        scenario = power_mod.Scenario(geometry, p, active, snr, design, null)
        options = api.Options(splits=splits, perms=perms, folds=folds, seed=run.seed, alpha=alpha, force_nb=force_nb)
        with run.progress() as progress:
            points = power_mod.curves(
                scenario, ns, chosen, k, reps, options, progress, scheduler=scheduler, workers=workers
            )
    frame = pd.DataFrame([vars(pt) for pt in points])
    if summary_path:
        n80 = {m: power_mod.n_for_power(points, m) for m in chosen}
        summary = {"alpha": alpha, "k": k, "reps": reps, "scenario": data_source or geometry, "null": null, "n80": n80}
        io.write_json(summary, summary_path, force=run.force)
    run.emit_table(frame)


@main.command("bench")
@click.option(
    "--data",
    "data_source",
    default=None,
    metavar="DATA",
    help="Data to time on (default builtin:tecator:fat when fetched, else a simulated 215 x 100 design).",
)
@data_columns("Response column of --data.", "X columns of --data by glob.")
@click.option("-k", "--components", "k", type=int, default=3, show_default=True, help="Components K.")
@resampling("NB splits J.", 1000, "CV-permutation B.", "CV folds F.")
@click.option("--rounds", type=int, default=7, show_default=True, help="Interleaved [CV-perm, NB] rounds.")
@click.option(
    "--ref-perms",
    type=int,
    default=20,
    show_default=True,
    help="Permutations the sklearn reference loop is timed on (scaled to B per fit).",
)
@common_options("output", "format", "seed", "threads", "force", "meta", "quiet", "verbose")
def bench(data_source, target, x_glob, k, splits, perms, folds, rounds, ref_perms, **_):
    """Measure the performance figures in one run: one row per figure (CPU time).

    Rows: cvq2perm_vs_sklearn (our batched CV-permutation-Q2 against a loop of
    scikit-learn PLSRegression fits), nb_vs_cvq2perm (NB-asymptotic against our
    CV-permutation-Q2: the issue's >= 50x), nb_vs_sklearn_cvq2perm, the fit counts,
    and coef_vs_sklearn (max relative difference of the PLS coefficients). Times are
    process CPU time, medians over interleaved rounds; ratio = ref / ours. Give -j 1
    for single-thread figures (those of docs/pls.md). scikit-learn is needed for the reference.

    \b
    EXAMPLES
      pls-test bench -j 1
      pls-test bench --data builtin:tecator:protein --rounds 15 -o bench.csv
      pls-test bench --data spectra.csv --target y -k 2 -j 1 | column -s, -t

    \b
    EXIT STATUS
      0  success
      1  failure while running
      2  bad usage or bad input data (or scikit-learn missing)
      130  interrupted
    """
    from methodkit.core.errors import UsageError

    if rounds < 1 or ref_perms < 1:
        raise UsageError(f"--rounds and --ref-perms must be >= 1, got {rounds} and {ref_perms}")
    import pandas as pd

    from methodkit.tools.pls import benchmark, runs

    run = Run.from_context()
    run.refuse_existing_output()
    with _limit_threads(run, one_caller=True):
        data_source, design = runs.bench_design(data_source, run.seed)
        if design is None:
            design = runs.load_design(run, data_source, target, x_glob, None, None, False, False)
        with run.progress() as progress:
            rows = benchmark.run(design, k, splits, perms, folds, rounds, ref_perms, run.seed, progress)
    run.emit_table(pd.DataFrame(rows))


@main.command("datasets")
@click.option("--fetch", is_flag=True, help="apt-get download r-cran-caret/r-cran-pls, convert to Parquet (cache).")
@click.option("--export", "export", default=None, metavar="NAME", help="Write data set NAME to -o.")
@common_options("output", "format", "force", "meta", "quiet", "verbose")
def datasets_(fetch, export, **_):
    """List the PLS data sets (tecator, gasoline, yarn, ...), fetch them, or export one.

    They come from Debian's r-cran-caret and r-cran-pls, downloaded with apt-get download
    and unpacked with dpkg-deb -x (never installed: that would pull R), then converted
    once to Parquet in $METHODKIT_PLS_DATA or ~/.cache/methodkit/pls.

    \b
    EXAMPLES
      pls-test datasets
      pls-test datasets --fetch
      pls-test datasets --export tecator -o tecator.parquet

    \b
    EXIT STATUS
      0  success
      1  fetching failed (no apt-get, no network)
      2  bad usage, or an unknown or unfetched data set
      130  interrupted
    """
    from methodkit.tools.pls import sources

    run = Run.from_context()
    if fetch and export:
        from methodkit.core.errors import UsageError

        raise UsageError("pass only one of --fetch and --export")
    if fetch:
        with run.progress() as progress:
            progress("fetch", 0, 1)
            sources.fetch()
            progress("fetch", 1, 1)
    if export:
        run.emit_table(sources.builtin_frame(export))
        return
    run.emit_table(sources.listing())
