"""Closed-loop benchmark of a policy (greedy: the argmax candidate each second) over a suite."""

from __future__ import annotations

import numpy as np

from methodkit.core.sim.highway import metrics
from methodkit.tools.craft import collect, suites

BATCH = 64


def run(model, routes, scenes=None) -> dict:
    """{"rows": per-route metrics, "summary": DS, RC, SR, infractions, per-family DS/SR}."""
    if scenes is None:
        scenes, ids = suites.scenes(routes)
    else:
        scenes, ids = scenes
    families = [r["family"] for r in routes]
    rows = []
    for start in range(0, len(scenes), BATCH):
        part = slice(start, start + BATCH)
        out = collect.run(model, scenes[part], ids[part], families[part], sample=False, keep=False)
        rows.extend(out.rows)
    return {"rows": rows, "summary": summarize(rows)}


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
