"""`make demo`: run every executable end-to-end on its embedded default data.

Each cli module lists its runs in a module-level `DEMO` (a list of DemoStep).
Prints one table: executable, input, headline figure, seconds. Exits 1 if any run fails.
"""

from __future__ import annotations

import importlib
import json
import os
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


def main() -> int:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="methodkit demo")
    for column in ("executable", "input", "headline", "seconds"):
        table.add_column(column)
    failures = 0
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for name, target in sorted(executables().items()):
        module = importlib.import_module(target.split(":")[0])
        for step in getattr(module, "DEMO", []):
            with tempfile.TemporaryDirectory(prefix="methodkit-demo-") as folder:
                start = time.monotonic()
                proc = subprocess.run(
                    ["bash", "-o", "pipefail", "-c", step.command], cwd=folder, env=env, capture_output=True, text=True
                )
                seconds = time.monotonic() - start
            if proc.returncode != 0:
                failures += 1
                last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
                figure = f"FAILED ({proc.returncode}): {last}"
            else:
                try:
                    figure = headline(proc.stdout, step.headline)
                except (ValueError, KeyError, IndexError) as exc:
                    failures += 1
                    figure = f"FAILED: no headline {step.headline!r} ({exc})"
            label = f"{step.label}: " if step.label else ""
            table.add_row(name, step.input, label + figure, f"{seconds:.1f}")
    Console(highlight=False, width=160).print(table)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
