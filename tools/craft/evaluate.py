"""Closed-loop benchmark of a policy (greedy: the argmax candidate each second) over a suite.

backend "numba" drives the batched simulator of core.sim.highway; "highway-env" drives the
same greedy policy, on the same scenes, in highway-env 1.12.1 itself
(core.sim.highway.highway_env_plan: its traffic, this simulator's observation and plan
controller), scored by the same metrics: the parity check of the simulator under a policy.
"""

from __future__ import annotations

import numpy as np

from methodkit.core.sim.highway import metrics
from methodkit.tools.craft import collect, suites

BATCH = 64
BACKENDS = ("numba", "highway-env")


def run(model, routes, scenes=None, backend: str = "numba", progress=None) -> dict:
    """{"rows": per-route metrics, "summary": DS, RC, SR, infractions, per-family DS/SR}."""
    if scenes is None:
        scenes, ids = suites.scenes(routes)
    else:
        scenes, ids = scenes
    families = [r["family"] for r in routes]
    if backend == "highway-env":
        rows = run_highway_env(model, scenes, ids, families, progress)
        return {"rows": rows, "summary": summarize(rows)}
    if backend != "numba":
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}")
    rows = []
    for start in range(0, len(scenes), BATCH):
        part = slice(start, start + BATCH)
        out = collect.run(model, scenes[part], ids[part], families[part], sample=False, keep=False)
        rows.extend(out.rows)
    return {"rows": rows, "summary": summarize(rows)}


def run_highway_env(model, scenes, ids, families, progress=None) -> list[dict]:
    """Per-route rows of the greedy policy driving the ego in highway-env, one route at a time."""
    from methodkit.core.errors import require
    from methodkit.core.sim.highway import highway_env_plan, suite

    require("highway_env", "craft")

    def greedy(sim, running):
        return collect.choose(model, sim, running)[2]

    rows = []
    for k, (scene, route_id, family) in enumerate(zip(scenes, ids, families, strict=True)):
        record = highway_env_plan.run(scene, greedy)
        rows.append(collect.route_row(route_id, family, suite.exit_route_metrics(record)))
        if progress is not None:
            progress("highway-env routes", k + 1, len(scenes))
    return rows


def summarize(rows: list[dict]) -> dict:
    ds = np.array([r["ds"] for r in rows])
    out = {
        "routes": len(rows),
        "ds": float(ds.mean()),
        "rc": float(np.mean([r["rc"] for r in rows])),
        "sr": 100.0 * float(np.mean([r["success"] for r in rows])),
        "efficiency": float(np.nanmean([r["efficiency"] for r in rows])) if rows else float("nan"),
        "comfort": float(np.nanmean([r["comfort"] for r in rows])) if rows else float("nan"),
        "infractions": {k[2:]: int(sum(r[k] for r in rows)) for k in rows[0] if k.startswith("n_")} if rows else {},
        "families": {},
    }
    for family in dict.fromkeys(r["family"] for r in rows):
        sel = [r for r in rows if r["family"] == family]
        out["families"][family] = {
            "routes": len(sel),
            "ds": float(np.mean([r["ds"] for r in sel])),
            "ds_std": float(np.std([r["ds"] for r in sel])),
            "sr": 100.0 * float(np.mean([r["success"] for r in sel])),
        }
    return out


__all__ = ["run", "summarize", "metrics"]
