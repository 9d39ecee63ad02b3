"""How fast each executable acts on Ctrl-C in the middle of a long job.

    nice python -P bench/threads/interrupts.py [--reps 3] [--cpu 3] [TOOL ...]   # writes interrupts.txt

For each job of cases.INTERRUPT_JOBS: setup, start the job, wait until it has used `--cpu` seconds of
CPU (so it is past its imports and inside its work), send SIGINT, and time the exit. The contract:
exit 130, `TOOL: interrupted` as the only stderr line, nothing on stdout, no file left behind. The
target is a reaction within about a second; tests/contract/test_interrupts.py holds a loose bound.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cases import INTERRUPT_JOBS, finish  # noqa: E402

BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Outcome:
    tool: str
    code: int | None  # None: still running after the bound (then killed)
    reaction_s: float  # wall seconds from SIGINT to exit
    reaction_cpu: float  # CPU seconds the process used in that time (less sensitive to machine load)
    stdout: bytes
    stderr: bytes
    left: list  # files in the job's folder that were not there before it started
    ended_early: bool = False  # the job finished before it could be interrupted
    resume_state: tuple = ()  # paths (and what is under them) that may stay: the state --resume reads

    def problems(self) -> list[str]:
        """What breaks the contract (empty when it holds)."""
        found = []
        if self.ended_early:
            return [f"ended (exit {self.code}) before it could be interrupted: make the job longer"]
        if self.code != 130:
            found.append(f"exit {self.code}, not 130")
        if self.stderr.decode(errors="replace") != f"{self.tool}: interrupted\n":
            found.append(f"stderr is {self.stderr.decode(errors='replace')[-400:]!r}")
        if self.stdout:
            found.append(f"stdout is {self.stdout[:200]!r}")
        kept = [p for p in self.left if p.split("/")[0] not in self.resume_state]
        if kept:
            found.append(f"left behind: {kept}")
        return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def interrupt(job, folder: Path, cpu: float = 3.0, bound: float = 60.0) -> Outcome:
    """Run `job` in `folder`, SIGINT it after `cpu` CPU seconds, wait at most `bound` seconds."""
    subprocess.run(["bash", "-o", "pipefail", "-c", job.setup], cwd=folder, env=ENV, check=True, capture_output=True)
    before = {p.relative_to(folder) for p in folder.rglob("*")}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [str(BIN / job.argv[0]), *job.argv[1:]],
            cwd=folder,
            env=ENV,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            # a shell's background job (`make test &`) ignores SIGINT, and its children would inherit that
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        while proc.poll() is None and cpu_seconds(proc.pid) < cpu:
            time.sleep(0.05)
        early = proc.poll() is not None
        start = time.monotonic()
        used = cpu_seconds(proc.pid)
        code, total = (proc.returncode, used) if early else _interrupt_and_wait(proc, bound)
        reaction = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    left = sorted(str(p) for p in {p.relative_to(folder) for p in folder.rglob("*")} - before)
    return Outcome(job.tool, code, reaction, max(total - used, 0.0), stdout, stderr, left, early, job.resume_state)


def _interrupt_and_wait(proc, bound: float) -> tuple[int | None, float]:
    """SIGINT `proc`; (exit status or None if it outlived `bound` and was killed, its total CPU seconds)."""
    proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + bound
    code = None
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            code = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    proc.returncode = code if code is not None else -9
    return code, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tools", nargs="*")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cpu", type=float, default=3.0, help="CPU seconds the job runs before SIGINT")
    parser.add_argument("-o", "--output", default=str(HERE / "interrupts.txt"))
    args = parser.parse_args()
    jobs = [j for j in INTERRUPT_JOBS if not args.tools or j.tool in args.tools]
    load_before = os.getloadavg()[0]
    header = f"{'tool':<14}{'reps':>5}{'median_s':>10}{'max_s':>8}{'median_cpu_s':>14}  contract"
    lines = [header]
    print(header, flush=True)
    bad = 0
    for job in jobs:
        outcomes = []
        for _ in range(args.reps):
            with tempfile.TemporaryDirectory(prefix="interrupt-") as folder:
                outcomes.append(interrupt(job, Path(folder), args.cpu))
        problems = sorted({p for o in outcomes for p in o.problems()})
        bad += bool(problems)
        times = [o.reaction_s for o in outcomes]
        cpu = statistics.median(o.reaction_cpu for o in outcomes)
        line = f"{job.tool:<14}{len(times):>5}{statistics.median(times):>10.2f}{max(times):>8.2f}{cpu:>14.2f}  " + (
            "; ".join(problems) if problems else "ok"
        )
        lines.append(line)
        print(line, flush=True)
    notes = [
        "",
        f"SIGINT after {args.cpu:g} s of the job's CPU time; wall seconds from the signal to the exit, and the",
        "CPU seconds the job spent in them (its work per core until it acted on the signal: load-independent).",
        f"1-minute load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores.",
        "jobs (bench/threads/cases.py):",
        *[f"  {' '.join(j.argv)}" for j in jobs],
    ]
    finish(lines, notes, args.output, not args.tools)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
