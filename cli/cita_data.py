"""cita-data: import packaged tool-use benchmarks into the unified trajectory JSONL, or validate one."""

from __future__ import annotations

import click

from methodkit.cli._cita_io import bfcl_options
from methodkit.cli._common import DemoStep, Run, common_options, input_argument, tool_group, warn

PROG = "cita-data"

DEMO = [
    DemoStep(
        "cita-data bfcl --limit 20 | cita-data validate",
        "BFCL v4 multi_turn_base (bfcl-eval)",
        "n_records",
        "trajectories imported",
    ),
]


@tool_group(name=PROG)
def main():
    """Import tool-use benchmarks into one trajectory format (gold calls executed, observations recorded).

    `bfcl` reads BFCL v4's multi-turn tasks from the bfcl-eval wheel, executes each task's gold calls in
    bfcl-eval's own API classes (GorillaFileSystem, TwitterAPI, ...) and records every observation, error
    flag and whether the call changed the public state. `tau2` converts a τ²-bench simulation results
    JSON of your own (one trajectory per simulation run: tool calls, tool messages as observations,
    success = reward ≥ 1, the task's gold actions as gold_tools); `cfb` converts a ComplexFuncBench JSONL
    (its gold calls with the recorded responses). Each task gets a split (train/test) by a seeded hash of
    its id. `replay tau2|cfb` generates the default tasks of the offline replay environments that
    cita-eval --env tau2|cfb runs: τ²-bench-retail-style tasks (each with its initial database; user
    turns replayed; success = the database equals the gold-replayed one) and ComplexFuncBench-style
    Booking tasks (recorded responses; a call outside the cache is an error). `validate` checks a user's trajectory (or candidates) JSONL and counts its records.

    One task per line: {task_id, source, split, instruction: [turn texts], tools: [{name, description,
    parameters}], steps: [{turn, call: {name, arguments}, observation, error}], success, env}.

    \b
    EXAMPLES
      cita-data bfcl -o train.jsonl --split train
      cita-data bfcl --category multi_turn_miss_param --split test | head -1 | jq .task_id
      cita-data tau2 results.json --split train -o tau2.jsonl
      cita-data cfb ComplexFuncBench.jsonl -o cfb.jsonl
      cita-data replay tau2 --split train -o tau2-train.jsonl
      cita-data validate mine.jsonl --skip-bad

    \b
    NOTES
      tau2 and cfb read your files only (nothing is downloaded); a malformed file is refused with
      exit 2 naming the file and the row (simulations[i].messages[j], or file:line).

    \b
    EXIT STATUS
      0  success
      1  failure while running
      2  bad usage or bad input (malformed input names file and row; missing bfcl-eval names the pip line)
      130  interrupted
    """


@main.command("bfcl")
@bfcl_options(with_split=True)
@common_options("output", "force", "meta", "quiet", "verbose")
def bfcl_cmd(category, split, split_seed, test_fraction, limit, **_):
    """Import a BFCL v4 multi-turn category (gold calls executed in bfcl-eval's environments)."""
    from methodkit.cli._cita_io import write_jsonl
    from methodkit.tools.cita.api import import_bfcl

    run = Run.from_context()
    write_jsonl(run, import_bfcl(category, split, split_seed, test_fraction, limit))


def _split_options(f):
    for option in reversed(
        [
            click.option(
                "--split",
                type=click.Choice(["train", "test", "all"]),
                default="all",
                show_default=True,
                help="Which split to write.",
            ),
            click.option(
                "--split-seed", type=click.IntRange(min=0), default=0, show_default=True, help="Split hash seed."
            ),
            click.option(
                "--test-fraction", type=click.FloatRange(0, 1), default=0.4, show_default=True, help="Test share."
            ),
        ]
    ):
        f = option(f)
    return f


def _import_file(run, input, importer, split, split_seed, test_fraction):
    from methodkit.cli._cita_io import write_jsonl
    from methodkit.core.io import decode_text

    data = run.input_bytes(input)
    records = importer(decode_text(data), data.name, split_seed, test_fraction)
    write_jsonl(run, [r for r in records if split in ("all", r["split"])])


@main.command("tau2")
@input_argument()
@_split_options
@common_options("output", "force", "meta", "quiet", "verbose")
def tau2_cmd(input, split, split_seed, test_fraction, **_):
    """Convert a τ²-bench simulation results JSON (one trajectory per simulation run)."""
    from methodkit.tools.cita.importers import tau2_results

    _import_file(Run.from_context(), input, tau2_results, split, split_seed, test_fraction)


@main.command("cfb")
@input_argument()
@_split_options
@common_options("output", "force", "meta", "quiet", "verbose")
def cfb_cmd(input, split, split_seed, test_fraction, **_):
    """Convert a ComplexFuncBench JSONL (gold calls with their recorded responses)."""
    from methodkit.tools.cita.importers import complexfuncbench

    _import_file(Run.from_context(), input, complexfuncbench, split, split_seed, test_fraction)


@main.command("replay")
@click.argument("env", type=click.Choice(["tau2", "cfb"]))
@click.option("--tasks", "n_tasks", type=click.IntRange(min=1), default=None, help="Tasks [default: tau2 114, cfb 300].")
@click.option("--data-seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the generated data.")
@_split_options
@common_options("output", "force", "meta", "quiet", "verbose")
def replay_cmd(env, n_tasks, data_seed, split, split_seed, test_fraction, **_):
    """Generate the default tasks of a replay env (tau2: retail DB + tools; cfb: Booking response cache)."""
    from methodkit.cli._cita_io import write_jsonl
    from methodkit.tools.cita import replay

    run = Run.from_context()
    records = replay.trajectories(env, n_tasks or replay.DEFAULT_TASKS[env], data_seed, split_seed, test_fraction)
    write_jsonl(run, [r for r in records if split in ("all", r["split"])])


@main.command("validate")
@input_argument()
@click.option(
    "--kind",
    type=click.Choice(["trajectory", "candidates"]),
    default="trajectory",
    show_default=True,
    help="Record type of INPUT.",
)
@click.option("--skip-bad", is_flag=True, help="Skip malformed lines (counted) instead of failing.")
@common_options("output", "meta", "force", "quiet", "verbose")
def validate_cmd(input, kind, skip_bad, **_):
    """Check a trajectory or candidates JSONL: one JSON line {n_records, n_skipped, n_steps, n_tools}."""
    from methodkit.core.io import decode_text
    from methodkit.tools.cita.records import parse_jsonl

    run = Run.from_context()
    data = run.input_bytes(input)
    records, skipped = parse_jsonl(decode_text(data), data.name, kind, skip_bad)
    if skipped:
        warn(PROG, f"skipped {skipped} malformed line(s) of {data.name}")
    steps = sum(len(r.get("steps", r.get("history", []))) for r in records)
    tools = len({t["name"] for r in records for t in r["tools"]})
    run.emit_result({"n_records": len(records), "n_skipped": skipped, "n_steps": steps, "n_tools": tools})
