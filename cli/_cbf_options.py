"""cbf-fit's option groups: the data options every verb shares, and each verb's own options."""

from __future__ import annotations

import click

from methodkit.cli._common import FiniteFloatRange, OutputPath, option_group

data_options = option_group(
    click.option(
        "--import",
        "importer",
        type=click.Choice(["table", "stovol-mat"]),
        default="table",
        show_default=True,
        help="INPUT is the long table, or Piray & Daw's data.mat.",
    ),
    click.option(
        "--clip",
        default="10,90",
        show_default=True,
        metavar="LO,HI",
        help="Response range (responses outside it are an error).",
    ),
)


fit_options = option_group(
    click.option(
        "--model",
        type=click.Choice(["cbf", "kf", "pf-hpl", "pf-beta"]),
        default="cbf",
        show_default=True,
        help="The learner to fit.",
    ),
    click.option(
        "--objective",
        type=click.Choice(["responses", "outcomes", "joint"]),
        default="responses",
        show_default=True,
        help="log p(responses), the observer evidence log p(outcomes), or both.",
    ),
    click.option(
        "--restarts",
        type=click.IntRange(1, 5),
        default=5,
        show_default=True,
        help="Start points from the fixed design (cbf, kf).",
    ),
    click.option(
        "--screen",
        type=click.IntRange(0, 20),
        default=5,
        show_default=True,
        help="Extra start points (cbf, kf): the best of a fixed grid, by one forward pass each.",
    ),
    click.option(
        "--gradient",
        type=click.Choice(["adjoint", "torch"]),
        default="adjoint",
        show_default=True,
        help="cbf/kf gradient: numba reverse mode, or torch autograd (the slower reference).",
    ),
    click.option(
        "--max-iter", type=click.IntRange(min=1), default=200, show_default=True, help="L-BFGS iterations per row."
    ),
    click.option("--censor", is_flag=True, help="Interval-censor responses at the --clip bounds."),
    click.option(
        "--lapse",
        type=FiniteFloatRange(0, 1, max_open=True),
        default=0.0,
        show_default=True,
        help="Lapse rate (uniform responses).",
    ),
    click.option(
        "--runs",
        type=click.IntRange(min=1),
        default=4,
        show_default=True,
        help="Particle-filter runs averaged per SSE evaluation (paper: 10).",
    ),
    click.option(
        "--evaluations",
        type=click.IntRange(min=5),
        default=60,
        show_default=True,
        help="Derivative-free evaluations per subject (paper: 200).",
    ),
    click.option(
        "--optimizer",
        type=click.Choice(["nelder-mead", "bo"]),
        default="nelder-mead",
        show_default=True,
        help="Derivative-free optimizer of the particle filters: Nelder-Mead, or Bayesian optimisation "
        "(GP + expected improvement, 5 seed points: the paper's protocol; needs bayesian-optimization).",
    ),
    click.option("--timing", is_flag=True, help="Add a 'seconds' column (wall time per subject; not reproducible)."),
)

signals_options = option_group(
    click.option(
        "--params", "params_path", default=None, metavar="CSV", help="Params table written by 'cbf-fit fit' (required)."
    ),
    click.option(
        "--runs",
        type=click.IntRange(min=1),
        default=4,
        show_default=True,
        help="Particle-filter runs averaged (pf models).",
    ),
)

analyze_options = option_group(
    click.option(
        "--params",
        "params_path",
        default=None,
        metavar="CSV",
        help="Params table written by 'cbf-fit fit' (required; gives the phenotype index).",
    ),
    click.option(
        "--signals",
        "signals_path",
        default=None,
        metavar="PATH",
        help="Signals table with 'ambiguity' [default: computed from --params].",
    ),
    click.option(
        "--compare",
        "compare_path",
        default=None,
        metavar="CSV",
        help="A second params table (e.g. pf-hpl) split the same way.",
    ),
    click.option(
        "--out",
        "out_path",
        type=OutputPath(),
        default=None,
        metavar="PATH",
        help="Also write the per-subject table (GLM and RT coefficients) here.",
    ),
)


# the learner every model shares (grid, Kalman start, fixed-share, carry-over): cbf-sim agents and cbf-fit
learner_options = option_group(
    click.option(
        "--k",
        "k",
        type=click.IntRange(1, 101),
        default=15,
        show_default=True,
        help="CBF grid nodes per dimension.",
    ),
    click.option(
        "--v-range",
        default="0.5,200",
        show_default=True,
        metavar="L,U",
        help="Volatility variance range of the grid.",
    ),
    click.option(
        "--s-range",
        default="0.5,400",
        show_default=True,
        metavar="L,U",
        help="Stochasticity variance range of the grid.",
    ),
    click.option(
        "--m0",
        type=FiniteFloatRange(),
        default=60.0,
        show_default=True,
        help="Initial Kalman mean (task midpoint).",
    ),
    click.option(
        "--w0", type=FiniteFloatRange(min=0), default=10.0, show_default=True, help="Initial Kalman variance."
    ),
    click.option(
        "--switch",
        type=FiniteFloatRange(0, 1, max_open=True),
        default=0.0,
        show_default=True,
        help="Fixed-share rate: pi <- (1-e) pi + e pi0 each trial (an extension; off by default).",
    ),
    click.option("--carry-over", is_flag=True, help="Keep the grid weights across blocks (Kalman states still reset)."),
    click.option(
        "--particles",
        type=click.IntRange(min=10),
        default=1000,
        show_default=True,
        help="Particles of pf-beta / pf-hpl.",
    ),
)
