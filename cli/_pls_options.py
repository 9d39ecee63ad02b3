"""pls-test's option groups: the columns and resampling every verb shares, and each verb's own options."""

from __future__ import annotations

import click

from methodkit.cli._common import FiniteFloatRange, OutputPath, option_group

METHODS = ("auto", "nb", "nb-perm", "cvq2-perm", "jackknife", "all")
LEVEL = FiniteFloatRange(0, 1, min_open=True, max_open=True)


def data_columns(target_help: str, x_help: str):
    """--target and --x: which columns of DATA are y and X (test, power, bench)."""
    return option_group(
        click.option("--target", default=None, help=target_help),
        click.option("--x", "x_glob", default=None, metavar="GLOB", help=x_help),
    )


def resampling(splits_help: str, perms: int, perms_help: str, folds_help: str):
    """--splits, --perms and --folds (test, power, bench)."""
    return option_group(
        click.option("--splits", type=int, default=50, show_default=True, help=splits_help),
        click.option("--perms", type=int, default=perms, show_default=True, help=perms_help),
        click.option("--folds", type=int, default=5, show_default=True, help=folds_help),
    )


Q2_CENTER = click.option(
    "--q2-center",
    type=click.Choice(["train", "fold"]),
    default="train",
    show_default=True,
    help="cvq2-perm: PRESS against the SS around the training mean (Wold's Q2) or the fold's own mean (plskit's).",
)


def _side_file(flag: str, dest: str, metavar: str, help: str):
    return click.option(flag, dest, type=OutputPath(), default=None, metavar=metavar, help=help)


test_options = option_group(
    click.option(
        "-k", "--components", "ks", metavar="K[,K...]", help="Components (required); a list runs separate tests."
    ),
    data_columns("Response column [default: the data set's target, else 'y'].", "X columns by glob, e.g. 'absorp_*'."),
    click.option("--x-range", default=None, metavar="FIRST:LAST", help="X columns from FIRST to LAST (by name)."),
    click.option("--y", "y_path", default=None, metavar="PATH", help="y as .npy when INPUT is an X .npy."),
    click.option("--drop-nonnumeric", is_flag=True, help="Drop non-numeric X columns instead of failing."),
    click.option("--dropna", is_flag=True, help="Drop rows with NaN/inf instead of failing."),
    click.option(
        "--weights",
        default=None,
        metavar="COL|W.npy",
        help="Observation weights (a column, an NPZ array or a .npy); Kish n_eff must be >= 25.",
    ),
    click.option(
        "--select-k",
        type=int,
        default=None,
        metavar="KMAX",
        help="EXPLORATORY: choose K in 1..KMAX by CV (one-sigma rule) on the same data; p-values not valid.",
    ),
    click.option("--method", type=click.Choice(METHODS), default="auto", show_default=True, help="Test(s) to run."),
    resampling(
        "Random 50/50 splits J (nb, nb-perm).", 1000, "Permutations B (nb-perm, cvq2-perm).", "CV folds F (cvq2-perm)."
    ),
    Q2_CENTER,
    click.option("--segments", type=int, default=None, help="Jackknife segments g [default: delete-one]."),
    click.option(
        "--jack-center",
        type=click.Choice(["mean", "full"]),
        default="mean",
        show_default=True,
        help="Jackknife centre.",
    ),
    click.option(
        "--directions", default="pls", show_default=True, metavar="pls|spca|fixed:W.npy", help="Direction learner."
    ),
    click.option("--spca-keep", type=int, default=None, help="spca: columns kept by the screen [default: 20% of p]."),
    click.option(
        "--rotate",
        type=click.Choice(["none", "varimax"]),
        default="none",
        show_default=True,
        help="Recheck in a rotated basis.",
    ),
    click.option("--kaiser/--no-kaiser", default=True, show_default=True, help="Kaiser normalisation for varimax."),
    click.option("--force-nb", is_flag=True, help="Run NB-asymptotic even when the gate fires."),
    click.option("--alpha", type=LEVEL, default=0.05, show_default=True, help="Level for the 'reject' field."),
    click.option("--fail-if-reject", is_flag=True, help="Exit 3 when any test rejects at --alpha."),
    _side_file("--per-split", "per_split_path", "CSV", "Write per-split r and z here."),
    _side_file("--null", "null_path", "NPY", "Write permutation null statistics here."),
    _side_file("--loadings", "loadings_path", "CSV", "Write W, varimax W and rotation."),
    _side_file("--coef", "coef_path", "CSV", "Write the jackknife coefficient table."),
)

