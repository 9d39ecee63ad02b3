"""cuvet-assign: budgeted treatment assignment with the CUVET cost-per-unit-value equalization tree."""

from __future__ import annotations

import click

from methodkit.cli import _cuvet_options as verb_options
from methodkit.cli import _cuvet_run as read
from methodkit.cli._common import Run, input_argument, tool_group, warn
from methodkit.cli._cuvet_options import DEMO  # noqa: F401  (make demo reads cli modules' DEMO)


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


@main.command("gen")
@click.argument("source", type=click.Choice(["synthetic", "thornton", "social-insure"]))
@verb_options.gen_options
def gen(source, n, regime, truth_seed, unit_cost, with_hiv, sidecar, **_):
    """Write an RCT table (Parquet by -o extension) and a JSON sidecar (arm costs, true effects).

    \b
    EXAMPLES
      cuvet-assign gen thornton -o thornton.parquet
      cuvet-assign gen synthetic --n 500000 --seed 1 -o train.parquet
      cuvet-assign gen social-insure | head -3
    """
    run = Run.from_context()
    frame = read.generate(run, source, n, regime, truth_seed, unit_cost, with_hiv, sidecar)
    run.emit_table(frame)


@main.command("fit")
@input_argument()
@verb_options.fit_options
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
    from methodkit.tools.cuvet.commands import fit_model, fit_summary, model_document

    run = Run.from_context()
    data = read.fit_data(run, input, opts)
    with run.progress() as cb:
        model = fit_model(data, opts, run.seed, cb)
    for message in model.warnings[len(data.warnings) :]:
        warn(run.tool.split()[0], message)
    body = model_document(model, data, opts)
    if run.output == "-":
        run.emit_result(body)
        return
    io.write_json(body, run.output, force=run.force, indent=1)
    run.emit_result(fit_summary(model, data, run.output), output="-")


@main.command("assign")
@click.argument("model_path", metavar="MODEL")
@input_argument()
@verb_options.assign_options
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
    model = read.read_model(run, model_path)
    frame = run.read_table(input)
    from methodkit.tools.cuvet.assign import assign

    table, info = assign(model, frame, budget=budget, id_col=id_col, seed=run.seed)
    run.emit_table(table)
    if summary is not None:
        io.write_json(info, summary, force=run.force)
    elif run.output != "-":
        run.emit_result(info, output="-")


@main.command("evaluate")
@input_argument()
@click.argument("assignment", required=False, default=None)
@verb_options.evaluate_options
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
    from methodkit.tools.cuvet.commands import check_evaluation, evaluate_assignment

    run = Run.from_context()
    frame, table, data = read.evaluation_inputs(run, input, assignment, opts)
    keys = ("propensity", "budget", "deterministic", "strict", "n_boot", "dr", "dr_folds")
    result, per_user = evaluate_assignment(
        frame, table, data, assignment, seed=run.seed, threads=run.threads, **{k: opts[k] for k in keys}
    )
    run.emit_result(result)
    check_evaluation(result, per_user, opts["strict"], opts["fail_below"])


@main.command("bench")
@input_argument()
@verb_options.bench_options
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
    from methodkit.core.backend import array_module
    from methodkit.tools.cuvet import compare

    run = Run.from_context()
    threads = run.threads()
    chosen, fracs, splits = read.bench_inputs(run, input, opts)
    truth_doc = run.read_json(opts["truth"]) if opts["truth"] else None
    with run.progress() as cb:
        xp = array_module("cuda") if run.device() == "cuda" else None  # the per-user LPs on the GPU
        table = compare.run(splits, chosen, fracs, truth_doc, progress=cb, threads=threads, dr=opts["dr"], xp=xp)
    if not run.quiet:
        read.print_summary(compare.summary(table), "cuvet-assign bench (means over seeds and folds)")
    run.emit_table(table)


@main.command("tree")
@click.argument("model_path", metavar="MODEL")
@verb_options.tree_options
def tree_cmd(model_path, **_):
    """Print the tree: each split, and each leaf's (n, alpha, beta, spend, arm mix).

    \b
    EXAMPLES
      cuvet-assign tree model.json
    """
    from methodkit.core import io
    from methodkit.tools.cuvet.model import render_tree  # no pandas: `tree` only reads JSON

    run = Run.from_context()
    model = read.read_model(run, model_path)
    with io.atomic_write(run.output, force=run.force) as handle:
        handle.write(render_tree(model).encode("utf-8"))
