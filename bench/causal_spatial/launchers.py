"""Ramps and bouncing walls against drag-free ballistics (tools/causal_spatial/launchers.py).

1. Restitution: a 3 cm ball hits a wall carrying "restitution": e horizontally at v, without gravity;
   the normal speed out over in, against e (MuJoCo's default contact for comparison).
2. Generated trajectory items (tasks.trajectory, seeds 0..N-1 per level): the simulated first landing's
   distance along the path against the ballistic prediction the speed was aimed with, per launcher and
   level, for the kept items, and the draws rejected because the simulated mat differed (aim_missed).
Writes bench/causal_spatial/launchers.txt.
usage: nice -n 5 .venv/bin/python -P bench/causal_spatial/launchers.py [--draws 200]
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import numpy as np

from methodkit.core.render import gl

gl.select("none")

from methodkit.tools.causal_spatial import physics, scenes, tasks  # noqa: E402

HERE = Path(__file__).resolve().parent


def rebound(e, v):
    spec = scenes.base_spec(64, scenes.camera((0, 0, 0), 1.0, 30, 0))
    spec["gravity"] = [0.0, 0.0, 0.0]  # the normal speed alone (slow balls would reach the floor first)
    wall = {"name": "wall", "type": "box", "size": [0.03, 0.5, 0.26], "pos": [0.5, 0.0, 0.13], "fixed": True}
    if e is not None:
        wall["restitution"] = e
    spec["objects"] = [wall, {"name": "ball", "type": "sphere", "radius": 0.03, "pos": [0.35, 0.0, 0.15],
                              "velocity": [v, 0.0, 0.0], "mass": 0.05, "friction": 0.8}]  # fmt: skip
    sc = physics.compile_spec(spec)
    data = sc.new_data()
    touched = False
    for _ in range(600):
        physics.mujoco.mj_step(sc.model, data)
        if data.ncon:
            touched = True
        elif touched:
            break
    return -float(data.qvel[sc.objects["ball"].free_qvel]) / v


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--out", default=str(HERE / "launchers.txt"))
    a = ap.parse_args()
    lines = ["# 1. rebound: normal speed out / in for a wall with restitution e, ball speeds 0.5, 1, 2, 3 m/s",
             "e  v=0.5  v=1  v=2  v=3"]  # fmt: skip
    for e in (None, 0.3, 0.5, 0.7, 0.9):
        lines.append(f"{e if e is not None else 'default'}  " + "  ".join(f"{rebound(e, v):.3f}" for v in (0.5, 1, 2, 3)))
    lines += ["", f"# 2. generated trajectory items, {a.draws} draws per level: |simulated - ballistic landing| along"
              " the path (m), kept items; aim_missed = draws whose simulated mat was not the aimed one",
              "level  launcher  kept  median_err  p90_err  max_err  same_mat"]  # fmt: skip
    s = tasks.Settings(size=64)
    for level in (1, 2):
        errs, same = collections.defaultdict(list), collections.defaultdict(int)
        rejects = collections.Counter()
        for k in range(a.draws):
            try:
                d = tasks.trajectory(np.random.default_rng(k), level, k % (2 + level), s, 3)
            except tasks.Reject as r:
                rejects[str(r)] += 1
                continue
            errs[d.gt["launcher"]].append(abs(d.gt["landing_s"] - d.gt["ballistic_range"]))
            same[d.gt["launcher"]] += d.gt["landing_mat"] == d.gt["mat_order"][d.gt["ballistic_mat"]]
        for launcher, x in sorted(errs.items()):
            x = np.asarray(x)
            lines.append(f"{level}  {launcher}  {len(x)}  {np.median(x):.4f}  {np.percentile(x, 90):.4f}  {x.max():.4f}"
                         f"  {same[launcher] / len(x):.3f}")  # fmt: skip
        lines.append(f"{level}  rejections  {dict(sorted(rejects.items()))}")
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
