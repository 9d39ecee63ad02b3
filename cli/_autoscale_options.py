"""The options of `autoscale-mix run` and the verbs' small helpers (kept beside the command so that it stays thin)."""

from __future__ import annotations

import click

from methodkit.cli._common import OutputPath, Run, warn

METHODS = ("autoscale", "vanilla", "real-only", "all-synth", "domain-cls", "knn-real", "doremi", "regmix")


def planner_options(f):
    for option in reversed([
        click.option("--method", type=click.Choice(METHODS), default="autoscale", show_default=True,
                     help="AutoScale or a baseline on the same code path."),
        click.option("--budget", type=click.IntRange(min=1), default=3000, show_default=True,
                     help="Synthetic samples selected per round (N_syn)."),
        click.option("--rounds", type=click.IntRange(min=1), default=6, show_default=True, help="Loop rounds (R)."),
        click.option("--clusters", type=click.IntRange(min=2), default=32, show_default=True, help="k-means K."),
        click.option("--steps", type=click.IntRange(min=1), default=3000, show_default=True,
                     help="Planner optimizer steps per round (the fixed budget)."),
        click.option("--batch-size", type=click.IntRange(min=2), default=256, show_default=True, help="Batch size."),
        click.option("--rho", type=click.FloatRange(0, 1), default=0.5, show_default=True, help="Real share per batch."),
        click.option("--expert-l2", type=click.FloatRange(min=0), default=0.0, show_default=True, metavar="WEIGHT",
                     help="Weight of the L2 term on the expert trajectory (m^2), added to the cross-entropy; 0: off."),
        click.option("--eta", type=click.FloatRange(min=0), default=0.5, show_default=True, help="GA step size."),
        click.option("--ga-estimator", type=click.Choice(("hypergrad", "spsa")), default="hypergrad",
                     show_default=True, help="Cluster-GA gradient: look-ahead hypergradient or black-box SPSA."),
        click.option("--apply", "apply_", type=click.Choice(("resample", "reweight")), default="resample",
                     show_default=True, help="Use the weights by selecting quotas, or also as sample weights."),
        click.option("--eval", "eval_", type=click.Choice(("open-loop", "closed-loop")), default="open-loop",
                     show_default=True, help="Feedback: PDMS of val snapshots, or val routes driven closed loop."),
        click.option("--warm-start", is_flag=True,
                     help="Train each round from the previous round's planner instead of the same init."),
        click.option("--allow-overlap", is_flag=True, help="Accept val/test scenes inside the training pools."),
        click.option("--emb", "emb_path", default=None, metavar="PATH", help="Embeddings [default: POOLS/emb.npy]."),
        click.option("--resume", is_flag=True,
                     help="Continue after the last completed round in DIR/checkpoints (same options and seed)."),
    ]):  # fmt: skip
        f = option(f)
    return f


def synthetic_backend(f):
    return click.option("--synthetic-backend", type=click.Choice(("native", "highway-env")), default="native",
                        show_default=True, help="Simulator recording the synthetic traffic's futures "
                        "(highway-env: the real package, slow; needs methodkit[autoscale]).")(f)  # fmt: skip


def out_dir(help_text: str, required: bool = True):
    return click.option("-o", "--output", "out_dir", type=OutputPath(folder=True), required=required,
                        metavar="DIR", help=help_text)  # fmt: skip


NO_FAISS = (
    "faiss is not installed: exact NumPy search and k-means instead (same top-k, slower on large pools); "
    "pip install 'methodkit[autoscale]'"
)


def warn_if_no_faiss(run: Run) -> None:
    """The one warning line for the NumPy fallback of tools/autoscale/search.py (called once its inputs are read)."""
    from methodkit.tools.autoscale import search

    if not search.have_faiss():
        warn(run.tool.split()[0], NO_FAISS)


def write_files(run: Run, folder, files: dict) -> None:
    from methodkit.tools.autoscale.files import write_folder

    write_folder(folder, files, run.claim_outputs)


def log(run: Run, message: str) -> None:
    if run.verbose and not run.quiet:
        from methodkit.cli._common import err_console

        err_console().print(f"autoscale-mix: {message}", markup=False)
