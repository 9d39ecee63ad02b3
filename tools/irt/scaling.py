"""The scalability study (claim 4): time and memory of each estimator against the number of items J.

Each (J, estimator) fit runs as its own `irt-fit fit` process on one `irt-sim draw` matrix, so its
peak RSS is its own and its CPU time can be read from the child's rusage; a CPU-time budget
(`--cpu-limit`: on a shared machine wall time measures the other jobs) turns a fit that cannot
finish into status `timeout`, recorded as infeasible at that budget with the iterations it reached. Slopes are least-squares fits of log(CPU seconds) on log(J) over the fits that
finished; a slope needs at least two finished sizes.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from methodkit.core.errors import UsageError

# estimator-specific flags of a scalability run (MCMC as in the acceptance grid: 2 x (500 + 500))
METHOD_ARGS = {
    "mml": [],
    "mcmc": ["--chains", "2", "--warmup", "500", "--draws", "500"],
    "vi": [],
    "psn": [],
}
# a probe runs each fit twice, short and three times longer: the CPU difference over the iteration
# difference is the marginal cost per iteration (free of the fixed cost of a fit: torch import,
# set-up), and the short run's CPU plus that cost times the remaining iterations projects the full
# fit. MML's cycle count depends on convergence: no probe. PSN's 50 epochs are its maximum: an
# upper bound.
PROBE_ARGS = {
    "mcmc": (
        ["--chains", "2", "--warmup", "10", "--draws", "10"],
        ["--chains", "2", "--warmup", "30", "--draws", "30"],
    ),
    "vi": (["--steps", "20"], ["--steps", "60"]),
    "psn": (["--epochs", "1", "--patience", "100"], ["--epochs", "3", "--patience", "100"]),
}
FULL_ITERATIONS = {"mcmc": 2 * (500 + 500), "vi": 2000, "psn": 50}


def projected_cpu(method: str, short: tuple[float, int], long: tuple[float, int]) -> float | None:
    """Full-fit CPU seconds from two probes (cpu_seconds, iterations) of different lengths."""
    (c1, n1), (c2, n2) = short, long
    if n2 <= n1:
        return None
    per_iteration = max(c2 - c1, 0.0) / (n2 - n1)
    return c1 + per_iteration * (FULL_ITERATIONS[method] - n1)


def iterations_done(method: str, info: dict) -> int | None:
    """Iterations a fit ran, in the unit of FULL_ITERATIONS (MCMC: over all chains)."""
    n = info.get("n_iter")
    if not n:
        return None
    return n * int(info.get("chains_run") or 1) if method == "mcmc" else int(n)


@dataclass
class ScalingRow:
    estimator: str
    n_models: int
    n_items: int
    status: str
    wall_s: float
    cpu_s: float
    fit_seconds: float | None
    fit_cpu_seconds: float | None
    projected_cpu_s: float | None
    peak_rss_mb: float | None
    n_iter: int | None
    exit_code: int


def loglog_slope(sizes, seconds) -> float | None:
    """Least-squares slope of log(seconds) on log(size); None with fewer than two distinct sizes."""
    x, y = np.log(np.asarray(sizes, float)), np.log(np.asarray(seconds, float))
    ok = np.isfinite(x) & np.isfinite(y)
    if len(np.unique(x[ok])) < 2:
        return None
    return float(np.polyfit(x[ok], y[ok], 1)[0])


def slopes(rows: list[ScalingRow]) -> dict[str, float | None]:
    """Per estimator: the log-log slope of CPU seconds against J over its finished (status ok) fits.

    The CPU inside the fit (fit.json cpu_seconds) when known: the process start (imports) is a
    fixed cost that would flatten the slope; a probe row counts with its projected full-fit CPU."""
    out = {}
    for est in dict.fromkeys(r.estimator for r in rows):
        done = [r for r in rows if r.estimator == est and r.status == "ok"]
        cost = [r.projected_cpu_s or r.fit_cpu_seconds or r.cpu_s for r in done]
        out[est] = loglog_slope([r.n_items for r in done], cost)
    return out


def _exe(name: str) -> str:
    """The executable installed next to this interpreter (its venv), else the one on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise UsageError(f"{name} is not on PATH (install methodkit first)")
    return found


def _child(cmd: list[str], timeout: float | None) -> tuple[int, float, float]:
    """Run cmd; (exit code, wall seconds, CPU seconds of the child and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    try:
        code = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        code = 124
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return code, wall, cpu


def run_study(
    sizes,
    methods=("mml", "mcmc", "vi", "psn"),
    *,
    n_models: int = 200,
    cpu_limit: float = 120.0,
    hang_limit: float = 3600.0,
    threads: int = 1,
    workdir: str | os.PathLike,
    profile: str = "mmlu",
    seed: int = 0,
    extra: dict[str, list[str]] | None = None,
    probe: bool = False,
    callback=None,
) -> list[ScalingRow]:
    """Draw one N x J matrix per size, fit it with every method in a fresh process, collect the rows.

    With `probe`, MCMC, VI and PSN run the two PROBE_ARGS fits and each row (the longer probe's
    figures) carries the projected CPU seconds of the full fit; MML is skipped."""
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    sim, fit = _exe("irt-sim"), _exe("irt-fit")
    rows: list[ScalingRow] = []
    for J in sizes:
        data = work / f"data_J{J}.npz"
        subprocess.run(
            [sim, "draw", "--profile", profile, "--n-items", str(J), "--n-models", str(n_models),
             "--seed", str(seed), "-o", str(data), "--force", "-q"],
            check=True,
        )  # fmt: skip
        for method in methods:
            if probe and method not in PROBE_ARGS:
                continue
            runs = PROBE_ARGS[method] if probe else (METHOD_ARGS.get(method, []),)
            results = []
            for k, base in enumerate(runs):
                out = work / f"fit_J{J}_{method}_{k}"
                args = list(base) + (extra or {}).get(method, [])
                cmd = [fit, "fit", str(data), "--method", method, "--out-dir", str(out), "--force", "-q",
                       "-j", str(threads), "--cpu-limit", str(cpu_limit), "-o", "-", *args]  # fmt: skip
                # the child stops itself at its CPU budget; the wall-clock timeout only catches a hang
                code, wall, cpu = _child(cmd, timeout=hang_limit)
                info = json.loads((out / "fit.json").read_text()) if (out / "fit.json").exists() else {}
                results.append((code, wall, cpu, info))
            code, wall, cpu, info = results[-1]
            status = info.get("status") or ("timeout" if code == 124 else "error")
            projected = None
            if probe and all(r[3].get("status") == "ok" for r in results):
                points = [(r[3]["cpu_seconds"], iterations_done(method, r[3]) or 0) for r in results]
                value = projected_cpu(method, points[0], points[1])
                projected = None if value is None else round(value, 1)
            rows.append(
                ScalingRow(
                    estimator=method,
                    n_models=n_models,
                    n_items=int(J),
                    status=status,
                    wall_s=round(wall, 2),
                    cpu_s=round(cpu, 2),
                    fit_seconds=info.get("seconds"),
                    fit_cpu_seconds=info.get("cpu_seconds"),
                    projected_cpu_s=projected,
                    peak_rss_mb=info.get("peak_rss_mb"),
                    n_iter=info.get("n_iter"),
                    exit_code=code,
                )
            )
            if callback is not None:
                callback(rows[-1])
    return rows


def to_dicts(rows: list[ScalingRow]) -> list[dict]:
    return [asdict(r) for r in rows]
