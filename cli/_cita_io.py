"""What the cita-* commands share: reading trajectory/candidate JSONL and writing JSONL through Run."""

from __future__ import annotations

from methodkit.cli._common import Run, warn


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
