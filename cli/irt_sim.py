"""irt-sim: simulate benchmark response matrices and drive the estimator study."""

from __future__ import annotations

import click

from methodkit.cli._common import (
    DemoStep,
    OutputPath,
    Run,
    common_options,
    input_argument,
    tool_group,
    warn,
)
from methodkit.cli._irt_options import draw_options

DEMO = [
    DemoStep(
        "irt-sim draw --profile mmlu -J 200 -N 60 --capability clustered -o d.npz"
        " && irt-fit fit d.npz --out-dir fit && irt-fit eval --truth d.npz --fit fit",
        "simulated MMLU, 60 clustered models x 200 items",
        "kendall_tau",
        "MML ranking tau",
    ),
]


@tool_group(name="irt-sim")
def main():
    """Simulate AI-benchmark response matrices and run IRT estimator studies.

    The regime of AI benchmarks: few evaluated models, many items, and capability
    distributions that are skewed, clustered by model family, or multimodal. `draw`
    makes one response matrix with its generating truth (NPZ); `sweep` expands a grid
    of cells x reps x estimators, fits and scores each, and appends one JSONL row per
    run (resumable, on a Dask cluster); `profiles` lists the built-in item profiles of
    the six Open LLM Leaderboard benchmarks and PSN-IRT's published means.

    The six leaderboard profiles have their benchmarks' real item counts and answer
    formats but share one assumed item distribution (log a ~ N(0.2, 0.4^2), b sd 1.2,
    b's mean set by an assumed average accuracy); the psn12 profiles take PSN-IRT's
    published means with the same assumed spreads. None is estimated from a real
    response matrix (no package ships one offline: docs/irt.md); to use your own,
    edit `irt-sim profiles --toml`, or pass `draw --items` an irt-fit items.csv.

    The issue's acceptance grid is bench/irt/irt_grid_acceptance.toml (`irt-sim sweep` it
    with --report for the acceptance checks, whose thresholds are the project's: the paper
    states none); its results and what they mean: docs/irt.md.

    \b
    EXAMPLES
      irt-sim profiles
      irt-sim draw --profile mmlu -J 500 -N 50 --capability skewed -o d.npz
      irt-sim draw --profile gsm8k -N 30 --model 3pl --format csv | head
      irt-sim sweep grid.toml -o runs.jsonl --report summary.md --table runs.parquet
      irt-sim sweep grid.toml -o runs.jsonl --dry-run

    \b
    EXIT STATUS
      0  success
      1  failure while running
      2  bad usage or bad input (unknown profile, bad grid, existing output without --force)
      130  interrupted
    """


@main.command("draw")
@draw_options
@common_options("output", "seed", "meta", "force", "quiet", "verbose", formats=("npz", "csv", "parquet", "jsonl"))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["npz", "csv", "parquet", "jsonl"]),
    default=None,
    help="npz (canonical, with truth) or a long table model_id,item_id,correct [default: from -o, npz].",
)
def draw_cmd(
    model, profile, capability, n_models, n_items, missing, skew, groups, modes, items_file, profiles_file, **_
):
    """Draw one response matrix with its generating truth (NPZ, or a long CSV/Parquet table)."""

    from methodkit.core import io
    from methodkit.tools.irt.commands import long_table
    from methodkit.tools.irt.simulate import DrawSpec, draw

    run = Run.from_context()
    kind = io.format_from_path(run.output, run.fmt, "npz")
    if kind in io.BINARY_FORMATS:
        run.refuse_binary_terminal(kind)
    spec = DrawSpec(
        model, profile, capability, n_models, n_items, missing, skew, groups, modes, items_file, profiles_file
    )
    data = draw(spec, run.seed)
    if kind == "npz":
        run.write_meta()
        io.write_arrays(run.output, data.to_arrays(), force=run.force)
    else:
        run.emit_table(long_table(data), fmt=kind)


@main.command("profiles")
@click.option("--toml", "as_toml", is_flag=True, help="Print the profiles TOML document (to edit and pass back).")
@click.option(
    "--profiles", "profiles_file", metavar="FILE", default=None, help="List this TOML instead of the built-in one."
)
@click.option(
    "--model",
    type=click.Choice(["1pl", "2pl", "3pl"]),
    default="2pl",
    show_default=True,
    help="Model for the solved mu_B.",
)
@common_options("output", "format", "force", "meta", "quiet", "verbose")
def profiles_cmd(as_toml, profiles_file, model, **_):
    """List the built-in benchmark item profiles (or export them as TOML)."""
    from methodkit.core import io
    from methodkit.tools.irt import profiles
    from methodkit.tools.irt.commands import profile_rows

    run = Run.from_context()
    text = None
    if profiles_file:
        text = io.decode_text(run.input_bytes(profiles_file))
    if as_toml:
        with io.atomic_write(run.output, force=run.force) as handle:
            handle.write((text or profiles.DEFAULT_TOML).encode())
        return
    run.emit_table(profile_rows(text, profiles_file or "built-in profiles", model))


