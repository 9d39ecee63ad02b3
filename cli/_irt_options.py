"""irt-fit's option groups: the estimator settings of `fit`, and the options of `eval` and `bench`."""

from __future__ import annotations

import click

from methodkit.cli._common import FiniteFloatRange, OutputPath, option_group


def _limit(flag: str, metavar: str, help: str):
    """A positive budget option (default: none)."""
    return click.option(flag, type=FiniteFloatRange(min=0, min_open=True), default=None, metavar=metavar, help=help)


fit_options = option_group(
    click.option(
        "--model", type=click.Choice(["1pl", "2pl", "3pl"]), default="2pl", show_default=True, help="IRT model."
    ),
    click.option(
        "--method", type=click.Choice(["mml", "mcmc", "vi", "psn"]), default="mml", show_default=True, help="Estimator."
    ),
    click.option(
        "--out-dir",
        type=OutputPath(folder=True),  # checked before the input is read: a non-empty folder needs --force
        metavar="DIR",
        default=None,
        help="Write items.csv, abilities.csv and fit.json here (a non-empty folder needs --force).",
    ),
    click.option(
        "--latent",
        type=click.Choice(["normal", "ehw"]),
        default="normal",
        show_default=True,
        help="MML latent density (ehw: empirical histogram).",
    ),
    click.option(
        "--prior",
        type=click.Choice(["none", "weak"]),
        default="none",
        show_default=True,
        help="MML priors on log a and b (weak: N(0,.5^2), N(0,2^2)).",
    ),
    click.option(
        "--c-prior", default="5,17", show_default=True, metavar="A,B", help="Beta prior on the 3PL c (MML, MCMC, VI)."
    ),
    click.option(
        "--a-max",
        type=FiniteFloatRange(min=0, min_open=True, max=54.6),
        default=5.0,
        show_default=True,
        help="MML upper bound on a (python mirt's); fit.json counts the items that end on it.",
    ),
    click.option(
        "--quadrature", type=click.IntRange(min=5), default=61, show_default=True, help="MML nodes on [-6, 6]."
    ),
    click.option(
        "--tol",
        type=FiniteFloatRange(),
        default=1e-4,
        show_default=True,
        help="MML: stop when max |change| is below this.",
    ),
    click.option("--max-cycles", type=click.IntRange(min=1), default=500, show_default=True, help="MML EM cycles."),
    click.option(
        "--se", type=click.Choice(["none", "louis"]), default="none", show_default=True, help="MML standard errors."
    ),
    click.option("--float32", is_flag=True, help="MML E-step GEMMs in float32."),
    click.option(
        "--accelerate",
        type=click.Choice(["none", "squarem"]),
        default="none",
        show_default=True,
        help="MML: SQUAREM extrapolation of the EM steps (same optimum, fewer EM steps).",
    ),
    click.option(
        "--scoring",
        type=click.Choice(["eap", "map"]),
        default="eap",
        show_default=True,
        help="MML abilities: posterior mean (EAP) or mode (MAP) under N(0, 1).",
    ),
    click.option(
        "--sampler",
        type=click.Choice(["mh", "pg"]),
        default="mh",
        show_default=True,
        help="MCMC: Metropolis within Gibbs, or Polya-Gamma Gibbs (1PL/2PL).",
    ),
    click.option("--chains", type=click.IntRange(min=1), default=2, show_default=True, help="MCMC chains."),
    click.option(
        "--warmup",
        type=click.IntRange(min=0),
        default=1000,
        show_default=True,
        help="MCMC warm-up iterations per chain.",
    ),
    click.option(
        "--draws", type=click.IntRange(min=4), default=1000, show_default=True, help="MCMC kept draws per chain."
    ),
    click.option(
        "--vi-prior",
        type=click.Choice(["hierarchical", "vague"]),
        default="hierarchical",
        show_default=True,
        help="VI priors (hierarchical: py-irt's; vague: N(0,1) theta, N(0,1e3^2) b, log a).",
    ),
    click.option(
        "--steps", type=click.IntRange(min=1), default=2000, show_default=True, help="VI optimisation steps (epochs)."
    ),
    click.option("--epochs", type=click.IntRange(min=1), default=50, show_default=True, help="PSN maximum epochs."),
    click.option(
        "--patience", type=click.IntRange(min=1), default=4, show_default=True, help="PSN early-stopping patience."
    ),
    click.option("--positive-a", is_flag=True, help="PSN: constrain a > 0 (softplus); off in the reference."),
    _limit("--time-limit", "SEC", "Stop after SEC seconds (status timeout, partial results kept, exit 1)."),
    _limit("--cpu-limit", "SEC", "Stop after SEC CPU seconds of this process, all threads (as --time-limit)."),
    _limit("--mem-limit", "MB", "Refuse to start when the memory estimate exceeds MB."),
    click.option(
        "--binarize",
        type=FiniteFloatRange(),
        default=None,
        metavar="THRESH",
        help="Score >= THRESH counts as correct (for non-binary scores).",
    ),
    click.option("--no-header", is_flag=True, help="Wide CSV without header row (rows = models)."),
    click.option(
        "--fail-if-unconverged", is_flag=True, help="Exit 3 when the fit did not converge (outputs are still written)."
    ),
    click.option("--drop-extreme", is_flag=True, help="Remove all-correct/all-wrong models and items before fitting."),
)