sim_options = option_group(
    click.option(
        "--geometry", default="toeplitz0.5", show_default=True, help="iid, onefactor or toeplitzR (toeplitz0.5)."
    ),
    click.option("-n", "--rows", "n", type=int, default=100, show_default=True, help="Rows."),
    click.option("-p", "--columns", "p", type=int, default=50, show_default=True, help="X columns."),
    click.option("--active", type=int, default=5, show_default=True, help="Non-zero coefficients (the first ones)."),
    click.option("--snr", type=FiniteFloatRange(), default=0.3, show_default=True, help="var(X beta) / var(noise)."),
    click.option("--null", "null", is_flag=True, help="y independent of X (same as --snr 0)."),
)

power_options = option_group(
    click.option(
        "--geometry", default="toeplitz0.5", show_default=True, help="Simulated design (ignored with --data)."
    ),
    click.option("-p", "--columns", "p", type=int, default=50, show_default=True, help="X columns (simulated)."),
    click.option("--active", type=int, default=5, show_default=True, help="Non-zero coefficients (simulated)."),
    click.option(
        "--snr", type=FiniteFloatRange(), default=0.3, show_default=True, help="Signal-to-noise ratio (simulated)."
    ),
    click.option("--data", "data_source", default=None, metavar="DATA", help="Subsample rows of real data instead."),
    data_columns("Response column of --data.", "X columns of --data by glob."),
    click.option("--null", "null", is_flag=True, help="Size study: y independent of X (permuted y with --data)."),
    click.option("-n", "--sizes", "sizes", default="40,60,80,100,120", show_default=True, help="Sample sizes."),
    click.option("--reps", type=int, default=100, show_default=True, help="Replications per size."),
    click.option("--methods", "method_list", default="nb,cvq2-perm", show_default=True, help="Methods, comma list."),
    click.option("-k", "--components", "k", type=int, default=2, show_default=True, help="Components K."),
    resampling("Splits J.", 200, "Permutations B.", "CV folds F."),
    Q2_CENTER,
    click.option("--alpha", type=LEVEL, default=0.05, show_default=True, help="Test level."),
    click.option("--force-nb", is_flag=True, help="Run NB-asymptotic even when the gate fires."),
    _side_file("--summary", "summary_path", "JSON", "Write n for 80% power per method."),
    click.option(
        "--scheduler",
        default="sync",
        show_default=True,
        metavar="sync|local|ADDRESS",
        help="Run replications in a plain loop, on a Dask LocalCluster, or on a Dask scheduler (host:port).",
    ),
    click.option("--workers", type=int, default=2, show_default=True, help="Worker processes of --scheduler local."),
)

bench_options = option_group(
    click.option(
        "--data",
        "data_source",
        default=None,
        metavar="DATA",
        help="Data to time on (default builtin:tecator:fat when fetched, else a simulated 215 x 100 design).",
    ),
    data_columns("Response column of --data.", "X columns of --data by glob."),
    click.option("-k", "--components", "k", type=int, default=3, show_default=True, help="Components K."),
    resampling("NB splits J.", 1000, "CV-permutation B.", "CV folds F."),
    click.option("--rounds", type=int, default=7, show_default=True, help="Interleaved [CV-perm, NB] rounds."),
    click.option(
        "--ref-perms",
        type=int,
        default=20,
        show_default=True,
        help="Permutations the sklearn reference loop is timed on (scaled to B per fit).",
    ),
)

datasets_options = option_group(
    click.option("--fetch", is_flag=True, help="apt-get download r-cran-caret/r-cran-pls, convert to Parquet (cache)."),
    click.option("--export", "export", default=None, metavar="NAME", help="Write data set NAME to -o."),
)
