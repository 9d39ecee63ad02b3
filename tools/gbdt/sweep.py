"""`sweep`: the attack over an eps grid × seeds, with baselines (issue §2.6).

The effect of eps is not monotone: a tree only notices a row when it crosses a
split threshold, and a larger ellipsoid also admits more of the box and lattice
clipping. Each row of the result reports the thresholds the poisoned rows crossed.

Runs are independent tasks (seed, eps, method) in a fixed order. They run in a
plain loop (`sync`) or on Dask (`local`: an in-process cluster of threads, since
LightGBM releases the GIL; or a scheduler address); the rows come back in task
order, so every scheduler writes the same table. Each finished row is handed to
`on_row` (the CLI keeps them in OUTPUT.partial.json) and rows already `done` are
skipped: an interrupted sweep resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.core.progress import ProgressCallback, silent
from methodkit.tools.gbdt import attack
from methodkit.tools.gbdt.data import Problem
from methodkit.tools.gbdt.victim import Victim

DEFAULT_GRID = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
# baseline name -> (influence, dim-rank) replacing ours
BASELINES = {"random": ("random", "random"), "loss": ("loss", "gain"), "random-rows": ("random", "gain")}
COLUMNS = [
    "eps",
    "seed",
    "method",
    "val_f1",
    "test_f1",
    "test_acc",
    "n_poison",
    "mean_maha",
    "runtime_s",
    "clean_val_f1",
    "clean_test_f1",
    "thresholds_crossed",
    "feasible_fraction",
]


@dataclass
class SweepResult:
    rows: list[dict]
    warnings: list[str] = field(default_factory=list)

    def frame(self):
        import pandas as pd

        return pd.DataFrame(self.rows, columns=COLUMNS)

    def curve(self) -> dict:
        """Mean test (else val) F1 drop per method and eps, and whether ours is monotone in eps."""
        frame = self.frame()
        key = "test_f1" if frame["test_f1"].notna().all() else "val_f1"
        frame["drop"] = frame[f"clean_{key}"] - frame[key]
        out = {"metric": key, "methods": {}}
        for method, part in frame.groupby("method", sort=False):
            means = part.groupby("eps")["drop"].mean()
            steps = np.diff(means.to_numpy())
            out["methods"][method] = {
                "mean_drop": {str(e): float(d) for e, d in means.items()},
                "monotone": bool(np.all(steps >= 0)),
            }
        return out

    def to_dict(self) -> dict:
        return {"rows": self.rows, "curve": self.curve(), "warnings": self.warnings}


def check_grid(grid: list[float]) -> tuple[list[float], list[str]]:
    if not grid:
        raise UsageError("--eps-grid is empty")
    if any(not e > 0 for e in grid):
        raise UsageError("--eps-grid values must be > 0")
    warnings = []
    if list(grid) != sorted(grid):
        warnings.append("--eps-grid is not increasing; sorted")
    return sorted(set(grid)), warnings


@dataclass(frozen=True)
class Task:
    seed: int
    eps: float
    influence: str
    dim_rank: str

    @property
    def key(self) -> str:
        return f"{self.eps}|{self.seed}|{self.influence}+{self.dim_rank}"


def tasks(config: attack.AttackConfig, grid: list[float], seeds: list[int], baselines: list[str]) -> list[Task]:
    """Every (seed, eps, method) of the sweep, in the order the table lists them."""
    for name in baselines:
        if name not in BASELINES:
            raise UsageError(f"--baselines: unknown '{name}' (choose from {', '.join(BASELINES)})")
    methods = [(config.influence, config.dim_rank)] + [BASELINES[b] for b in baselines]
    return [Task(seed, eps, sel, rank) for seed in seeds for eps in grid for sel, rank in methods]


def fingerprint(config: attack.AttackConfig, grid, seeds, baselines, data_key: str) -> str:
    """What a partial sweep must share with the rerun that resumes it (config, grid, data)."""
    fixed = {k: v for k, v in asdict(config).items() if k not in ("eps", "seed", "influence", "dim_rank", "workers")}
    doc = {"config": fixed, "grid": list(grid), "seeds": list(seeds), "baselines": list(baselines), "data": data_key}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def run_task(problem: Problem, victim: Victim, config: attack.AttackConfig, task: Task) -> tuple[dict, list[str]]:
    """One full attack (true retrain at the end) -> its table row and warnings."""
    cfg = replace(config, eps=task.eps, seed=task.seed, influence=task.influence, dim_rank=task.dim_rank)
    result = attack.run(problem, victim, cfg)
    s = result.summary()
    row = {
        "eps": task.eps,
        "seed": task.seed,
        "method": s["method"],
        "val_f1": s["attacker"]["poisoned"]["val_f1"],
        "test_f1": s["poisoned"].get("test_f1"),
        "test_acc": s["poisoned"].get("test_acc"),
        "n_poison": s["n_poison"],
        "mean_maha": s["mean_maha"],
        "runtime_s": round(result.seconds, 3),
        "clean_val_f1": s["attacker"]["clean"]["val_f1"],
        "clean_test_f1": s["clean"].get("test_f1"),
        "thresholds_crossed": s["thresholds_crossed"],
        "feasible_fraction": s["feasible_fraction"],
    }
    return row, result.warnings


def run(
    problem_for_seed: Callable[[int], Problem],
    victim_for_seed: Callable[[int], Victim],
    config: attack.AttackConfig,
    grid: list[float],
    seeds: list[int],
    baselines: list[str],
    progress: ProgressCallback = silent,
    *,
    scheduler: str = "sync",
    dask_workers: int = 2,
    done: dict[str, dict] | None = None,
    on_row: Callable[[str, dict], None] | None = None,
) -> SweepResult:
    """Every (eps, seed) for ours and each baseline; each run is a full attack with a true retrain.

    `done` maps task keys to rows of an earlier, interrupted sweep (they are not rerun);
    `on_row(key, row)` is called as each new row finishes (in completion order).
    """
    grid, warnings = check_grid(grid)
    todo = tasks(config, grid, seeds, baselines)
    done = dict(done or {})
    total = len(todo)
    progress("attacks", sum(t.key in done for t in todo), total)
    pending = [t for t in todo if t.key not in done]
    problems: dict[int, Problem] = {}
    victims: dict[int, Victim] = {}
    for seed in dict.fromkeys(t.seed for t in pending):
        problems[seed], victims[seed] = problem_for_seed(seed), victim_for_seed(seed)

    def finished(task: Task, row: dict, messages: list[str]) -> None:
        done[task.key] = row
        warnings.extend(w for w in messages if w not in warnings)
        if on_row is not None:
            on_row(task.key, row)
        progress("attacks", sum(t.key in done for t in todo), total)

    if scheduler == "sync":
        for task in pending:
            finished(task, *run_task(problems[task.seed], victims[task.seed], config, task))
    elif pending:
        _on_dask(pending, problems, victims, config, scheduler, dask_workers, finished)
    return SweepResult([done[t.key] for t in todo], warnings)


def _on_dask(pending, problems, victims, config, scheduler, dask_workers, finished) -> None:
    from methodkit.core.dask_client import dask_client

    # threads in this process: LightGBM trains outside the GIL, and nothing is pickled. The scheduler's
    # HTTP server starts even without a dashboard: a free local port avoids a "port 8787 in use" warning
    # when another cluster runs.
    local = {"processes": False, "n_workers": 1, "threads_per_worker": dask_workers, "dashboard_address": "127.0.0.1:0"}
    with dask_client(scheduler, "gbdt", **local) as (distributed, client):
        futures = {}
        for task in pending:
            future = client.submit(
                run_task, problems[task.seed], victims[task.seed], config, task, pure=False, key=f"gbdt-{task.key}"
            )
            futures[future.key] = (future, task)
        for future in distributed.as_completed([f for f, _ in futures.values()]):
            finished(futures[future.key][1], *future.result())
