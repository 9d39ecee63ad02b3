"""cow-simulate: Causal Object World, simulated videos of a question's hypothetical motion."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, tool_command
from methodkit.cli._render_options import gl_option

PROG = "cow-simulate"

DEMO = [
    DemoStep(
        "causal-spatial generate --gl none --per-task 2 -o bench -q && "
        "cow-simulate --gl none --bench bench --scene oracle -o cow -q > /dev/null && "
        "causal-spatial eval --bench bench --model cow-reader --cow cow -o preds.jsonl -q && "
        "causal-spatial score preds.jsonl",
        "8 items, physics only, oracle scene",
        "accuracy",
        "cow-reader accuracy",
    ),
]


@tool_command(name=PROG)
@click.option("--bench", required=True, type=click.Path(file_okay=False), help="Benchmark folder. [required]")
@click.option("-o", "--output", "out_dir", type=OutputPath(folder=True), required=True, metavar="DIR",
              help="COW folder: <id>/frame_K.png, <id>/video.mp4, <id>/cow.json. [required]")  # fmt: skip
@click.option("--ids", default=None, help="Comma-separated item ids [default: all].")
@click.option("--scene", type=click.Choice(("perceive", "oracle")), default="perceive", show_default=True,
              help="perceive: rebuild the scene from the RGB-D view; oracle: the true scene spec.")  # fmt: skip
@click.option("--frames", type=click.IntRange(1, 120), default=6, show_default=True,
              help="Simulated frames after the initial one (frame_0).")  # fmt: skip
@click.option("--fps", type=click.IntRange(1, 60), default=8, show_default=True, help="Video frame rate.")
@click.option("--annotate", is_flag=True, help="Draw the mover's path and flash contacts red.")
@click.option("--no-video", is_flag=True, help="Frames and cow.json only.")
@click.option("--segmentation", is_flag=True,
              help="Also write <id>/seg.npz: every frame's instance ids and depth (cow-reader --from-frames).")
@click.option("--grounder", default=None, metavar="openai:MODEL",
              help="Ground mover and motion by asking this model for JSON [default: the built-in grammar].")
@click.option("--base-url", metavar="URL", default=None,
              help="Server for --grounder [default: $OPENAI_BASE_URL]; key from $OPENAI_API_KEY only.")
@gl_option
@common_options("force", "meta", "quiet", "verbose")
def main(bench, out_dir, ids, scene, frames, fps, annotate, no_video, segmentation, grounder, base_url, gl_backend, **_):
    """Simulate each item's hypothetical motion and render it (COW on CPU).

    perceive (the default, used for all claims) reads only the item's RGB image, depth,
    instance mask, K and T: it grounds the mover and the motion from the question with a
    small grammar, lifts each instance to 3D, fits a box, cylinder, sphere or vase to it,
    builds a proxy MuJoCo scene (500 kg/m^3, friction 0.8), applies the motion (a
    kinematic drive, a release, a translation, a launch), simulates it and renders
    --frames frames from the same camera. oracle does the same from the true scene spec.
    Writes one JSON summary line per item on stdout; events (contacts with times, rest
    poses, inside flags, visible fractions, landing point) go to cow.json.

    \b
    EXAMPLES
      cow-simulate --bench bench -o cow
      cow-simulate --bench bench --scene oracle -o cow-oracle --annotate
      cow-simulate --bench bench --ids Collision_Level_1_0 -o one && ls one/Collision_Level_1_0

    \b
    EXIT STATUS
      0  success
      1  failure while running
      2  bad usage or bad input (unknown ids, a benchmark without sensors, no GL backend)
      130  interrupted
    """
    import sys

    from methodkit.core import io
    from methodkit.tools.causal_spatial import simulate_bench

    run = Run.from_context()
    cfg = simulate_bench.CowConfig(scene=scene, frames=frames, fps=fps, annotate=annotate,
                                   render=gl_backend != "none", video=not no_video, segmentation=segmentation)  # fmt: skip
    lines = []
    id_list = [i.strip() for i in ids.split(",") if i.strip()] if ids else None
    endpoint = None
    if grounder:
        from methodkit.core.endpoint import Endpoint, ResponseCache, default_cache_path, parse_spec
        from methodkit.core.errors import UsageError

        spec = parse_spec(grounder, ())
        if spec.kind != "openai":
            raise UsageError(f"--grounder: expected openai:MODEL, got {grounder!r}")
        endpoint = Endpoint(spec, base_url=base_url, cache=ResponseCache(default_cache_path()),
                            params={"temperature": 0, "seed": 0})  # fmt: skip
    with run.progress() as progress:
        simulate_bench.run(bench, out_dir, cfg, ids=id_list, progress=progress, on_item=lines.append,
                           grounder=endpoint)  # fmt: skip
    sys.stdout.write("".join(io.dumps_json(rec) + "\n" for rec in lines))
    run.write_meta()
