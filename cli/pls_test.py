"""pls-test: confirmatory inference for PLS via held-out OLS refits of the supervised subspace."""

from __future__ import annotations

from methodkit.cli._common import DemoStep, Run, common_options, input_argument, tool_group, warn
from methodkit.cli._pls_options import bench_options, datasets_options, power_options, sim_options, test_options

PROG = "pls-test"

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
    stable rank of X below 3) reroutes NB-asymptotic to NB-permutation. Our readings
    where the paper is vague (Q2's denominator, degenerate resampling, spca, the
    jackknife omnibus p): docs/pls.md.

    \b
    EXAMPLES
      pls-test datasets --fetch                       # once: tecator & co. from Debian
      pls-test test builtin:tecator:fat -k 3
      pls-test test data.csv --target y -k 1,2,3 --method all | jq .pvalue
      pls-test sim --geometry toeplitz0.5 -n 100 | pls-test test -k 2 --method nb
      pls-test power --geometry toeplitz0.5 -n 40,60,80 --methods nb,cvq2-perm --reps 50

    \b
    EXIT STATUS
      0  success (a test that does not reject is success)
      1  failure while running, including degenerate resampling (more than half
         of the splits or permutations failed)
      2  bad usage or bad input data
      3  --fail-if-reject was given and a test rejected
      130  interrupted
    """


@main.command("test")
@input_argument()
@test_options
@common_options(
    "output", "format", "in_format", "seed", "device", "threads", "meta", "force", "quiet", "verbose",
    formats=("jsonl", "table"),
)  # fmt: skip
def test_(**params):
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
      pls-test test builtin:gasoline -k 1 --method cvq2-perm --q2-center fold

    \b
    EXIT STATUS
      0  success (no rejection is success too)
      1  failure while running, including degenerate resampling
      2  bad usage or bad input data (NaN, constant y, n < K+5, -k auto...)
      3  --fail-if-reject and a test rejected
      130  interrupted
    """
    from methodkit.cli._common import _print_frame
    from methodkit.tools.pls import commands

    commands.test(Run.from_context(), params, lambda message: warn(PROG, message), _print_frame)


@main.command("sim")
@sim_options
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
@power_options
@common_options("output", "format", "seed", "threads", "force", "meta", "quiet", "verbose")
def power(**params):
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
    from methodkit.tools.pls import commands

    commands.power(Run.from_context(), params)


@main.command("bench")
@bench_options
@common_options("output", "format", "seed", "threads", "force", "meta", "quiet", "verbose")
def bench(**params):
    """Measure the performance figures in one run: one row per figure (CPU time).

    Rows: cvq2perm_vs_sklearn (our batched CV-permutation-Q2 against a loop of
    scikit-learn PLSRegression fits), nb_vs_cvq2perm (NB-asymptotic against our
    CV-permutation-Q2), nb_vs_sklearn_cvq2perm, the fit counts, and coef_vs_sklearn
    (max relative difference of the PLS coefficients). Times are process CPU time,
    medians over interleaved rounds; ratio = ref / ours. Give -j 1 for single-thread
    figures. scikit-learn is needed for the reference.

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
    from methodkit.tools.pls import commands

    commands.bench(Run.from_context(), params)


@main.command("datasets")
@datasets_options
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
