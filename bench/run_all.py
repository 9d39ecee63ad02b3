"""`make bench`: run every bench/<method>.py and rewrite bench/RESULTS.md with what they printed.

Each benchmark prints lines `case  size  ours_s  ref_s  ratio`, the reference
measured in the same run.
"""

from __future__ import annotations

import datetime as dt
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    scripts = sorted(  # _name: long studies; gpu_name: checks for a CUDA machine
        p for p in HERE.glob("*.py") if p.name != "run_all.py" and not p.name.startswith(("_", "gpu_"))
    )
    parts = [
        "# Benchmark results",
        "",
        f"Written by `make bench` on {dt.date.today().isoformat()}, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}. Each ratio is ref_s / ours_s, both measured in the same run.",
        "",
    ]
    failed = 0
    for script in scripts:
        print(f"== {script.name}", flush=True)
        proc = subprocess.run([sys.executable, "-P", str(script)], capture_output=True, text=True)
        sys.stdout.write(proc.stdout)
        if proc.returncode != 0:
            failed += 1
            sys.stderr.write(proc.stderr)
        parts += [
            f"## {script.stem}",
            "",
            "```",
            proc.stdout.rstrip() or f"(failed: exit {proc.returncode})",
            "```",
            "",
        ]
    if not scripts:
        parts.append("No benchmarks yet.")
    (HERE / "RESULTS.md").write_text("\n".join(parts) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
