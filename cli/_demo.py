"""`make demo`: run every executable end-to-end on its embedded default data.

Each cli module lists its runs in a module-level `DEMO` (a list of DemoStep).
Prints one line per step as it finishes (executable, figure, wall and CPU seconds), then the
whole table. Exits 1 if any run fails.

    python -m methodkit.cli._demo [EXECUTABLE ...]   # only these executables' steps
"""

from __future__ import annotations

import importlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from methodkit.cli._docs import executables


def headline(stdout: str, key: str) -> str:
    if key == "rows":
        lines = [ln for ln in stdout.splitlines() if ln.strip()]
        return f"{max(len(lines) - 1, 0)} rows"
    record = json.loads(stdout.strip().splitlines()[-1])
    for part in key.split("."):
        record = record[int(part)] if isinstance(record, list) else record[part]
    return f"{key} = {record:.4g}" if isinstance(record, float) else f"{key} = {record}"


def steps(only: list[str] | None = None) -> list[tuple[str, object]]:
    """(executable, DemoStep) for every registered executable (or those in `only`), by name."""
    found = []
    for name, target in sorted(executables().items()):
        if only and name not in only:
            continue
        module = importlib.import_module(target.split(":")[0])
        found += [(name, step) for step in getattr(module, "DEMO", [])]
    return found


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_step(step, env: dict) -> tuple[bool, str, float, float]:
    """Run one step in a fresh folder: (ok, figure or failure text, wall seconds, CPU seconds)."""
    with tempfile.TemporaryDirectory(prefix="methodkit-demo-") as folder:
        start, cpu = time.monotonic(), _children_cpu()
        proc = subprocess.run(
            ["bash", "-o", "pipefail", "-c", step.command], cwd=folder, env=env, capture_output=True, text=True
        )
        seconds, cpu = time.monotonic() - start, _children_cpu() - cpu
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        return False, f"FAILED ({proc.returncode}): {last}", seconds, cpu
    try:
        figure = headline(proc.stdout, step.headline)
    except (ValueError, KeyError, IndexError) as exc:
        return False, f"FAILED: no headline {step.headline!r} ({exc})", seconds, cpu
    return True, (f"{step.label}: " if step.label else "") + figure, seconds, cpu


def main(argv: list[str] | None = None) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    only = list(sys.argv[1:] if argv is None else argv)
    unknown = sorted(set(only) - set(executables()))
    if unknown:
        print(f"demo: error: no executable named {', '.join(unknown)}", file=sys.stderr)
        return 2
    console = Console(highlight=False, width=160)
    table = Table(title="methodkit demo")
    for column in ("executable", "input", "headline", "seconds"):
        table.add_column(column)
    failures = 0
    total = time.monotonic()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    todo = steps(only)
    for i, (name, step) in enumerate(todo, 1):
        ok, figure, seconds, cpu = run_step(step, env)
        failures += not ok
        # One line as each step ends, so a long demo shows where it is (a pipe or a log gets it at once);
        # CPU time beside the wall time tells a slow step from a busy machine.
        console.print(f"[{i}/{len(todo)}] {escape(name)}  {escape(figure)}  {seconds:.1f} s (CPU {cpu:.1f} s)")
        sys.stdout.flush()
        table.add_row(escape(name), escape(step.input), escape(figure), f"{seconds:.1f}")
    console.print(table)
    console.print(f"{len(todo)} steps, {failures} failed, {time.monotonic() - total:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
