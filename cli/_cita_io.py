"""What the cita-* commands share: reading trajectory/candidate JSONL and writing JSONL through Run."""

from __future__ import annotations

import click

from methodkit.cli._common import Run, option_group, warn

# BFCL v4's multi-turn categories (bfcl-eval's names)
CATEGORIES = ("multi_turn_base", "multi_turn_miss_param", "multi_turn_miss_func", "multi_turn_long_context")


def bfcl_options(with_split: bool):
    """The BFCL category and the task split's flags, shared by cita-data bfcl and cita-eval (--split: data only)."""
    split = click.option(
        "--split",
        type=click.Choice(["train", "test", "all"]),
        default="all",
        show_default=True,
        help="Which split to write.",
    )
    return option_group(
        click.option(
            "--category",
            type=click.Choice(CATEGORIES),
            default="multi_turn_base",
            show_default=True,
            help="BFCL v4 multi-turn category.",
        ),
        *([split] if with_split else []),
        click.option(
            "--split-seed", type=click.IntRange(min=0), default=0, show_default=True, help="Seed of the split hash."
        ),
        click.option(
            "--test-fraction",
            type=click.FloatRange(0, 1),
            default=0.4,
            show_default=True,
            help="Share of tasks in the test split.",
        ),
        click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first N tasks of the category."),
    )


def read_records(run: Run, path: str, kind: str, skip_bad: bool = False) -> list:
    from methodkit.core.io import decode_text
    from methodkit.tools.cita.records import parse_jsonl

    data = run.input_bytes(path)
    records, skipped = parse_jsonl(decode_text(data), data.name, kind, skip_bad)
    if skipped:
        warn(run.tool.split()[0], f"skipped {skipped} malformed line(s) of {data.name}")
    return records


def write_jsonl(run: Run, records: list, output: str | None = None) -> None:
    from methodkit.core.io import atomic_write
    from methodkit.tools.cita.records import dumps_jsonl

    with atomic_write(run.output if output is None else output, force=run.force) as handle:
        handle.write(dumps_jsonl(records).encode())
    run.write_meta()


def warner(run: Run):
    return lambda message: warn(run.tool.split()[0], message)
