"""cuvet-assign: budgeted treatment assignment with the CUVET cost-per-unit-value equalization tree."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, input_argument, tool_group, warn

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


def _options(group):
    """Apply a group of click options shared by several verbs (sqlite-utils' decorator pattern)."""

    def decorate(f):
        for option in reversed(group):
            f = option(f)
        return f

    return decorate


_COSTS = ("treatment", "value", "cost", "arm_costs", "cost_on_outcome")


def _spec(opts):
    """The cost flags checked (tools/cuvet/commands.cost_spec) before any data is read."""
    from methodkit.tools.cuvet.commands import cost_spec

    return cost_spec(*(opts[k] for k in _COSTS))


def _parse(run: Run, raw):
    """The table from INPUT's bytes (read once the flags are checked)."""
    from methodkit.core import io

    return io.read_table(raw, run.params.get("in_format"))


def _load(run: Run, frame, spec, opts, strata=None, columns=True, levels=None):
    """INPUT's RCT under the column flags; its warnings on stderr (`levels`: code categories as a training table)."""
    from methodkit.tools.cuvet.commands import rct

    feats = (opts.get("features"), opts.get("exclude", ())) if columns else (None, ())
    kinds = (opts.get("categorical", ()), opts.get("numeric", ())) if columns else ((), ())
    data = rct(frame, opts["treatment"], opts["value"], spec, opts["id_col"], *feats, strata, *kinds, levels)
    for message in data.warnings:
        warn(run.tool.split()[0], message)
    return data


@tool_group(name="cuvet-assign")
def main():
    """Assign treatments under a budget with CUVET, the cost-per-unit-value equalization tree.

    From randomized (RCT) data with arms 0 (control) .. K, a value and a cost, `fit`
    grows a tree whose leaves are cohorts, fits a diminishing-returns power law
    dV = alpha * s^beta per cohort, and spends the budget so that the marginal cost
    per unit value is equal across cohorts (closed form, lambda by bisection).
    `--bayes` (CUVET-B) shrinks the cohort fits with an empirical-Bayes hierarchical
    prior and, when cost is realized, keeps a margin so that P(cost <= budget) >= 0.9.
    `assign` writes each user's arm, `evaluate` scores a policy by IPW (and with --dr
    doubly robust, cross-fitted) on RCT data, `bench` compares CUVET with uniform,
    ROI-greedy, LP on a LightGBM T-learner, econml's X-learner and causalml's uplift
    forest, and (on synthetic data) the oracle; the LP is solved exactly from each user's
    cost-value hull (Numba, or CuPy with --device cuda). Data sets: `gen` writes the Thornton (2008) HIV-incentive
    and Cai (2015) insurance trials from causaldata, or an MT-LIFT-like synthetic RCT.

    \b
    EXAMPLES
      cuvet-assign gen thornton -o thornton.parquet
      cuvet-assign fit thornton.parquet --treatment arm --value got --cost tinc \\
          --budget-frac 0.5 --bayes -o model.json
      cuvet-assign tree model.json
      cuvet-assign assign model.json thornton.parquet -o assign.parquet
      cuvet-assign evaluate thornton.parquet assign.parquet --treatment arm --value got --cost tinc
      cuvet-assign gen synthetic --n 200000 -o syn.parquet
      cuvet-assign bench syn.parquet --truth syn.parquet.json --treatment treatment \\
          --value conversion --arm-costs 0,1,2,3,4 --cost-on-outcome -o bench.csv

    \b
    EXIT STATUS
      0  success (a budget above the maximum spend is clamped with a warning)
      1  failure while running
      2  bad usage or bad input (missing arm, bad labels, negative costs, duplicate ids, budget <= 0)
      3  evaluate: the policy is not cost-feasible (--strict) or the uplift is below --fail-below
      130  interrupted
    """


# ---------------------------------------------------------------- gen


@main.command("gen")
@click.argument("source", type=click.Choice(["synthetic", "thornton", "social-insure"]))
@click.option("--n", "n", type=click.IntRange(min=10), default=20000, show_default=True, help="Synthetic rows.")
@click.option(
    "--regime", type=click.Choice(["normal", "sub-percent"]), default="normal", show_default=True, help="Effect sizes."
)
@click.option("--truth-seed", type=int, default=0, show_default=True, help="Seed of the true cohorts (synthetic).")
@click.option("--unit-cost", type=float, default=1.0, show_default=True, help="Cost of one session (social-insure).")
@click.option("--with-hiv", is_flag=True, help="Thornton: keep hiv2004 (the test result; not a targeting feature).")
@click.option(
    "--sidecar",
    type=OutputPath(),
    metavar="PATH",
    default=None,
    help="JSON sidecar [default: OUTPUT.json when -o is a file].",
)
@common_options("output", "format", "seed", "force", "meta", "quiet", "verbose")
def gen(source, n, regime, truth_seed, unit_cost, with_hiv, sidecar, **_):
    """Write an RCT table (Parquet by -o extension) and a JSON sidecar (arm costs, true effects).

    \b
    EXAMPLES
      cuvet-assign gen thornton -o thornton.parquet
      cuvet-assign gen synthetic --n 500000 --seed 1 -o train.parquet
      cuvet-assign gen social-insure | head -3
    """
    from methodkit.core import io
    from methodkit.tools.cuvet import synth

    run = Run.from_context()
    run.claim_outputs(sidecar or (f"{run.output}.json" if run.output != "-" else None))
    if source == "synthetic":
        from methodkit.core.memory import guard_memory

        guard_memory(n * synth.SYNTH_BYTES_PER_ROW, f"a synthetic table of {n:,} rows", "--n")
        frame, side = synth.synthetic(n, run.seed, synth.synthetic_truth(truth_seed, regime))
        side = {**side, "treatment": "treatment", "value": "conversion", "cost_on_outcome": True, "seed": run.seed}
    elif source == "thornton":
        frame, side = synth.thornton(with_hiv)
    else:
        frame, side = synth.social_insure(unit_cost)
    path = sidecar or (f"{run.output}.json" if run.output != "-" else None)
    if path is not None:
        io.write_json(side, path, force=run.force, indent=1)
    run.emit_table(frame)


# ---------------------------------------------------------------- fit


@main.command("fit")
@input_argument()
@_options(_COST_OPTIONS)
@click.option("--budget", type=float, default=None, help="Total budget for the rows of INPUT.")
@click.option(
    "--budget-frac", type=float, default=None, help="Budget as a fraction of giving everyone the costliest arm."
)
@click.option("--bayes", is_flag=True, help="CUVET-B: hierarchical Bayesian leaves and a cost-feasibility margin.")
@_options(_FEATURE_OPTIONS)
@click.option("--max-depth", type=click.IntRange(0, 12), default=4, show_default=True, help="Tree depth.")
@click.option(
    "--min-leaf",
    type=click.IntRange(min=2),
    default=2000,
    show_default=True,
    help="Rows per leaf (scaled down for small data).",
)
@click.option(
    "--min-arm", type=click.IntRange(min=1), default=50, show_default=True, help="Rows per arm per child (scaled down)."
)
@click.option("--no-honest", is_flag=True, help="Grow and estimate on the same rows (no honesty, no pruning).")
@click.option(
    "--lookahead",
    is_flag=True,
    help="Score each split by the best two-level gain it allows (finds interaction-only cohorts; slower).",
)
@common_options("output", "in_format", "seed", "threads", "force", "meta", "quiet", "verbose")
def fit_cmd(input, **opts):
    """Grow the tree, fit per-leaf power laws and solve lambda; write the model as JSON.

    With -o FILE the model goes there and a one-line summary to stdout; with -o - the model is stdout.

    The tree is grown on half of the rows and pruned on the other half (honest pruning, ours);
    --lookahead (ours) scores a split by its gain plus the best further split of each child;
    --bayes (CUVET-B) gives the leaves a hierarchical prior. docs/cuvet.md ("Options in detail")
    says how each works and what each is worth, measured.

    \b
    EXAMPLES
      cuvet-assign fit thornton.parquet --treatment arm --value got --cost tinc --budget-frac 0.5 -o m.json
      cuvet-assign fit syn.parquet --treatment treatment --value conversion \\
          --arm-costs 0,1,2,3,4 --cost-on-outcome --budget-frac 0.4 --bayes -o m.json
    """
    from methodkit.core import io
    from methodkit.core.threads import hold_blas_to_one_thread, prefer_workqueue
    from methodkit.tools.cuvet.commands import check_budget, fit_summary

    run = Run.from_context()
    io.require_input(input)  # a missing file is named first, the flags checked before it is read
    if opts["threads"]:  # without -j the count is chosen from the data, before Numba loads
        run.threads()
    hold_blas_to_one_thread()  # before NumPy loads, as -j does it: the BLAS never starts a pool
    prefer_workqueue()  # kernels from this thread only; OpenMP's idle workers spun between them (core.threads)
    check_budget(opts["budget"], opts["budget_frac"])
    spec = _spec(opts)
    run.refuse_existing_output()
    data = _load(run, _parse(run, run.input_bytes(input)), spec, opts)
    if not opts["threads"]:  # no -j: all cores only where the fit has the work for them
        from methodkit.core.backend import set_threads
        from methodkit.tools.cuvet.parallel import default_threads

        set_threads(default_threads(data.n, honest=not opts["no_honest"]))
    from methodkit.tools.cuvet.model import fit  # Numba: only once the input is known to be good
    from methodkit.tools.cuvet.tree import TreeParams

    with run.progress() as cb:
        model = fit(
            data,
            budget=opts["budget"],
            budget_frac=opts["budget_frac"],
            use_bayes=opts["bayes"],
            seed=run.seed,
            params=TreeParams(opts["max_depth"], opts["min_leaf"], opts["min_arm"], lookahead=opts["lookahead"]),
            honest=not opts["no_honest"],
            progress=cb,
        )
    for message in model.warnings[len(data.warnings) :]:
        warn(run.tool.split()[0], message)
    body = model.to_dict()
    body["data"] = {k: opts[c] for k, c in (("treatment", "treatment"), ("value", "value"), ("id", "id_col"))}
    body["data"]["dropped"] = data.dropped
    if run.output == "-":
        run.emit_result(body)
        return
    io.write_json(body, run.output, force=run.force, indent=1)
    run.emit_result(fit_summary(model, data, run.output), output="-")


# ---------------------------------------------------------------- assign


def _read_model(run: Run, path: str):
    doc = run.read_json(path)  # a file that is not JSON fails before the model code loads
    from methodkit.tools.cuvet.model import CuvetModel

    return CuvetModel.from_dict(doc, path)


@main.command("assign")
@click.argument("model_path", metavar="MODEL")
@input_argument()
@click.option(
    "--budget", type=float, default=None, help="Total budget for INPUT's rows [default: the model's per-user budget]."
)
@click.option("--id", "id_col", metavar="COL", default=None, help="User id column [default: the row number].")
@click.option(
    "--summary",
    type=OutputPath(),
    metavar="PATH",
    default=None,
    help="Write the budget summary JSON here [default: stdout when -o is a file].",
)
@common_options("output", "format", "in_format", "seed", "force", "meta", "quiet", "verbose")
def assign_cmd(model_path, input, budget, id_col, summary, **_):
    """Assign each user of INPUT an arm: id, leaf, arm, p_arm, exp_cost, exp_value and pi_0..pi_K.

    Within a leaf the arm mix is split deterministically: users are ordered by a seeded hash of
    their id and the first floor(pi_b * n_leaf) get the costlier frontier arm b.

    \b
    EXAMPLES
      cuvet-assign assign m.json thornton.parquet -o assign.parquet
      cuvet-assign assign m.json users.csv --id user_id --budget 10000 -o assign.parquet
    """
    from methodkit.core import io
    from methodkit.core.errors import DataError

    run = Run.from_context()
    if budget is not None and budget <= 0:
        raise DataError(f"--budget must be positive, got {budget}")
    run.refuse_existing_output()
    model = _read_model(run, model_path)
    frame = run.read_table(input)
    from methodkit.tools.cuvet.assign import assign

    table, info = assign(model, frame, budget=budget, id_col=id_col, seed=run.seed)
    run.emit_table(table)
    if summary is not None:
        io.write_json(info, summary, force=run.force)
    elif run.output != "-":
        run.emit_result(info, output="-")


# ---------------------------------------------------------------- evaluate


@main.command("evaluate")
@input_argument()
@click.argument("assignment", required=False, default=None)
@_options(_COST_OPTIONS)
@click.option("--propensity", metavar="COL", default=None, help="Column of P(observed arm) [default: arm frequencies].")
@_options(_STRATA_OPTIONS)
@click.option(
    "--budget", type=float, default=None, help="Total budget for INPUT's rows [default: the planned exp_cost]."
)
@click.option("--deterministic", is_flag=True, help="Score the assigned arm, not the arm mix pi_*.")
@click.option(
    "--strict", is_flag=True, help="Feasible only if the 95% upper CI of the cost is within budget; exit 3 if not."
)
@click.option("--fail-below", type=float, default=None, help="Exit 3 when the uplift (%) is below this.")
@click.option("--n-boot", type=click.IntRange(min=10), default=200, show_default=True, help="Bootstrap resamples.")
@click.option(
    "--dr", is_flag=True, help="Also the doubly robust estimate (cross-fitted LightGBM outcome models), key 'dr'."
)
@click.option(
    "--dr-folds", type=click.IntRange(min=2), default=5, show_default=True, help="Cross-fitting folds of --dr."
)
@common_options("output", "format", "in_format", "seed", "threads", "force", "meta", "quiet", "verbose")
def evaluate_cmd(input, assignment, **opts):
    """IPW value, incremental cost and uplift over the budget-matched uniform policy, with bootstrap CIs.

    With --dr, also the doubly robust (AIPW) value and cost: per-arm LightGBM outcome
    models cross-fitted over --dr-folds folds, the IPW correction on their residuals, CIs
    by bootstrap of the per-row terms. Feasibility and --fail-below still use IPW.

    \b
    EXAMPLES
      cuvet-assign evaluate thornton.parquet assign.parquet --treatment arm --value got --cost tinc
      cuvet-assign evaluate test.parquet a.parquet --treatment treatment --value conversion \\
          --arm-costs 0,1,2,3,4 --cost-on-outcome --id id --strict --fail-below 0
      cuvet-assign evaluate thornton.parquet assign.parquet --treatment arm --value got --cost tinc --dr
    """
    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.cuvet.commands import check_evaluation, evaluate_assignment

    run = Run.from_context()
    io.require_input(input)
    if assignment is None:
        raise UsageError("missing ASSIGNMENT (the output of 'cuvet-assign assign')")
    spec = _spec(opts)
    frame = _parse(run, run.input_bytes(input))
    table = io.read_table(run.input_bytes(assignment))
    data = _load(run, frame, spec, opts, strata=opts["strata"], columns=False)
    keys = ("propensity", "budget", "deterministic", "strict", "n_boot", "dr", "dr_folds")
    result, per_user = evaluate_assignment(
        frame, table, data, assignment, seed=run.seed, threads=run.threads, **{k: opts[k] for k in keys}
    )
    run.emit_result(result)
    check_evaluation(result, per_user, opts["strict"], opts["fail_below"])


# ---------------------------------------------------------------- bench


@main.command("bench")
@input_argument()
@_options(_COST_OPTIONS)
@click.option(
    "--methods",
    default="cuvet,cuvet-b,cuvet-lp,cuvet-b-lp,uniform,roi-greedy,lp-tlearner",
    show_default=True,
    help="Comma-separated methods (add 'oracle' with --truth).",
)
@click.option("--budgets", default="0.2,0.4,0.6", show_default=True, help="Budget fractions of the max-arm cost.")
@click.option("--seeds", type=click.IntRange(min=1), default=3, show_default=True, help="Seeds (SEED, SEED+1, ...).")
@click.option(
    "--folds", type=click.IntRange(min=2), default=5, show_default=True, help="Cross-fitting folds (without --test)."
)
@click.option("--test", "test_path", metavar="PATH", default=None, help="Held-out test table instead of folds.")
@click.option("--truth", metavar="PATH", default=None, help="Synthetic sidecar JSON: true effects, enables 'oracle'.")
@_options(_STRATA_OPTIONS)
@_options(_FEATURE_OPTIONS)
@click.option(
    "--dr", is_flag=True, help="Add doubly robust value_dr, cost_dr, feasible_dr (cross-fitted on each test part)."
)
@common_options("output", "format", "in_format", "seed", "threads", "device", "force", "meta", "quiet", "verbose")
def bench_cmd(input, **opts):
    """Compare CUVET with the baselines over budgets, seeds and folds; one CSV row per run.

    Methods: cuvet, cuvet-b (closed-form allocation), cuvet-lp, cuvet-b-lp (their leaf
    estimates through the LP), uniform, roi-greedy, lp-tlearner (LightGBM per arm),
    lp-xlearner (econml), lp-causalml-urf (causalml's uplift forest, 0/1 value) and, on
    synthetic data, oracle. Every estimate is turned into a policy by the same exact LP
    (Numba on the CPU; with --device cuda the vectorized CuPy twin).

    --budgets are fractions of the per-user cost of giving everyone the costliest arm: with
    --truth its true expected value on the test rows (column budget_basis = true), otherwise
    its estimate on the training rows (train). With --truth, the cuvet and cuvet-b rows also
    carry leaf_bound, the share of the oracle value that the best policy constant on the
    model's leaves gets (docs/cuvet.md, "Options in detail").

    A summary table (means over seeds and folds) goes to stderr unless -q.

    \b
    EXAMPLES
      cuvet-assign bench thornton.parquet --treatment arm --value got --cost tinc --budgets 0.5 -o t.csv
      cuvet-assign bench train.parquet --test test.parquet --truth train.parquet.json \\
          --treatment treatment --value conversion --arm-costs 0,1,2,3,4 --cost-on-outcome \\
          --methods cuvet,cuvet-b,lp-tlearner,uniform,oracle -o syn.csv
    """
    import sys

    from methodkit.cli._common import err_console, print_frame
    from methodkit.core import io
    from methodkit.tools.cuvet import compare
    from methodkit.tools.cuvet.commands import bench_choices, bench_splits

    run = Run.from_context()
    threads = run.threads()
    io.require_input(input)
    chosen, fracs = bench_choices(opts["methods"], opts["budgets"])
    spec = _spec(opts)
    run.refuse_existing_output()
    frame = _parse(run, run.input_bytes(input))
    data = _load(run, frame, spec, opts, opts["strata"])
    truth_doc = run.read_json(opts["truth"]) if opts["truth"] else None

    def load_test():
        tframe = io.read_table(run.input_bytes(opts["test_path"]))
        return _load(run, tframe, spec, opts, opts["strata"], levels=data.levels), tframe

    test = load_test if opts["test_path"] is not None else None
    splits = bench_splits(data, frame, opts["seeds"], run.seed, opts["folds"], test)
    with run.progress() as cb:
        xp = None
        if run.device() == "cuda":  # the per-user LPs (argmax over arms at every user) run on the GPU
            from methodkit.core.backend import array_module

            xp = array_module("cuda")
        table = compare.run(splits, chosen, fracs, truth_doc, progress=cb, threads=threads, dr=opts["dr"], xp=xp)
    if not run.quiet:
        summary = compare.summary(table)
        if err_console().is_terminal:
            print_frame(summary, "cuvet-assign bench (means over seeds and folds)")
        else:  # a log gets every column whole (a rich table there is cut to the console width)
            sys.stderr.write(summary.to_csv(index=False))
    run.emit_table(table)


# ---------------------------------------------------------------- tree


@main.command("tree")
@click.argument("model_path", metavar="MODEL")
@common_options("output", "force", "quiet", "verbose")
def tree_cmd(model_path, **_):
    """Print the tree: each split, and each leaf's (n, alpha, beta, spend, arm mix).

    \b
    EXAMPLES
      cuvet-assign tree model.json
    """
    from methodkit.core import io
    from methodkit.tools.cuvet.model import render_tree  # no pandas: `tree` only reads JSON

    run = Run.from_context()
    model = _read_model(run, model_path)
    with io.atomic_write(run.output, force=run.force) as handle:
        handle.write(render_tree(model).encode("utf-8"))
