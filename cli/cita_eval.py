"""cita-eval: CIM-guided episodes in BFCL's executable environments, against baseline policies."""

from __future__ import annotations

import click

from methodkit.cli._cita_io import bfcl_options
from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, tool_command

PROG = "cita-eval"
POLICIES = ("random", "prior", "judge")

DEMO = [
    DemoStep(
        "cita-eval --env bfcl --limit 25 --policy random",
        "BFCL v4 multi_turn_base (bfcl-eval)",
        "runs.0.success",
        "random-policy success",
    ),
]


@tool_command(name=PROG)
@click.option(
    "--env",
    type=click.Choice(["bfcl", "tau2", "cfb"]),
    default="bfcl",
    show_default=True,
    help="Executable environment: BFCL, or a replay env (tau2 retail DB, cfb response cache).",
)
@click.option(
    "--data",
    "data_path",
    default=None,
    metavar="PATH",
    help="Trajectory JSONL of a replay env (cita-data replay|cfb) [default: its generated tasks].",
)
@click.option("--model", "model_dirs", multiple=True, metavar="DIR", help="A cita-train model folder (repeatable).")
@click.option(
    "--policy",
    "policy_names",
    multiple=True,
    type=click.Choice(POLICIES),
    help="A baseline policy (repeatable): random, prior (graph transitions), judge (offline judge).",
)
@click.option(
    "--graph",
    "graph_path",
    default=None,
    metavar="PATH",
    help="graph.npz for prior/judge [default: the first --model's].",
)
@bfcl_options(with_split=False)
@click.option(
    "--distractors",
    type=click.IntRange(min=0),
    default=4,
    show_default=True,
    help="Generator distractors per step (end_turn is always offered besides).",
)
@click.option("--no-values", is_flag=True, help="Skip the step-value metrics against the oracle V*.")
@click.option(
    "--out",
    "out_path",
    type=OutputPath(),
    default=None,
    metavar="PATH",
    help="Per-task results (CSV or Parquet by extension).",
)
@click.option(
    "--fail-below",
    type=click.FloatRange(0, 1),
    default=None,
    metavar="X",
    help="Exit 3 when a run's success is below X.",
)
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def main(
    env,
    data_path,
    model_dirs,
    policy_names,
    graph_path,
    category,
    split_seed,
    test_fraction,
    limit,
    distractors,
    no_values,
    out_path,
    fail_below,
    **_,
):
    """Run policy-guided episodes on the test tasks and print one JSON line of metrics per run.

    Protocol: BFCL multi-turn tasks split by a seeded hash of the id (train/test); at each step the
    candidates are the next unexecuted gold call (end_turn once the turn's gold calls are done) plus
    generator distractors (seeds disjoint from training), end_turn always offered, in shuffled order.
    The policy's pick is executed in bfcl-eval's environment; end_turn moves to the next user turn; each
    turn allows |gold turn| + 2 calls. Success = BFCL's state rule (public attributes of every instance
    equal to the gold-executed ones); Tool F1 = multiset F1 of executed vs gold tool names, Call F1 of
    canonical calls (macro over tasks, every task in the denominator, crashes count as failures). For
    a model, pair_acc and brier compare σ(f) with the oracle V*(c,a) (execute a, then the remaining gold
    calls) on the test tasks' gold-path contexts. --env tau2|cfb runs the same protocol in an offline
    replay env on --data (the records' own split) or its generated tasks (cita-data replay): tau2
    success = the database equals the gold-replayed one; cfb success = every recorded call retrieved
    and none outside the response cache. A --model folder of either ranker works (cita-train
    --ranker mlp|gbdt, read from its cim.json); a gbdt ranker's brier uses σ of an uncalibrated score.

    \b
    EXAMPLES
      cita-eval --model cim --model cim-b --policy random --out tasks.csv
      cita-eval --model cim --category multi_turn_miss_param --distractors 8 | jq '.runs[].success'
      cita-eval --env tau2 --model cim-tau2 --policy random

    \b
    EXIT STATUS
      0  success
      1  failure while running
      2  bad usage or bad input (no --model and no --policy, a folder that is not a model)
      3  --fail-below X was given and a run's success is below X
      130  interrupted
    """
    import pandas as pd

    from methodkit.cli._cita_io import warner
    from methodkit.core.errors import CheckFailed, UsageError
    from methodkit.tools.cita import api
    from methodkit.tools.cita.embed import Embedder

    run = Run.from_context()
    if not model_dirs and not policy_names:
        raise UsageError("give at least one --model DIR or --policy NAME")
    models = [(d, api.load_model(d, None, warner(run))) for d in model_dirs]
    graph = None
    if graph_path:
        graph, _ = api.load_graph(graph_path)
    elif models:
        graph = models[0][1].graph
    if graph is None and any(p != "random" for p in policy_names):
        raise UsageError("--policy prior/judge needs --graph PATH (or a --model)")
    tasks = None
    if data_path and env == "bfcl":
        raise UsageError("--data is for a replay env (--env tau2 or cfb); BFCL tasks come from bfcl-eval")
    if env != "bfcl":
        from methodkit.cli._cita_io import read_records
        from methodkit.tools.cita import replay

        if data_path:
            tasks = replay.check_kind(read_records(run, data_path, "trajectory"), env, data_path)
        else:
            tasks = replay.trajectories(env, replay.DEFAULT_TASKS[env], 0, split_seed, test_fraction)
    train, test = api.eval_tasks(category, split_seed, test_fraction, limit, tasks)
    if not test:
        raise UsageError("no test tasks: raise --limit or --test-fraction")
    value_ctx = api.oracle_contexts(train, test, run.seed) if models and not no_values else None
    embedder = models[0][1].embedder if models else Embedder("hash")
    runs, tables = [], []
    with run.progress() as progress:
        for name in policy_names:
            metrics, rows = api.run_eval(
                name, None, graph, embedder, train, test, run.seed, distractors, None, progress
            )
            runs.append(metrics)
            tables.append(pd.DataFrame([{"run": name, **r.__dict__} for r in rows]))
        for folder, model in models:
            metrics, rows = api.run_eval(
                "cim", model, model.graph, model.embedder, train, test, run.seed, distractors, value_ctx, progress
            )
            metrics = {**metrics, "model": folder, "sources": model.sidecar.get("sources"), "ranker": model.ranker}
            runs.append(metrics)
            tables.append(pd.DataFrame([{"run": folder, **r.__dict__} for r in rows]))
    if out_path:
        from methodkit.core import io

        io.write_table(pd.concat(tables, ignore_index=True), out_path, force=run.force)
    run.emit_result({"env": env, "category": category if env == "bfcl" else None, "distractors": distractors, "seed": run.seed, "runs": runs})
    if fail_below is not None and any((r["success"] or 0) < fail_below for r in runs):
        raise CheckFailed(f"a run's success is below --fail-below {fail_below}")
