"""methodkit-data: list and export the real data sets that ship inside installed packages."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, Run, common_options, tool_group

DEMO = [
    DemoStep("methodkit-data list", "registry", "rows", "data sets"),
    DemoStep("methodkit-data get diabetes", "diabetes", "rows", "rows exported"),
]


@tool_group(name="methodkit-data")
def main():
    """List and export the real data sets that ship inside installed packages.

    Every data set is read from files an installed PyPI package put on disk
    (scikit-learn, statsmodels, and the packages of the method extras); nothing
    is downloaded. Other methodkit executables read the exported files, so a
    data set feeds a pipeline directly.

    \b
    EXAMPLES
      methodkit-data list
      methodkit-data get diabetes | head -3
      methodkit-data get wine -o wine.parquet
      methodkit-data get longley --format jsonl > longley.jsonl

    \b
    EXIT STATUS
      0  success
      1  failure while running
      2  bad usage, or an unknown data set name
      130  interrupted
    """


@main.command("list")
@common_options("output", "format", "force", "meta", "quiet", "verbose")
def list_(**_):
    """List the data sets: name, rows, columns, source package, licence, description."""
    import pandas as pd

    from methodkit.core import datasets
    from methodkit.core.errors import DataError

    run = Run.from_context()
    rows = []
    for name in datasets.names():
        entry = datasets.info(name)
        try:
            shape = datasets.load(name).shape
            note = ""
        except DataError as exc:  # its package is not installed: list it with the fix
            shape, note = (None, None), f" (unavailable: {exc.message})"
        rows.append(
            {
                "name": name,
                "rows": shape[0],
                "columns": shape[1],
                "target": entry.target or "",
                "source": entry.source,
                "licence": entry.licence,
                "description": entry.description + note,
            }
        )
    run.emit_table(pd.DataFrame(rows).astype({"rows": "Int64", "columns": "Int64"}))


@main.command("get")
@click.argument("name")
@common_options("output", "format", "force", "meta", "quiet", "verbose")
def get(name, **_):
    """Write data set NAME as CSV (or Parquet/TSV/JSONL/JSON by -o extension or --format)."""
    from methodkit.core import datasets

    run = Run.from_context()
    run.emit_table(datasets.load(name))
