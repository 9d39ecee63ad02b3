"""gbdt-poison's option groups (the data options every verb shares, the attack options of attack and sweep),
make demo's step, and the verbs' -j and warning helpers."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, option_group, warn

PROG = "gbdt-poison"
DEMO = [
    DemoStep(
        "gbdt-poison attack --dataset credit-g --budget 0.1 --eps 4 --iters 6 -o poisoned.csv",
        "credit-g",
        "drop.test_f1",
        "test F1 drop (Credit-g, 10% rows, eps 4)",
    ),
]


def apply_threads(params: dict) -> int:
    """Apply -j before anything imports numba: core.backend.set_threads sets NUMBA_NUM_THREADS, and a
    change after numba's import makes its next compilation raise (config reload)."""
    from methodkit.core.backend import set_threads

    return set_threads(params["threads"])


def warn_all(messages: list[str], quiet: bool) -> None:
    if not quiet:
        for message in messages:
            warn(PROG, message)


# where the data come from and the roles of its columns (every verb)
data_options = option_group(
    click.option(
        "--dataset",
        type=click.Choice(["adult", "credit-g", "synth"]),
        default=None,
        help="Built-in split instead of INPUT: adult (official train/test), credit-g (70/30 by --seed), "
        "synth (generated). A non-'-' INPUT then replaces the built-in train part.",
    ),
    click.option("--test", "test_path", metavar="FILE", default=None, help="Test table (never seen by the attack)."),
    click.option("--label", default=None, help="Label column [default: 'label', else the last column]."),
    click.option("--positive", default=None, help="Class whose F1 is reported [default: the minority class]."),
    click.option("--categorical", default=None, metavar="COLS", help="Categorical columns [default: non-numeric]."),
    click.option("--immutable", default=None, metavar="COLS", help="Columns never perturbed (comma-separated)."),
    click.option("--integer", default=None, metavar="COLS", help="Integer columns [default: all-integral ones]."),
    click.option(
        "--val-frac",
        type=float,
        default=None,
        help="Attacker's validation share of the train rows, stratified [default: 0.2; credit-g 0.3].",
    ),
    click.option(
        "--lgb-params",
        default=None,
        metavar="JSON",
        help="Victim LightGBM parameters over the defaults (100 trees, 31 leaves, lr 0.1, deterministic).",
    ),
    click.option(
        "-j",
        "--threads",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="LightGBM/Numba threads (results may differ by thread count; 1 avoids OpenMP spin-waits on "
        "a busy machine).",
    ),
)


def attack_options(f, with_eps: bool = True):
    options = [
        click.option("--budget", type=float, default=0.05, show_default=True, help="Poisoned share of train rows."),
        click.option("--dims", type=int, default=3, show_default=True, help="Columns moved per row (top-k by gain)."),
        click.option(
            "--dims-list",
            default=None,
            metavar="A,B",
            help="Move exactly these columns (a one-hot group by its PREFIX) instead.",
        ),
        click.option(
            "--one-hot",
            default=None,
            metavar="PREFIX,...",
            help="One-hot groups (PREFIX_LEVEL columns), moved only as one categorical (a level switch); "
            "default: detected from the data.",
        ),
        click.option(
            "--drop-validation",
            is_flag=True,
            help="Write the train part only, leaving out the attacker's validation rows [default: all rows].",
        ),
        click.option(
            "--influence",
            type=click.Choice(["boostin", "loss", "random"]),
            default="boostin",
            show_default=True,
            help="How rows are chosen.",
        ),
        click.option(
            "--dim-rank",
            type=click.Choice(["gain", "random", "local"]),
            default="gain",
            show_default=True,
            help="How columns are chosen.",
        ),
        click.option(
            "--cov",
            type=click.Choice(["class", "pooled"]),
            default="class",
            show_default=True,
            help="Ellipsoid shape: class-conditional or pooled covariance.",
        ),
        click.option(
            "--transform",
            type=click.Choice(["none", "log1p"]),
            default="none",
            show_default=True,
            help="log1p heavy-tailed non-negative columns before the ellipsoid.",
        ),
        click.option(
            "--search",
            type=click.Choice(["threshold", "zo"]),
            default="threshold",
            show_default=True,
            help="threshold: coordinate moves across the victim's split thresholds + line search; "
            "zo: ZO-PSGD with Gaussian probes (--q, --mu, --eta).",
        ),
        click.option("--iters", type=int, default=20, show_default=True, help="Search iterations."),
        click.option("--q", type=int, default=4, show_default=True, help="(zo) Random directions per iteration."),
        click.option("--mu", type=float, default=0.5, show_default=True, help="(zo) Probe radius, × eps."),
        click.option("--eta", type=float, default=0.5, show_default=True, help="(zo) Step size, × eps (decays 0.9)."),
        click.option(
            "--objective",
            type=click.Choice(["logloss", "f1"]),
            default="logloss",
            show_default=True,
            help="Maximise validation logloss, or minimise validation F1.",
        ),
        click.option(
            "--probe-projection",
            type=click.Choice(["on", "off"]),
            default="on",
            show_default=True,
            help="(zo) Project the finite-difference probes (off = ablation).",
        ),
        click.option(
            "--oracle",
            type=click.Choice(["retrain", "refit"]),
            default="retrain",
            show_default=True,
            help="Evaluate J by retraining, or by refitting leaf values of an anchor model.",
        ),
        click.option(
            "--refit-every",
            type=int,
            default=5,
            show_default=True,
            help="(zo) Re-anchor every N iterations (refit oracle).",
        ),
        click.option(
            "--fast-bins",
            is_flag=True,
            help="Attack-time retrains reuse the clean data's LightGBM bin boundaries (faster; the reported "
            "victim is still a true retrain).",
        ),
        click.option(
            "--workers",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Probe retrains run at once (threads, each on -j threads); same results for any value.",
        ),
    ]
    if with_eps:
        options.insert(1, click.option("--eps", type=float, default=1.0, show_default=True, help="Radius ε."))
    for option in reversed(options):
        f = option(f)
    return f


# what attack writes besides OUTPUT, and its gate
attack_outputs = option_group(
    click.option(
        "--manifest",
        type=OutputPath(),
        metavar="PATH",
        default=None,
        help="Manifest JSON [default: OUTPUT stem + .manifest.json].",
    ),
    click.option(
        "--fail-above-f1", type=float, default=None, help="Exit 3 if the poisoned test (else val) F1 is above."
    ),
)

# the grid, the seeds, the baselines and the scheduler of sweep
sweep_options = option_group(
    click.option(
        "--eps-grid", default="0.25,0.5,1,2,4,8", show_default=True, metavar="E1,E2,..", help="Radii to sweep."
    ),
    click.option("--seeds", default="0,1,2,3,4", show_default=True, metavar="S1,S2,..", help="Seeds (split + attack)."),
    click.option(
        "--baselines",
        default="random",
        show_default=True,
        metavar="NAMES",
        help="Also run: random (rows+dims), random-rows, loss; '' for none.",
    ),
    click.option(
        "--summary",
        type=OutputPath(),
        metavar="PATH",
        default=None,
        help="Write the mean-drop curve per method and eps (JSON).",
    ),
    click.option(
        "--scheduler",
        default="sync",
        show_default=True,
        metavar="ADDRESS",
        help="'sync' (plain loop), 'local' (in-process Dask cluster of --dask-workers threads) or a Dask "
        "scheduler address; the table is the same for every choice.",
    ),
    click.option(
        "--dask-workers",
        type=click.IntRange(min=1),
        default=2,
        show_default=True,
        help="Attacks at once under --scheduler local.",
    ),
)