@main.command("sweep")
@input_argument("grid")
@click.option("--dry-run", is_flag=True, help="Print the task count and a cost estimate; run nothing.")
@click.option("--resume", is_flag=True, help="Append to an existing -o file, skipping the runs it holds.")
@click.option(
    "--scheduler",
    default="local",
    show_default=True,
    metavar="ADDRESS",
    help="Dask scheduler address, 'local' (in-process cluster) or 'sync' (plain loop).",
)
@click.option(
    "--report",
    "report_path",
    type=OutputPath(),
    metavar="PATH",
    default=None,
    help="Write a markdown summary (with the acceptance checks).",
)
@click.option(
    "--table",
    "table_path",
    type=OutputPath(),
    metavar="PATH",
    default=None,
    help="Write the tidy table (Parquet, or CSV by extension).",
)
@common_options(
    "output",
    "in_format",
    "threads",
    "meta",
    "force",
    "quiet",
    "verbose",
    in_formats=("toml", "json"),
    output_kind="unchecked",
)
def sweep_cmd(grid, dry_run, resume, scheduler, report_path, table_path, **_):
    """Run the grid GRID (TOML/JSON): one JSONL row per (cell, rep, estimator) to -o, resumable.

    A grid holds `seed`, `reps`, `mask` (held-out fraction), `time_limit`, `linking`
    ("mean-sigma", "stocking-lord" or a list of both: the first gives the plain metric
    columns, a further one repeats the scale-dependent metrics as ms_/sl_ columns and the
    report compares them), a [cells] table (lists expand to a product) and an
    [estimators] table of settings. Every row carries the run's CPU and wall seconds
    (task_cpu_seconds, task_seconds: draw + fit + scoring); `--report` sums them (Cost
    section: total CPU and total CPU / 2, the wall time of two one-thread workers).
    Two workers on one machine: `dask scheduler --port 8786 &`, `dask worker
    tcp://127.0.0.1:8786 --nworkers 2 --nthreads 1 &`, then `--scheduler
    tcp://127.0.0.1:8786` (one thread per worker: OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1).
    """
    import os
    import sys

    run = Run.from_context()
    run.threads()  # before Numba is imported: core.backend sets NUMBA_NUM_THREADS, which Numba reads once

    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.core.outputs import check_output, is_special
    from methodkit.tools.irt import report, sweep
    from methodkit.tools.irt.commands import sweep_plan

    out = run.output  # a resumable results file: --resume appends to it, --dry-run only reads it
    if out != "-" and not is_special(out):
        if os.path.exists(out) and not (dry_run or resume or run.force):
            raise UsageError(f"{out}: already exists; pass --resume to continue it or --force to start over")
        check_output(out, force=True, flag="--output")  # its folder exists and can be written
    source = run.input_bytes(grid)
    spec = sweep.parse_grid(source.data.decode("utf-8", errors="replace"), source.name, run.params.get("in_format"))
    todo = sweep.tasks(spec)
    out = run.output
    have = set()
    if out != "-" and os.path.exists(out) and not dry_run and resume:
        have = sweep.done_keys(out)
    pending = [t for t in todo if t.key not in have]
    if dry_run:
        # -o names the results file; the plan goes to stdout
        run.emit_result(sweep_plan(spec, todo, pending), output="-")
        return
    run.refuse_existing_output(report_path, table_path)
    rows = []
    if out == "-":
        handle = sys.stdout
    else:
        handle = open(out, "a" if resume else "w", encoding="utf-8")  # rows are appended with fsync: resumable

    def sink(row):
        rows.append(row)
        if out == "-":
            handle.write(io.dumps_json(row) + "\n")
            handle.flush()
        else:
            sweep.append_row(handle, row)
        if row.get("status") == "error" and not run.quiet:
            warn(run.tool, f"{row['estimator']} failed on {row['key']}: {row.get('error')}")

    try:
        with run.progress() as callback:
            sweep.execute(spec, pending, sink, scheduler=scheduler, callback=callback)
    finally:
        if out != "-":
            handle.close()
    run.write_meta()
    if report_path or table_path:
        all_rows = io.read_jsonl(out) if out != "-" else rows
        if table_path:
            io.write_table(report.tidy(all_rows), table_path, force=run.force)
        if report_path:
            with io.atomic_write(report_path, force=run.force) as h:
                h.write(report.markdown(all_rows).encode())
