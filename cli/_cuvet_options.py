"""cuvet-assign's option groups, one per verb (sqlite-utils' decorator pattern), and make demo's steps;
cli/cuvet_assign.py stays a thin command."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, common_options, option_group

DEMO = [
    DemoStep(
        "cuvet-assign gen thornton -o t.parquet -q && cuvet-assign fit t.parquet --treatment arm --value got "
        "--cost tinc --budget-frac 0.5 --bayes -o m.json && cuvet-assign assign m.json t.parquet -o a.parquet && "
        "cuvet-assign evaluate t.parquet a.parquet --treatment arm --value got --cost tinc",
        "thornton_hiv",
        "uplift_pct",
        "CUVET-B IPW uplift vs uniform dose (%, in-sample)",
    ),
    DemoStep(
        "cuvet-assign gen synthetic --n 40000 -o s.parquet && cuvet-assign bench s.parquet --truth s.parquet.json "
        "--treatment treatment --value conversion --arm-costs 0,1,2,3,4 --cost-on-outcome "
        "--methods uniform,oracle,cuvet-b --budgets 0.4 --seeds 1 --folds 2 -q --format jsonl | tail -1",
        "synthetic 40k",
        "oracle_frac",
        "CUVET-B share of the oracle's incremental value",
    ),
]

_COST_OPTIONS = [
    click.option("--treatment", "treatment", metavar="COL", default=None, help="Arm column (0 = control, 1..K)."),
    click.option("--value", "value", metavar="COL", default=None, help="Value (outcome) column."),
    click.option("--cost", "cost", metavar="COL", default=None, help="Realized cost column."),
    click.option(
        "--arm-costs", metavar="K0,K1,...", default=None, help="Deterministic cost per arm (instead of --cost)."
    ),
    click.option(
        "--cost-on-outcome", is_flag=True, help="With --arm-costs: cost = arm cost x value (paid on conversion)."
    ),
    click.option(
        "--id", "id_col", metavar="COL", default=None, help="User id column [default: 'id' if present, else the row]."
    ),
]
_FEATURE_OPTIONS = [
    click.option("--features", metavar="A,B,...", default=None, help="Feature columns [default: all other columns]."),
    click.option("--exclude", metavar="COL", multiple=True, help="Leave this column out of the features (repeatable)."),
    click.option(
        "--categorical",
        metavar="COL",
        multiple=True,
        help="Split this numeric feature as categories, e.g. an integer id (repeatable).",
    ),
    click.option(
        "--numeric",
        metavar="COL",
        multiple=True,
        help="Keep this integer feature a number though its name reads as an id (repeatable).",
    ),
]
_STRATA_OPTIONS = [
    click.option(
        "--strata",
        metavar="COL",
        default=None,
        help="Randomization strata: propensities are arm frequencies within them.",
    ),
]



COSTS = ("treatment", "value", "cost", "arm_costs", "cost_on_outcome")


gen_options = option_group(
    click.option("--n", "n", type=click.IntRange(min=10), default=20000, show_default=True, help="Synthetic rows."),
    click.option(
        "--regime", type=click.Choice(["normal", "sub-percent"]), default="normal", show_default=True, help="Effect sizes."
    ),
    click.option("--truth-seed", type=int, default=0, show_default=True, help="Seed of the true cohorts (synthetic)."),
    click.option("--unit-cost", type=float, default=1.0, show_default=True, help="Cost of one session (social-insure)."),
    click.option("--with-hiv", is_flag=True, help="Thornton: keep hiv2004 (the test result; not a targeting feature)."),
    click.option(
        "--sidecar",
        type=OutputPath(),
        metavar="PATH",
        default=None,
        help="JSON sidecar [default: OUTPUT.json when -o is a file].",
    ),
    common_options("output", "format", "seed", "force", "meta", "quiet", "verbose"),
)


fit_options = option_group(
    option_group(*_COST_OPTIONS),
    click.option("--budget", type=float, default=None, help="Total budget for the rows of INPUT."),
    click.option(
        "--budget-frac", type=float, default=None, help="Budget as a fraction of giving everyone the costliest arm."
    ),
    click.option("--bayes", is_flag=True, help="CUVET-B: hierarchical Bayesian leaves and a cost-feasibility margin."),
    option_group(*_FEATURE_OPTIONS),
    click.option("--max-depth", type=click.IntRange(0, 12), default=4, show_default=True, help="Tree depth."),
    click.option(
        "--min-leaf",
        type=click.IntRange(min=2),
        default=2000,
        show_default=True,
        help="Rows per leaf (scaled down for small data).",
    ),
    click.option(
        "--min-arm", type=click.IntRange(min=1), default=50, show_default=True, help="Rows per arm per child (scaled down)."
    ),
    click.option("--no-honest", is_flag=True, help="Grow and estimate on the same rows (no honesty, no pruning)."),
    click.option(
        "--lookahead",
        is_flag=True,
        help="Score each split by the best two-level gain it allows (finds interaction-only cohorts; slower).",
    ),
    common_options("output", "in_format", "seed", "threads", "force", "meta", "quiet", "verbose"),
)


assign_options = option_group(
    click.option(
        "--budget", type=float, default=None, help="Total budget for INPUT's rows [default: the model's per-user budget]."
    ),
    click.option("--id", "id_col", metavar="COL", default=None, help="User id column [default: the row number]."),
    click.option(
        "--summary",
        type=OutputPath(),
        metavar="PATH",
        default=None,
        help="Write the budget summary JSON here [default: stdout when -o is a file].",
    ),
    common_options("output", "format", "in_format", "seed", "force", "meta", "quiet", "verbose"),
)


evaluate_options = option_group(
    option_group(*_COST_OPTIONS),
    click.option("--propensity", metavar="COL", default=None, help="Column of P(observed arm) [default: arm frequencies]."),
    option_group(*_STRATA_OPTIONS),
    click.option(
        "--budget", type=float, default=None, help="Total budget for INPUT's rows [default: the planned exp_cost]."
    ),
    click.option("--deterministic", is_flag=True, help="Score the assigned arm, not the arm mix pi_*."),
    click.option(
        "--strict", is_flag=True, help="Feasible only if the 95% upper CI of the cost is within budget; exit 3 if not."
    ),
    click.option("--fail-below", type=float, default=None, help="Exit 3 when the uplift (%) is below this."),
    click.option("--n-boot", type=click.IntRange(min=10), default=200, show_default=True, help="Bootstrap resamples."),
    click.option(
        "--dr", is_flag=True, help="Also the doubly robust estimate (cross-fitted LightGBM outcome models), key 'dr'."
    ),
    click.option(
        "--dr-folds", type=click.IntRange(min=2), default=5, show_default=True, help="Cross-fitting folds of --dr."
    ),
    common_options("output", "format", "in_format", "seed", "threads", "force", "meta", "quiet", "verbose"),
)


bench_options = option_group(
    option_group(*_COST_OPTIONS),
    click.option(
        "--methods",
        default="cuvet,cuvet-b,cuvet-lp,cuvet-b-lp,uniform,roi-greedy,lp-tlearner",
        show_default=True,
        help="Comma-separated methods (add 'oracle' with --truth).",
    ),
    click.option("--budgets", default="0.2,0.4,0.6", show_default=True, help="Budget fractions of the max-arm cost."),
    click.option("--seeds", type=click.IntRange(min=1), default=3, show_default=True, help="Seeds (SEED, SEED+1, ...)."),
    click.option(
        "--folds", type=click.IntRange(min=2), default=5, show_default=True, help="Cross-fitting folds (without --test)."
    ),
    click.option("--test", "test_path", metavar="PATH", default=None, help="Held-out test table instead of folds."),
    click.option("--truth", metavar="PATH", default=None, help="Synthetic sidecar JSON: true effects, enables 'oracle'."),
    option_group(*_STRATA_OPTIONS),
    option_group(*_FEATURE_OPTIONS),
    click.option(
        "--dr", is_flag=True, help="Add doubly robust value_dr, cost_dr, feasible_dr (cross-fitted on each test part)."
    ),
    common_options("output", "format", "in_format", "seed", "threads", "device", "force", "meta", "quiet", "verbose"),
)


tree_options = option_group(
    common_options("output", "force", "quiet", "verbose"),
)
