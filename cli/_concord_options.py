"""concord-plan's option groups, the flag parsers its verbs share and the stderr top-k table
(cli/concord_plan.py stays a thin command)."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, Run, err_console, option_group

DEMO = [
    DemoStep(
        "concord-plan fixtures fx -q && concord-plan plan fx/models/llama-70b-32k.yaml "
        "fx/clusters/h100-80gb-1024.yaml --space fx/spaces/long-context.yaml -q",
        "llama-70b-32k on 1024 H100",
        "step_s",
        "predicted step seconds",
    ),
    DemoStep(
        "concord-plan fixtures fx -q && concord-plan verify fx/models/mixtral-8x7b.yaml "
        "fx/models/mixtral-8x7b.seq_x2.yaml fx/clusters/h100-80gb-256.yaml --space fx/spaces/sweep.yaml "
        "--trials 1 -q",
        "mixtral-8x7b, seq x2",
        "median_speedup",
        "warm re-plan speedup (equivalent)",
    ),
]

space_option = click.option("--space", "space_path", metavar="SPACE.yaml", default=None, help="Strategy-space limits.")

dependency_option = click.option(
    "--no-dependency-check",
    "lax_deps",
    is_flag=True,
    help="Diagnostic: let raw templates read symbols they did not declare (stale hits become possible).",
)

plan_options = option_group(
    space_option,
    click.option(
        "--cache",
        "cache_dir",
        type=click.Path(file_okay=False),
        metavar="DIR",
        default=None,
        help="Persistent primitive cache (SQLite, WAL).",
    ),
    click.option(
        "--no-cache", is_flag=True, help="Cache-disabled full search: evaluate every (template, layer, candidate)."
    ),
    click.option("--top-k", type=click.IntRange(min=1), default=10, show_default=True, help="Plans to report."),
    click.option("--force-strategy", metavar="SIGMA", default=None, help="Evaluate one strategy: tp=8,pp=16,mbs=1,..."),
    click.option(
        "--partition",
        type=click.Choice(["searched", "uniform"]),
        default="searched",
        show_default=True,
        help="Layer partition: min-bottleneck search (never worse than uniform) or Megatron's uniform split.",
    ),
    click.option("--max-candidates", type=click.IntRange(min=1), default=None, help="Refuse larger candidate sets."),
    click.option(
        "--timings", is_flag=True, help="Add wall-clock seconds per phase (the output then varies run to run)."
    ),
    click.option(
        "--fail-below",
        type=float,
        default=None,
        metavar="TFLOPS",
        help="Exit 3 if the best plan's TFLOP/s per device is lower.",
    ),
    dependency_option,
)

verify_options = option_group(
    click.argument("old_path", metavar="MODEL_OLD"),
    click.argument("new_path", metavar="MODEL_NEW"),
    click.argument("cluster_path", metavar="CLUSTER"),
    space_option,
    click.option(
        "--cluster-new", metavar="CLUSTER_NEW", default=None, help="Cluster after the edit (default: CLUSTER)."
    ),
    click.option(
        "--trials", type=click.IntRange(min=1), default=3, show_default=True, help="Paired trials, fresh caches."
    ),
    click.option("--audit", default="all", show_default=True, help="Hits to recompute cold: 'all' or a number."),
    click.option(
        "--top-k", type=click.IntRange(min=1), default=10, show_default=True, help="Length of the compared list."
    ),
    dependency_option,
)

sweep_options = option_group(
    click.argument("fixtures_dir", metavar="FIXTURES_DIR"),
    click.argument("edits_path", metavar="EDITS.yaml"),
    click.option("--trials", type=click.IntRange(min=1), default=3, show_default=True, help="Paired trials per cell."),
    click.option("--only", default=None, metavar="NAMES", help="Comma-separated fixture names to run (default: all)."),
    click.option(
        "--audit", default="all", show_default=True, help="Hits to recompute cold per trial: 'all' or a number."
    ),
)

reference_options = option_group(
    click.argument("table_path", metavar="[TABLE.yaml]", required=False, default=None),
    click.option(
        "--tolerance",
        type=click.FloatRange(min=0),
        default=0.2,
        show_default=True,
        help="Allowed |predicted/published - 1|.",
    ),
    click.option("--mbs", "mbs_list", default="1,2,4,8", show_default=True, help="Microbatch sizes to search per row."),
    click.option("--vpp", "vpp_list", default="1,2,4", show_default=True, help="Interleaved stages to search per row."),
    click.option(
        "--partition",
        type=click.Choice(["uniform", "searched"]),
        default="uniform",
        show_default=True,
        help="Layer split: Megatron's uniform one (as the published runs) or the min-bottleneck search.",
    ),
    click.option("--check", "strict", is_flag=True, help="Exit 3 if any row misses the tolerance."),
)


def audit_limit(text: str, digits_only: bool = False) -> int | None:
    """--audit: 'all' (None) or a number (`digits_only`: written with digits only)."""
    from methodkit.core.errors import UsageError

    if text == "all":
        return None
    try:
        if digits_only and not text.isdigit():
            raise ValueError(text)
        return int(text)
    except ValueError:
        raise UsageError(f"--audit must be 'all' or a number, got {text!r}") from None


def int_list(text: str, flag: str) -> tuple:
    """A comma-separated list of positive integers."""
    from methodkit.core.errors import UsageError

    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{flag}: expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise UsageError(f"{flag}: expected positive integers, got {text!r}")
    return values


def one_caller_threads() -> None:
    """Numba's workqueue layer: the kernels are launched from this thread only, and OpenMP's idle workers
    spun between the many small ones (-j 0 was 1.2x -j 1; core.threads)."""
    from methodkit.core.threads import prefer_workqueue

    prefer_workqueue()


def topk_table(run: Run, top: list, title: str) -> None:
    """The top-k plans as a rich table on stderr (not with -q)."""
    if run.quiet:
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title))
    for column in ("rank", "tp", "cp", "pp", "dp", "ep", "vpp", "mbs", "zero", "recompute", "step s", "peak GiB"):
        table.add_column(column)
    for row in top:
        s = row["sigma"]
        table.add_row(
            str(row["rank"]),
            *[str(s[k]) for k in ("tp", "cp", "pp", "dp", "ep", "vpp", "mbs", "zero", "recompute")],
            f"{row['step_s']:.4g}",
            f"{row['peak_gib']:.1f}",
        )
    err_console().print(table)
