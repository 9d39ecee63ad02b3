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


def curves(
    scenario: Scenario,
    ns: list[int],
    method_list: list[str],
    K: int,
    reps: int,
    options: api.Options,
    progress=silent,
) -> list[CurvePoint]:
    """Rejection rate at options.alpha for each (method, n); each rep draws fresh data and seeds."""
    if reps < 1:
        raise UsageError(f"--reps must be >= 1, got {reps}")
    tallies: dict[tuple[str, int], list] = {(m, n): [0, 0.0, 0.0] for m in method_list for n in ns}
    total = len(ns) * reps
    done = 0
    progress("replications", 0, total)
    for i, n in enumerate(ns):
        children = np.random.SeedSequence([options.seed, i, n]).spawn(reps)
        for child in children:
            data_rng = np.random.default_rng(child)
            design = draw(scenario, n, data_rng)
            test_seed = int(child.generate_state(1)[0])
            for m in method_list:
                res = api.run(design, [K], replace(options, method=m, seed=test_seed))[0]
                t = tallies[(m, n)]
                t[0] += int(res.pvalue <= options.alpha)
                t[1] += res.seconds
                t[2] += res.n_fits
            done += 1
            progress("replications", done, total)
    out = []
    for (m, n), (rej, secs, fits) in tallies.items():
        power = rej / reps
        out.append(
            CurvePoint(m, n, reps, rej, power, float(np.sqrt(power * (1 - power) / reps)), secs / reps, fits / reps)
        )
    return out


def n_for_power(points: list[CurvePoint], method: str, target: float = 0.8) -> float | None:
    """n where the power curve first reaches `target`, linearly interpolated (None if never)."""
    pts = sorted((p.n, p.power) for p in points if p.method == method)
    for (n0, p0), (n1, p1) in zip(pts, pts[1:]):
        if p0 < target <= p1:
            return n0 + (target - p0) * (n1 - n0) / (p1 - p0)
    if pts and pts[0][1] >= target:
        return float(pts[0][0])
    return None
