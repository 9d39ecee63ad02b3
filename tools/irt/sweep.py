"""The simulation study driver: expand a grid, run every (cell, rep, estimator), append JSONL rows.

A grid (TOML or JSON) has scalars `seed`, `reps`, `mask` (fraction of cells held out MCAR for
the predictive metrics) and `time_limit`, `linking` (the scale alignment before scoring:
"mean-sigma", "stocking-lord", or a list of both: the first gives the plain metric columns,
each further one repeats the scale-dependent metrics with a prefix, ms_ or sl_), a table `cells` whose values are scalars or lists
(their product is the set of cells; keys are DrawSpec fields) and a table `estimators`
mapping each method to its settings. Data for a (cell, rep) come from one SeedSequence child
keyed by a hash of the cell and the rep, so every estimator of a rep sees the same matrix,
whatever the order or the machine. Rows are appended with fsync as tasks finish; a rerun skips
the keys already present (resume). Tasks run on Dask: an in-process local cluster by default,
any scheduler address for a real cluster, or `sync` for a plain loop.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import time
import tomllib
import traceback
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import DataError
from methodkit.tools.irt import estimators as est_mod
from methodkit.tools.irt import evaluate
from methodkit.tools.irt.data import MISSING
from methodkit.tools.irt.simulate import DrawSpec, draw

CELL_FIELDS = {f.name for f in dataclasses.fields(DrawSpec)}
# column prefix of the metrics under a further linking (the first one listed is unprefixed)
LINK_PREFIX = {"mean-sigma": "ms_", "stocking-lord": "sl_"}
# rough seconds per unit of work, measured on a loaded 2-core machine (for --dry-run only)
_COST = {"mml": (0.5, 1.5e-5), "mcmc": (1.0, 6e-8), "vi": (1.0, 1.2e-7), "psn": (1.0, 4e-6)}


@dataclass
class Grid:
    cells: list[dict]
    estimators: dict[str, dict]
    reps: int = 1
    seed: int = 0
    mask: float = 0.1
    time_limit: float | None = None
    linking: tuple[str, ...] = ("mean-sigma",)
    model: str = "2pl"
    source: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    cell: dict
    rep: int
    estimator: str

    @property
    def key(self) -> str:
        return json.dumps({"cell": self.cell, "rep": self.rep, "estimator": self.estimator}, sort_keys=True)


def parse_grid(text: str, name: str, fmt: str | None = None) -> Grid:
    """Read a grid document (TOML by default, JSON when it starts with '{' or fmt == 'json')."""
    try:
        doc = json.loads(text) if (fmt == "json" or text.lstrip().startswith("{")) else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise DataError(f"{name}: not a valid TOML/JSON grid ({exc})") from None
    cells = doc.get("cells")
    estimators = doc.get("estimators")
    if not isinstance(cells, dict) or not isinstance(estimators, dict) or not estimators:
        raise DataError(f"{name}: a grid needs a [cells] table and a non-empty [estimators] table")
    unknown = set(cells) - CELL_FIELDS
    if unknown:
        raise DataError(
            f"{name}: unknown cell field(s) {', '.join(sorted(unknown))} (known: {', '.join(sorted(CELL_FIELDS))})"
        )
    for method, options in estimators.items():
        if method not in est_mod.METHODS:
            raise DataError(f"{name}: unknown estimator '{method}' (known: {', '.join(est_mod.METHODS)})")
        if not isinstance(options, dict):
            raise DataError(f"{name}: [estimators.{method}] must be a table of settings")
        fields = {f.name for f in dataclasses.fields(est_mod.SETTINGS[method])}
        bad = set(options) - fields
        if bad:
            raise DataError(
                f"{name}: unknown {method} setting(s) {', '.join(sorted(bad))} (known: {', '.join(sorted(fields))})"
            )
    linking = doc.get("linking", "mean-sigma")
    linking = tuple(linking) if isinstance(linking, list) else (linking,)
    bad = [x for x in linking if x not in evaluate.LINKINGS] or ([] if linking else ["(empty list)"])
    if bad or len(set(linking)) != len(linking):
        raise DataError(
            f"{name}: linking must be one of {', '.join(evaluate.LINKINGS)} or a list of distinct ones, "
            f"got {', '.join(map(str, bad or linking))}"
        )
    keys = sorted(cells)
    values = [v if isinstance(v, list) else [v] for v in (cells[k] for k in keys)]
    expanded = [dict(zip(keys, combo)) for combo in itertools.product(*values)]
    for cell in expanded:
        DrawSpec(**cell).check()
    try:
        return Grid(
            cells=expanded,
            estimators=estimators,
            reps=int(doc.get("reps", 1)),
            seed=int(doc.get("seed", 0)),
            mask=float(doc.get("mask", 0.1)),
            time_limit=None if doc.get("time_limit") is None else float(doc["time_limit"]),
            linking=linking,
            source=doc,
        )
    except (TypeError, ValueError) as exc:
        raise DataError(f"{name}: reps, seed, mask and time_limit must be numbers ({exc})") from None


def tasks(grid: Grid) -> list[Task]:
    return [Task(c, r, e) for c in grid.cells for r in range(grid.reps) for e in grid.estimators]


def _cell_hash(cell: dict) -> int:
    digest = hashlib.sha256(json.dumps(cell, sort_keys=True).encode()).digest()
    return int.from_bytes(digest[:4], "little")


def seeds(grid: Grid, cell: dict, rep: int):
    """(data, mask, estimator) SeedSequences of one (cell, rep): shared by all its estimators."""
    base = (_cell_hash(cell), rep)
    return tuple(np.random.SeedSequence(grid.seed, spawn_key=(*base, k)) for k in range(3))


def draw_cell(grid: Grid, cell: dict, rep: int):
    """The (cell, rep) data and the mask of held-out cells (True = held out)."""
    data_seed, mask_seed, _ = seeds(grid, cell, rep)
    data = draw(DrawSpec(**cell), data_seed)
    rng = np.random.Generator(np.random.PCG64(mask_seed))
    mask = (rng.random(data.Y.shape) < grid.mask) if grid.mask > 0 else np.zeros(data.Y.shape, bool)
    return data, mask


def run_task(grid: Grid, task: Task) -> dict:
    """Draw, mask, fit, score: one JSONL row (a failure becomes status 'error' with its message)."""
    model = task.cell.get("model", "2pl")
    started, cpu_started = time.monotonic(), time.process_time()
    row = {
        "key": task.key,
        **{f"cell_{k}": v for k, v in task.cell.items()},
        "rep": task.rep,
        "estimator": task.estimator,
    }
    try:
        data, mask = draw_cell(grid, task.cell, task.rep)
        fit_data = data.subset()
        fit_data.Y = np.where(mask, MISSING, data.Y).astype(np.uint8)
        settings = est_mod.make_settings(task.estimator, **grid.estimators[task.estimator])
        result = est_mod.run(
            fit_data,
            model,
            task.estimator,
            settings,
            seed=seeds(grid, task.cell, task.rep)[2],
            time_limit=grid.time_limit,
        )
        info = {k: v for k, v in result.info.items() if not isinstance(v, (dict, list))}
        row.update(info)
        first, *others = grid.linking
        row.update(evaluate.evaluate(result.estimate, data, model, Y_full=data.Y, mask=mask, linking=first))
        for name in others:  # scale-dependent metrics again under each further linking, prefixed
            extra = evaluate.evaluate(result.estimate, data, model, linking=name)
            prefix = LINK_PREFIX[name]
            row.update({prefix + k: v for k, v in extra.items() if k not in evaluate.LINK_FREE and k != "linking"})
    except MemoryError:
        row.update(status="oom", error="out of memory")
    except Exception as exc:  # a failed fit is a result of the study, not the end of the sweep
        row.update(status="error", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc(limit=3))
    # the whole task (draw + fit + scoring); CPU is per process, exact with one task per worker thread
    row.update(
        task_seconds=round(time.monotonic() - started, 4),
        task_cpu_seconds=round(time.process_time() - cpu_started, 4),
    )
    return row


def estimate_seconds(grid: Grid, todo: list[Task]) -> float:
    total = 0.0
    for task in todo:
        n = task.cell.get("n_models", 100)
        j = task.cell.get("n_items") or 1000
        base, per = _COST[task.estimator]
        options = grid.estimators[task.estimator]
        if task.estimator == "mcmc":
            per *= options.get("chains", 2) * (options.get("warmup", 1000) + options.get("draws", 1000)) * 4
        elif task.estimator == "vi":
            per *= options.get("steps", 2000)
        total += base + per * n * j
    return total


def done_keys(path: str) -> set[str]:
    """Keys already in the results file (resume); a torn last line (crash mid-write) is ignored."""
    if path == "-" or not os.path.exists(path):
        return set()
    keys = set()
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                keys.add(json.loads(line)["key"])
            except (json.JSONDecodeError, KeyError, TypeError):
                continue
    return keys


def append_row(handle, row: dict) -> None:
    from methodkit.core.io import dumps_json

    handle.write(dumps_json(row) + "\n")
    handle.flush()
    os.fsync(handle.fileno())


def execute(grid: Grid, todo: list[Task], sink, *, scheduler: str = "local", callback=None) -> int:
    """Run `todo` and hand each row to `sink(row)` as it finishes; returns the number of rows."""
    total = len(todo)
    if callback is not None:
        callback("sweep", 0, total)
    if scheduler == "sync" or total == 0:
        for i, task in enumerate(todo, start=1):
            sink(run_task(grid, task))
            if callback is not None:
                callback("sweep", i, total)
        return total
    from methodkit.core.dask_client import dask_client

    # one in-process worker thread: Numba and torch parallelise inside each fit
    local = {"processes": False, "n_workers": 1, "threads_per_worker": 1, "dashboard_address": None}
    with dask_client(scheduler, "irt", **local) as (distributed, client):
        futures = [client.submit(run_task, grid, task, pure=False) for task in todo]
        for i, future in enumerate(distributed.as_completed(futures), start=1):
            sink(future.result())
            if callback is not None:
                callback("sweep", i, total)
    return total
