"""`make bench [METHOD=name]`: run each bench/<method>/bench.py and rewrite bench/RESULTS.md.

    python -P bench/run_all.py                 # every method's benchmark (slow: minutes per method)
    python -P bench/run_all.py pls irt         # only these; the other methods' tables are kept as they were
    python -P bench/run_all.py --list          # the methods that have a benchmark

A benchmark prints lines `case  size  ours_s  ref_s  ratio  [notes...]`, the reference measured in the
same run; every such line becomes a row of its method's table in RESULTS.md (other printed lines, the
`#` comments, are kept below the table). A method run now replaces its section; a method not run keeps
the section of the run that wrote it, which says when that was; a method never run says so.
Exit status: 0 when every benchmark run exited 0, 1 otherwise, 2 for an unknown method.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"
SECTION = re.compile(r"^## (\S+)\n", re.MULTILINE)


def methods() -> list[str]:
    """Folders of bench/ holding a bench.py (acceptance runs and studies beside it are not run)."""
    return sorted(p.parent.name for p in HERE.glob("*/bench.py"))


def _number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return field == "-"
    return True


def parse_rows(stdout: str) -> tuple[list[list[str]], list[str]]:
    """Split a benchmark's stdout into table rows (case, size, ours, ref, ratio, notes) and other lines."""
    rows, other = [], []
    for line in stdout.splitlines():
        fields = line.split()
        if not fields:
            continue
        is_row = len(fields) >= 5 and not line.lstrip().startswith("#") and fields[0] != "case"
        if is_row and all(_number(f) for f in fields[2:5]):
            rows.append([*fields[:5], " ".join(fields[5:])])
        elif fields[0] != "case":
            other.append(line)
    return rows, other


def section(method: str, proc: subprocess.CompletedProcess, wall_s: float, cpu_s: float) -> str:
    """One method's part of RESULTS.md: when and how it ran, its table, what else it printed."""
    rows, other = parse_rows(proc.stdout)
    lines = [
        f"## {method}",
        "",
        f"`python -P bench/{method}/bench.py`, run on {dt.date.today().isoformat()}: exit {proc.returncode}, "
        f"{wall_s:.0f} s wall, {cpu_s:.0f} s CPU (the benchmark's own times are CPU or wall as its notes say).",
        "",
    ]
    if rows:
        lines += ["| case | size | ours (s) | reference (s) | ratio | notes |", "|---|---|---|---|---|---|"]
        lines += [
            "| " + " | ".join(f"`{c}`" if i == 0 else c.replace("|", "/") for i, c in enumerate(r)) + " |" for r in rows
        ]
        lines.append("")
    else:
        lines += ["No `case size ours_s ref_s ratio` line was printed.", ""]
    if other:
        lines += ["```", *other, "```", ""]
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-5:]
        lines += ["It failed; the end of its stderr:", "", "```", *tail, "```", ""]
    return "\n".join(lines)


def previous_sections() -> dict[str, str]:
    """The sections of the RESULTS.md on disk, by method, to keep those not run this time."""
    if not RESULTS.exists():
        return {}
    text = RESULTS.read_text()
    marks = list(SECTION.finditer(text))
    return {
        m.group(1): text[m.start() : marks[i + 1].start() if i + 1 < len(marks) else len(text)].rstrip() + "\n"
        for i, m in enumerate(marks)
    }


def run_one(method: str) -> tuple[str, int]:
    script = HERE / method / "bench.py"
    print(f"== {method}: {script.relative_to(HERE.parent)}", flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-P", str(script)], capture_output=True, text=True, cwd=HERE.parent)
    wall_s = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
    return section(method, proc, wall_s, cpu_s), proc.returncode


def main(argv: list[str]) -> int:
    known = methods()
    if argv == ["--list"]:
        print("\n".join(known))
        return 0
    chosen = argv or known
    unknown = [m for m in chosen if m not in known]
    if unknown:
        print(
            f"run_all.py: error: no bench/<method>/bench.py for {', '.join(unknown)}; known: {', '.join(known)}",
            file=sys.stderr,
        )
        return 2
    kept = previous_sections()
    fresh, failed = {}, 0
    for method in chosen:
        fresh[method], rc = run_one(method)
        failed += rc != 0
    run_now = ", ".join(chosen)
    earlier = [m for m in known if m not in fresh and m in kept]
    never = [m for m in known if m not in fresh and m not in kept]
    head = [
        "# Benchmark results",
        "",
        "Written by `bench/run_all.py` (`make bench`, or `make bench METHOD=name` for one method). Each row is a",
        "line `case size ours_s ref_s ratio` a benchmark printed; ratio = ref_s / ours_s, both measured in the",
        f"same run. Machine of the last run: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}.",
        "",
        f"- run on {dt.date.today().isoformat()}: {run_now}",
        f"- kept from an earlier run (its date is in its section): {', '.join(earlier) or 'none'}",
        f"- not run yet (`make bench METHOD=name` runs one): {', '.join(never) or 'none'}",
        "",
    ]
    body = [fresh.get(m) or kept.get(m) or f"## {m}\n\nNot run yet: `make bench METHOD={m}`.\n" for m in known]
    tmp = RESULTS.with_suffix(".md.tmp")  # renamed into place only when complete
    tmp.write_text("\n".join(head) + "\n" + "\n".join(body))
    tmp.replace(RESULTS)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
