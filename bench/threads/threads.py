"""Default thread count against `-j 1`, for every executable with a parallel region.

    nice python -P bench/threads/threads.py [--reps 3] [TOOL ...]   # writes bench/threads/threads.txt

For each case of cases.py: setup once, one untimed warm-up run (Numba caches, imports), then `reps`
interleaved pairs (default, -j 1) so both see the same machine load. Wall and CPU time (user + sys of
the whole process tree, from wait4) per run; the table gives medians. Criterion (CONVENTIONS: Threads):
the default is not slower than `-j 1` by more than 10% in wall time. A pair whose two ratios disagree
by more than 25% is noisy, and the case gets `reps` more pairs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cases import CASES, NOT_MEASURED, finish  # noqa: E402

ENV = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def timed(command: str, cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s of the process tree) of one shell command; a failure stops the benchmark."""
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: wait4 must not wait on a full pipe
        start = time.monotonic()
        proc = subprocess.Popen(
            ["bash", "-o", "pipefail", "-c", command], cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace").strip()[-300:]
            raise SystemExit(f"threads: error: `{command}` exited {proc.returncode}: {tail}")
    # wait4 gives the shell's own usage plus that of its waited-for children (the tool).
    return wall, usage.ru_utime + usage.ru_stime


def measure(case, reps: int, folder: Path) -> dict:
    timed(case.setup, folder)
    runs = {"default": [], "j1": []}

    def one(label: str, flag: str) -> None:
        with tempfile.TemporaryDirectory(dir=folder) as sub:
            runs[label].append(timed(case.command.format(j=flag), Path(sub)))

    one("default", "")  # warm-up, not counted
    runs["default"].clear()
    for i in range(reps):
        # alternate which goes first, so a load change does not always hit the same one
        order = [("default", ""), ("j1", "-j 1")] if i % 2 == 0 else [("j1", "-j 1"), ("default", "")]
        for label, flag in order:
            one(label, flag)
    ratios = [d[0] / s[0] for d, s in zip(runs["default"], runs["j1"])]
    if max(ratios) > 1.25 * min(ratios):  # noisy: more pairs
        for i in range(reps):
            for label, flag in [("default", ""), ("j1", "-j 1")][:: 1 if i % 2 else -1]:
                one(label, flag)
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in runs.items()}
    return {"runs": len(runs["j1"]), "default": med["default"], "j1": med["j1"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tools", nargs="*")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("-o", "--output", default=str(HERE / "threads.txt"))
    args = parser.parse_args()
    cases = [c for c in CASES if not args.tools or c.tool in args.tools]
    load_before = os.getloadavg()[0]
    header = f"{'tool':<14}{'pairs':>6}{'def_wall':>10}{'j1_wall':>9}{'wall_x':>8}{'def_cpu':>9}{'j1_cpu':>8}{'cpu_x':>7}  ok"
    lines = [header]
    print(header, flush=True)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="threads-bench-") as scratch:
        for case in cases:
            folder = Path(scratch) / case.tool
            folder.mkdir()
            r = measure(case, args.reps, folder)
            (dw, dc), (sw, sc) = r["default"], r["j1"]
            ok = dw <= 1.10 * sw
            failed += not ok
            line = (
                f"{case.tool:<14}{r['runs']:>6}{dw:>10.2f}{sw:>9.2f}{dw / sw:>8.2f}{dc:>9.2f}{sc:>8.2f}"
                f"{dc / sc:>7.2f}  {'yes' if ok else 'NO'}"
            )
            lines.append(line)
            print(line, flush=True)
    load_after = os.getloadavg()[0]
    notes = [
        "",
        f"default = no -j (the tool's default: all {os.cpu_count()} cores unless its -j help says otherwise, e.g. "
        "chess-wm 1 torch thread, cbf-fit the idle cores); j1 = -j 1; medians of interleaved pairs after a warm-up run;",
        "wall_x, cpu_x = default / j1 (wall: the criterion, <= 1.10; CPU: user + sys of the process tree).",
        f"1-minute load average {load_before:.1f} before, {load_after:.1f} after, on {os.cpu_count()} cores.",
        "",
        "workloads (bench/threads/cases.py):",
        *[f"  {c.tool}: {c.command.format(j='')}  [{c.region}]" for c in cases],
        "not measured:",
        *[f"  {tool}: {why}" for tool, why in NOT_MEASURED.items()],
    ]
    finish(lines, notes, args.output, not args.tools)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
