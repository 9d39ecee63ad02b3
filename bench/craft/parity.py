"""Parity of the two eval backends: one policy, the same routes, in this simulator and in highway-env.

    nice -n 5 .venv/bin/python -P bench/craft/parity.py POLICY.safetensors [SUITE]   (default hwy-mini)

Runs `craft-finetune eval`'s greedy policy over SUITE with --backend numba and --backend
highway-env (core.sim.highway.highway_env_plan) and prints, per family and overall: the DS of
each backend, their difference, the share of routes ending the same way (collision, lane-end
overrun, missed exit, completed, timeout) and the largest per-route |DS difference|, then the
CPU seconds of each backend. Needs methodkit[craft].
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from methodkit.tools.craft import evaluate, policy, suites


def main(path: str, suite: str = "hwy-mini") -> None:
    torch.set_num_threads(1)
    model, _ = policy.load(path)
    routes = suites.builtin(suite)
    scenes = suites.scenes(routes)
    out, seconds = {}, {}
    for backend in evaluate.BACKENDS:
        t0 = time.process_time()
        out[backend] = evaluate.run(model, routes, scenes, backend=backend)["rows"]
        seconds[backend] = time.process_time() - t0
    ours, theirs = out["numba"], out["highway-env"]
    print(f"suite {suite}, policy {path}")
    print(f"{'family':16s} routes  DS numba  DS highway-env  diff  same ending  max |dDS|")
    for family in [*suites.FAMILIES, "all"]:
        sel = [k for k, r in enumerate(ours) if family in ("all", r["family"])]
        a = np.array([ours[k]["ds"] for k in sel])
        b = np.array([theirs[k]["ds"] for k in sel])
        same = np.mean([ours[k]["ended_by"] == theirs[k]["ended_by"] for k in sel])
        print(f"{family:16s} {len(sel):6d}  {a.mean():8.2f}  {b.mean():14.2f}  {b.mean() - a.mean():+5.2f}"
              f"  {100 * same:10.0f}%  {np.abs(a - b).max():9.2f}")  # fmt: skip
    print(f"CPU seconds: numba {seconds['numba']:.1f}, highway-env {seconds['highway-env']:.1f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