eval_options = option_group(
    click.option("--truth", required=True, metavar="NPZ", help="irt-sim draw output (carries theta, a, b, c)."),
    click.option("--fit", "fit_dir", required=True, metavar="DIR", help="irt-fit fit --out-dir folder."),
    click.option(
        "--model", type=click.Choice(["1pl", "2pl", "3pl"]), default=None, help="Model [default: from fit.json]."
    ),
    click.option(
        "--linking",
        type=click.Choice(["mean-sigma", "stocking-lord"]),
        default="mean-sigma",
        show_default=True,
        help="Scale alignment: mean-sigma on theta, or Stocking-Lord on the test characteristic curves.",
    ),
)

bench_options = option_group(
    click.option("-N", "--n-models", type=click.IntRange(min=5), default=500, show_default=True, help="Models."),
    click.option("-J", "--n-items", type=click.IntRange(min=3), default=1000, show_default=True, help="Items."),
    click.option(
        "--girth-items",
        type=click.IntRange(min=0),
        default=None,
        help="Items for the girth comparison (0 = skip) [default: all].",
    ),
    click.option(
        "--only",
        type=click.Choice(["mml", "mcmc", "vi", "psn"]),
        multiple=True,
        help="Benchmark only these (repeatable).",
    ),
)


CAPABILITY_HELP = "normal, skewed, clustered, multimodal or empirical:FILE.csv (a 'theta' column)."

# irt-sim draw's generating settings
draw_options = option_group(
    click.option(
        "--model", type=click.Choice(["1pl", "2pl", "3pl"]), default="2pl", show_default=True, help="Generating model."
    ),
    click.option("--profile", default="mmlu", show_default=True, help="Item profile (see 'irt-sim profiles')."),
    click.option("--capability", default="normal", show_default=True, help=CAPABILITY_HELP),
    click.option(
        "-N", "--n-models", type=click.IntRange(min=1), default=100, show_default=True, help="Number of models."
    ),
    click.option(
        "-J", "--n-items", type=click.IntRange(min=1), default=None, help="Number of items [default: the profile's]."
    ),
    click.option(
        "--missing",
        type=FiniteFloatRange(0, 1, max_open=True),
        default=0.0,
        show_default=True,
        help="MCAR missing fraction.",
    ),
    click.option(
        "--skew", type=FiniteFloatRange(), default=-4.0, show_default=True, help="Skew-normal alpha of 'skewed'."
    ),
    click.option(
        "--groups", type=click.IntRange(min=1), default=6, show_default=True, help="Model families of 'clustered'."
    ),
    click.option("--modes", type=click.IntRange(min=1), default=2, show_default=True, help="Modes of 'multimodal'."),
    click.option(
        "--items",
        "items_file",
        metavar="FILE",
        default=None,
        help="Bootstrap a, b, c from this CSV (irt-fit items.csv).",
    ),
    click.option(
        "--profiles", "profiles_file", metavar="FILE", default=None, help="Profiles TOML replacing the built-in one."
    ),
)
