"""`sweep`: the attack over an eps grid × seeds, with baselines (issue §2.6).

The effect of eps is not monotone: a tree only notices a row when it crosses a
split threshold, and a larger ellipsoid also admits more of the box and lattice
clipping. Each row of the result reports the thresholds the poisoned rows crossed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

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


def run(
    problem_for_seed: Callable[[int], Problem],
    victim_for_seed: Callable[[int], Victim],
    config: attack.AttackConfig,
    grid: list[float],
    seeds: list[int],
    baselines: list[str],
    progress: ProgressCallback = silent,
) -> SweepResult:
    """Every (eps, seed) for ours and each baseline; each run is a full attack with a true retrain."""
    grid, warnings = check_grid(grid)
    for name in baselines:
        if name not in BASELINES:
            raise UsageError(f"--baselines: unknown '{name}' (choose from {', '.join(BASELINES)})")
    methods = [(config.influence, config.dim_rank)] + [BASELINES[b] for b in baselines]
    total = len(grid) * len(seeds) * len(methods)
    done = 0
    progress("attacks", 0, total)
    rows = []
    for seed in seeds:
        problem = problem_for_seed(seed)
        victim = victim_for_seed(seed)
        for eps in grid:
            for selection, ranking in methods:
                cfg = replace(config, eps=eps, seed=seed, influence=selection, dim_rank=ranking)
                result = attack.run(problem, victim, cfg)
                warnings += [w for w in result.warnings if w not in warnings]
                s = result.summary()
                rows.append(
                    {
                        "eps": eps,
                        "seed": seed,
                        "method": s["method"],
                        "val_f1": s["poisoned"]["val_f1"],
                        "test_f1": s["poisoned"].get("test_f1"),
                        "test_acc": s["poisoned"].get("test_acc"),
                        "n_poison": s["n_poison"],
                        "mean_maha": s["mean_maha"],
                        "runtime_s": round(result.seconds, 3),
                        "clean_val_f1": s["clean"]["val_f1"],
                        "clean_test_f1": s["clean"].get("test_f1"),
                        "thresholds_crossed": s["thresholds_crossed"],
                        "feasible_fraction": s["feasible_fraction"],
                    }
                )
                done += 1
                progress("attacks", done, total)
    return SweepResult(rows, warnings)
