"""cita-data: import packaged tool-use benchmarks into the unified trajectory JSONL, or validate one."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, Run, common_options, input_argument, tool_group, warn

PROG = "cita-data"
CATEGORIES = ("multi_turn_base", "multi_turn_miss_param", "multi_turn_miss_func", "multi_turn_long_context")

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
    flag and whether the call changed the public state. Each task gets a split (train/test) by a seeded
    hash of its id. `validate` checks a user's trajectory (or candidates) JSONL and counts its records.

    One task per line: {task_id, source, split, instruction: [turn texts], tools: [{name, description,
    parameters}], steps: [{turn, call: {name, arguments}, observation, error}], success, env}.

    \b
    EXAMPLES
      cita-data bfcl -o train.jsonl --split train
      cita-data bfcl --category multi_turn_miss_param --split test | head -1 | jq .task_id
      cita-data validate mine.jsonl --skip-bad

    \b
    NOTES
      tau2 (τ²-bench retail/airline) and ComplexFuncBench importers are not built yet (docs/cita.md).

    \b
    EXIT STATUS
      0  success
      1  failure while running
      2  bad usage or bad input (malformed JSONL names file:line; missing bfcl-eval names the pip line)
      130  interrupted
    """


@main.command("bfcl")
@click.option(
    "--category",
    type=click.Choice(CATEGORIES),
    default="multi_turn_base",
    show_default=True,
    help="BFCL v4 multi-turn category.",
)
@click.option(
    "--split",
    type=click.Choice(["train", "test", "all"]),
    default="all",
    show_default=True,
    help="Which split to write.",
)
@click.option("--split-seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the split hash.")
@click.option(
    "--test-fraction",
    type=click.FloatRange(0, 1),
    default=0.4,
    show_default=True,
    help="Share of tasks in the test split.",
)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N tasks of the category.")
@common_options("output", "force", "meta", "quiet", "verbose")
def bfcl_cmd(category, split, split_seed, test_fraction, limit, **_):
    """Import a BFCL v4 multi-turn category (gold calls executed in bfcl-eval's environments)."""
    from methodkit.cli._cita_io import write_jsonl
    from methodkit.tools.cita.api import import_bfcl

    run = Run.from_context()
    write_jsonl(run, import_bfcl(category, split, split_seed, test_fraction, limit))


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
