"""Size and power curves: the rejection rate of each method over n, on a geometry or on row
subsamples of real data (with y permuted for a size study)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.core.progress import silent
from methodkit.tools.pls import api
from methodkit.tools.pls.data import Design, from_arrays
from methodkit.tools.pls.simulate import simulate


@dataclass
class Scenario:
    geometry: str | None = "toeplitz0.5"
    p: int = 50
    active: int = 5
    snr: float = 0.3
    data: Design | None = None  # real data: subsample rows instead of simulating
    null: bool = False  # real data: permute y (size); simulated: snr is forced to 0


def draw(scenario: Scenario, n: int, rng: np.random.Generator) -> Design:
    if scenario.data is not None:
        d = scenario.data
        if n > d.n:
            raise UsageError(f"-n {n} exceeds the {d.n} rows of {d.source}")
        rows = np.sort(rng.choice(d.n, size=n, replace=False))
        y = d.y[rows]
        if scenario.null:
            y = rng.permutation(y)
        return from_arrays(d.X[rows], y, d.source, d.names)
    snr = 0.0 if scenario.null else scenario.snr
    X, y = simulate(scenario.geometry, n, scenario.p, active=scenario.active, snr=snr, rng=rng)
    return from_arrays(X, y, f"sim:{scenario.geometry}")


@dataclass
class CurvePoint:
    method: str
    n: int
    reps: int
    rejected: int
    power: float
    se: float
    mean_seconds: float
    mean_fits: float


def replication(scenario: Scenario, n: int, child: np.random.SeedSequence, method_list, K, options) -> list:
    """One replication: draw data from `child`, run every method; (rejected, seconds, fits) per method.

    Everything random comes from `child`, so the result does not depend on where or when it runs.
    """
    design = draw(scenario, n, np.random.default_rng(child))
    test_seed = int(child.generate_state(1)[0])
    out = []
    for m in method_list:
        res = api.run(design, [K], replace(options, method=m, seed=test_seed))[0]
        out.append((int(res.pvalue <= options.alpha), res.seconds, res.n_fits))
    return out


def curves(
    scenario: Scenario,
    ns: list[int],
    method_list: list[str],
    K: int,
    reps: int,
    options: api.Options,
    progress=silent,
    scheduler: str = "sync",
    workers: int | None = None,
    processes: bool = True,
) -> list[CurvePoint]:
    """Rejection rate at options.alpha for each (method, n); each rep draws fresh data and seeds.

    scheduler: 'sync' (a plain loop), 'local' (a Dask LocalCluster of `workers` processes, or
    threads with processes=False) or a Dask scheduler address. Same seed, same tallies on any.
    """
    if reps < 1:
        raise UsageError(f"--reps must be >= 1, got {reps}")
    tasks = [(n, child) for i, n in enumerate(ns) for child in np.random.SeedSequence([options.seed, i, n]).spawn(reps)]
    args = (method_list, K, options)
    if scheduler == "sync":
        progress("replications", 0, len(tasks))
        results = []
        for done, (n, child) in enumerate(tasks, start=1):
            results.append(replication(scenario, n, child, *args))
            progress("replications", done, len(tasks))
    else:
        results = _on_dask(scenario, tasks, args, scheduler, workers, processes, progress)
    tallies: dict[tuple[str, int], list] = {(m, n): [0, 0.0, 0.0] for m in method_list for n in ns}
    for (n, _), per_method in zip(tasks, results):
        for m, (rejected, seconds, fits) in zip(method_list, per_method):
            t = tallies[(m, n)]
            t[0] += rejected
            t[1] += seconds
            t[2] += fits
    out = []
    for (m, n), (rej, secs, fits) in tallies.items():
        power = rej / reps
        out.append(
            CurvePoint(m, n, reps, rej, power, float(np.sqrt(power * (1 - power) / reps)), secs / reps, fits / reps)
        )
    return out


def _on_dask(scenario, tasks, args, scheduler, workers, processes, progress) -> list:
    """Run the replications as Dask tasks; results come back in task order whatever order they finish."""
    from methodkit.core.dask_client import dask_client

    local = {"n_workers": workers or 2, "threads_per_worker": 1, "processes": processes, "dashboard_address": ":0"}
    with dask_client(scheduler, "pls", **local) as (distributed, client):
        shared = client.scatter(scenario, broadcast=True)
        futures = [client.submit(_replication_one_thread, shared, n, child, *args, pure=False) for n, child in tasks]
        index = {future.key: i for i, future in enumerate(futures)}
        results: list = [None] * len(tasks)
        progress("replications", 0, len(tasks))
        for done, future in enumerate(distributed.as_completed(futures), start=1):
            results[index[future.key]] = future.result()
            progress("replications", done, len(tasks))
        return results


def _replication_one_thread(*args):
    """A worker runs one replication per thread: no nested BLAS/Numba threads."""
    import numba
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(1)
    with threadpool_limits(limits=1):
        return replication(*args)


def n_for_power(points: list[CurvePoint], method: str, target: float = 0.8) -> float | None:
    """n where the power curve first reaches `target`, linearly interpolated (None if never)."""
    pts = sorted((p.n, p.power) for p in points if p.method == method)
    for (n0, p0), (n1, p1) in zip(pts, pts[1:]):
        if p0 < target <= p1:
            return n0 + (target - p0) * (n1 - n0) / (p1 - p0)
    if pts and pts[0][1] >= target:
        return float(pts[0][0])
    return None
