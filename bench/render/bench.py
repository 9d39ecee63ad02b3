"""Frames per second of core.render: one reused Renderer vs a new mujoco.Renderer for every frame.

    nice .venv/bin/python -P bench/render/bench.py [--gl egl|osmesa] [--frames N]

The scene is a room corner as the methods build them: a textured floor, a table with a box and a
ball that falls onto it, a shelf, a wall and the shipped person; default render settings (1024
shadow map, 4x multisampling), one camera. `ours_s` is seconds per frame with one Renderer reused
for all frames; `ref_s` creates a mujoco.Renderer (GL context + MuJoCo render context) for each
frame, renders the same frame and closes it. Cases: `rgb` (colour only, the video path) and
`rgb+depth+seg` (the three images and K, T), and `rgb_fast` (colour with "render": {"shadow_size": 0,
"samples": 0}, the settings for speed). Both sides draw the same simulation states (simulation time
excluded); the re-creating reference draws the first 8 of them (its cost per frame is flat). The
figures are medians of per-frame wall seconds; frames/s and median CPU seconds per frame (all of
the renderer's threads) follow as comment lines. A last case,
`scene_switch`, draws one frame of each of two different scenes in turn, 8 times: ours in one
Renderer (its GL context kept, MuJoCo's render context rebuilt per switch), the reference with a
new Renderer for each.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

SPEC = {
    "objects": [
        {"name": "table", "type": "table", "pos": [0, 0, 0], "size": [1.2, 0.8, 0.75]},
        {"name": "crate", "type": "box", "size": [0.25, 0.25, 0.25], "pos": [0.2, 0.1, 0.875], "texture": "checker"},
        {"name": "ball", "type": "sphere", "radius": 0.06, "pos": [-0.2, 0, 1.4], "colour": "red", "mass": 0.1},
        {"name": "shelf", "type": "shelf", "pos": [-1.6, 0.8, 0]},
        {"name": "wall", "type": "wall", "pos": [0, 1.6, 0], "size": [5, 0.1, 2.5]},
        {"name": "someone", "type": "mjcf", "file": "person", "pos": [1.2, 0.9, 0], "euler": [0, 0, -120]},
    ],
    "cameras": [{"name": "cam", "pos": [2.6, -2.2, 1.8], "target": [0, 0.3, 0.7], "fovy": 50}],
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gl", choices=("egl", "osmesa"), default="egl")
    ap.add_argument("--frames", type=int, default=20)
    args = ap.parse_args()
    from methodkit.core.render import gl

    gl.select(args.gl)
    from methodkit.core.render import build, spec
    from methodkit.core.render.physics import simulate
    from methodkit.core.render.renderer import Renderer

    mujoco = gl.import_mujoco()
    scene = build.build(spec.validate(SPEC, "bench"))
    fast = build.build(spec.validate({**SPEC, "render": {"shadow_size": 0, "samples": 0}}, "bench"))
    data = scene.new_data()
    states = []  # (qpos, time) of the frames, so both sides draw the same pictures
    simulate(
        scene, data, 1.0, sample_every=1.0 / (args.frames - 1), on_sample=lambda t, d: states.append(d.qpos.copy())
    )
    states = states[: args.frames]

    def set_state(q):
        data.qpos[:] = q
        mujoco.mj_forward(scene.model, data)

    def timed(job, items):
        """Median wall and CPU seconds of job(item) (the median shrugs off other processes' bursts)."""
        walls, cpus = [], []
        for item in items:
            w, c = time.perf_counter(), time.process_time()
            job(item)
            walls.append(time.perf_counter() - w)
            cpus.append(time.process_time() - c)
        return statistics.median(walls), statistics.median(cpus)

    def row(case, size, ours, ref):
        print(f"{case}  {size}  {ours[0]:.4f}  {ref[0]:.4f}  {ref[0] / ours[0]:.1f}")
        notes.append(
            f"# {case} {size}: {1 / ours[0]:.1f} frames/s reused, {1 / ref[0]:.1f} re-created; "
            f"CPU s/frame {ours[1]:.4f} vs {ref[1]:.4f}"
        )

    def fresh_frame(sc, d, full, width, height):
        with Renderer(width, height) as r:  # one GL + render context for this frame only
            return r.render(sc, d, "cam") if full else r.rgb(sc, d, "cam")

    def fresh_state_frame(sc, full, width, height, q):
        set_state(q)
        return fresh_frame(sc, data, full, width, height)

    print("case  size  ours_s  ref_s  ratio")
    notes = []
    other = build.build(spec.validate({**SPEC, "objects": SPEC["objects"][:3]}, "bench"))
    for width, height in ((320, 240), (448, 336)):
        size = f"{width}x{height}"
        for case, sc, full in (("rgb", scene, False), ("rgb+depth+seg", scene, True), ("rgb_fast", fast, False)):

            def frame(r, q, sc=sc, full=full):
                set_state(q)
                return r.render(sc, data, "cam") if full else r.rgb(sc, data, "cam")

            with Renderer(width, height) as r:
                frame(r, states[0])  # open the context and upload textures before timing
                ours = timed(functools.partial(frame, r), states)
            ref = timed(functools.partial(fresh_state_frame, sc, full, width, height), states[:8])
            row(case, size, ours, ref)
        pair = [(scene, scene.new_data()), (other, other.new_data())] * 4
        with Renderer(width, height) as r:
            r.rgb(other, pair[1][1], "cam")
            ours = timed(lambda item, r=r: r.rgb(*item, "cam"), pair)
        ref = timed(lambda item, size=(width, height): fresh_frame(*item, False, *size), pair)
        row("scene_switch", size, ours, ref)
    print(
        f"# backend {args.gl}; medians over {len(states)} frames reused, 8 re-created; scene_switch over 8 switches; "
        "defaults: 1024 shadow map, 4x MSAA"
    )
    print("\n".join(notes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
