"""vesper kernels: `case size ours_s ref_s ratio` (ratio = ref_s / ours_s, measured in the same run).

  raster2d_vs_numpy      core.kernels.raster.raster2d (Numba) against one full-image mask per shape (NumPy),
                         the shapes of 24 clip frames at 320x240; target >= 5x
  raster2d_vs_mujoco     raster2d against MuJoCo's off-screen renderer (mujoco.Renderer on MUJOCO_GL, default
                         egl) drawing the same compiled scene at 320x240; target >= 20x
  capsule_vs_geomdist    core.kernels.capsules.capsule_dists over one scenario horizon against the
                         mj_geomDistance loop of tools.vesper.scene.Simulator; target >= 10x
    nice -n 5 .venv/bin/python -P bench/vesper/bench.py > bench/vesper/bench.txt
"""

from __future__ import annotations

import os
import time

import numba
import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")

from methodkit.core.kernels.capsules import capsule_dists  # noqa: E402
from methodkit.core.kernels.raster import raster2d, raster2d_reference  # noqa: E402
from methodkit.tools.vesper import generate as g  # noqa: E402
from methodkit.tools.vesper import scene as sc  # noqa: E402


def best(fn, repeat=3):
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def row(case, size, ours, ref):
    print(f"{case:22s}  {size:>10s}  {ours:.5f}  {ref:.5f}  {ref / ours:.1f}", flush=True)


def main():
    numba.set_num_threads(1)
    p = sc.Params(-2.4, 0.6, 2.9, 0.4, 1.0, 1.0, None, 1.0, 8.0)
    cam = g.TopDown(320, 240)
    shapes = [g.shapes_at(p, t, cam) for t in np.linspace(1, 4, 24)]
    raster2d(shapes[0], 240, 320)
    ours = best(lambda: [raster2d(s, 240, 320) for s in shapes])
    ref = best(lambda: [raster2d_reference(s, 240, 320) for s in shapes])
    print("case  size  ours_s  ref_s  ratio")
    row("raster2d_vs_numpy", "24x320x240", ours, ref)
    sim = sc.Simulator()
    try:
        import mujoco

        r = mujoco.Renderer(sim.model, 240, 320)

        def mj():
            for t in np.linspace(1, 4, 24):
                sim.set_state(p, float(t))
                r.update_scene(sim.data)
                r.render()

        mj()
        row("raster2d_vs_mujoco", "24x320x240", ours, best(mj))
        r.close()
    except Exception as exc:  # no GL: say so in the table
        print(f"raster2d_vs_mujoco  24x320x240  nan  nan  nan  # no MuJoCo renderer: {type(exc).__name__}")
    ts = np.arange(0, p.horizon_s, sc.DT)
    pc = np.array([[[*a, *b, rr] for a, b, rr in sc.person_segments(p, t)] for t in ts])
    hc = np.array([[[*a, *b, rr] for a, b, rr in [sc.robot_bounding_capsule(p, t), *sc.robot_segments(p, t)]] for t in ts])
    capsule_dists(pc[:2], hc[:2])
    ours = best(lambda: capsule_dists(pc, hc))
    ref = best(lambda: sim.trajectory(p), repeat=1)
    row("capsule_vs_geomdist", f"{len(ts)}x6x4", ours, ref)


if __name__ == "__main__":
    main()
