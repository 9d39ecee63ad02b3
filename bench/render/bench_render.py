"""Frames per second of core.render: one reused Renderer vs a new mujoco.Renderer for every frame.

    nice .venv/bin/python -P bench/render/bench_render.py [--gl egl|osmesa] [--frames N]

The scene is a room corner as the methods build them: a textured floor, a table with a box and a
ball that falls onto it, a shelf, a wall and the shipped person; default render settings (1024
shadow map, 4x multisampling), one camera. `ours_s` is seconds per frame with one Renderer reused
for all frames; `ref_s` creates a mujoco.Renderer (GL context + MuJoCo render context) for each
frame, renders the same frame and closes it. Cases: `rgb` (colour only, the video path) and
`rgb+depth+seg` (the three images and K, T), and `rgb_fast` (colour with "render": {"shadow_size": 0,
"samples": 0}, the settings for speed). Both sides draw the same simulation states (simulation time
excluded); the re-creating reference draws the first 8 of them (its cost per frame is flat). Wall
seconds per frame; frames/s and CPU seconds per frame follow as comment lines. A last case,
`scene_switch`, draws one frame of each of two different scenes in turn, 8 times: ours in one
Renderer (its GL context kept, MuJoCo's render context rebuilt per switch), the reference with a
new Renderer for each.
"""

from __future__ import annotations

import argparse
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

    print("case  size  ours_s  ref_s  ratio")
    notes = []
    for width, height in ((320, 240), (448, 336)):
        for case, sc, full in (("rgb", scene, False), ("rgb+depth+seg", scene, True), ("rgb_fast", fast, False)):

            def draw(r, sc=sc, full=full):
                return r.render(sc, data, "cam") if full else r.rgb(sc, data, "cam")

            with Renderer(width, height) as r:
                draw(r)  # open the context and upload textures before timing
                wall, cpu = time.perf_counter(), time.process_time()
                for q in states:
                    set_state(q)
                    draw(r)
                n, ours, ours_cpu = len(states), time.perf_counter() - wall, time.process_time() - cpu
            wall, cpu = time.perf_counter(), time.process_time()
            for q in states[:8]:
                set_state(q)
                with Renderer(width, height) as fresh:  # one GL + render context per frame
                    draw(fresh)
            m, ref, ref_cpu = len(states[:8]), time.perf_counter() - wall, time.process_time() - cpu
            print(f"{case}  {width}x{height}  {ours / n:.4f}  {ref / m:.4f}  {ref / m / (ours / n):.1f}")
            notes.append(
                f"# {case} {width}x{height}: {n / ours:.1f} frames/s reused, {m / ref:.1f} re-created; "
                f"CPU s/frame {ours_cpu / n:.4f} vs {ref_cpu / m:.4f}"
            )
    other = build.build(spec.validate({**SPEC, "objects": SPEC["objects"][:3]}, "bench"))
    pair = [(scene, scene.new_data()), (other, other.new_data())] * 4
    for width, height in ((320, 240), (448, 336)):
        with Renderer(width, height) as r:
            r.rgb(other, pair[1][1], "cam")
            wall, cpu = time.perf_counter(), time.process_time()
            for sc, d in pair:
                r.rgb(sc, d, "cam")
            ours, ours_cpu = time.perf_counter() - wall, time.process_time() - cpu
        wall, cpu = time.perf_counter(), time.process_time()
        for sc, d in pair:
            with Renderer(width, height) as fresh:
                fresh.rgb(sc, d, "cam")
        ref, ref_cpu = time.perf_counter() - wall, time.process_time() - cpu
        n = len(pair)
        print(f"scene_switch  {width}x{height}  {ours / n:.4f}  {ref / n:.4f}  {ref / ours:.1f}")
        notes.append(f"# scene_switch {width}x{height}: CPU s/frame {ours_cpu / n:.4f} vs {ref_cpu / n:.4f}")
    print(
        f"# backend {args.gl}; {len(states)} frames reused, 8 re-created per case; defaults: 1024 shadow map, 4x MSAA"
    )
    print("\n".join(notes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
