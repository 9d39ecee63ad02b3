"""methodkit-sim: the batched highway driving simulator: scene files, closed-loop rollouts, pictures."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, Run, common_options, input_argument, tool_group

DEMO = [
    DemoStep(
        """echo '{"seed": 1, "scenes": [{"family": "merge", "count": 4}, {"family": "exit", "count": 4},"""
        """ {"family": "stopped-vehicle", "count": 4}, {"family": "cut-in", "count": 4}]}' > suite.json"""
        " && methodkit-sim rollout suite.json --policy expert --summary s.json -o routes.csv && cat s.json",
        "16 scenes: merge, exit, stopped vehicle, cut-in",
        "ds",
        "expert driving score",
    ),
]

POLICIES = ("expert", "expert-vocab", "idm", "keep")
BACKENDS = ("native", "highway-env")


@tool_group(name="methodkit-sim")
def main():
    """Batched highway driving: scenario families, scene files, closed-loop rollouts, top-down pictures.

    A Numba simulator of B highway environments at once, with highway-env 1.12.1's vehicle
    models (kinematic bicycle, lane-tracking controller, IDM, MOBIL, the same constants),
    per-vehicle driver parameters, 5 Hz simulation and 1 Hz decisions. A scenario spec is
    JSON: {"seed": S, "scenes": [{"family": F, "count": N, "params": {...}}, ...]}, with the
    families cruise-dense, merge, lane-drop, exit, cut-in, stopped-vehicle, jam and
    empty-road (`families` lists every parameter with its range). `scenes` writes scene
    NPZ files with the expert's 4 s future and its index among the 16 candidate plans;
    `rollout` drives a policy over the suite and writes one row of route metrics per
    scene (RC, penalty, DS, success, efficiency, comfort); `render` draws one episode.

    \b
    EXAMPLES
      methodkit-sim families
      echo '{"family": "merge", "count": 8}' | methodkit-sim rollout --policy expert -o routes.csv
      methodkit-sim rollout suite.json --policy idm --backend highway-env -o hw.csv
      methodkit-sim scenes suite.json -o scenes.npz
      methodkit-sim render suite.json --scene merge-0-3 -o merge.gif

    \b
    EXIT STATUS
      0  success
      1  failure while running
      2  bad usage or bad input (unknown family or parameter, value out of range, existing output without --force)
      130  interrupted
    """


@main.command("families")
@common_options("output", "format", "force", "quiet", "verbose")
def families_cmd(**_):
    """List the scenario families and their parameters (default, range, meaning)."""
    import pandas as pd

    from methodkit.core.sim.highway import scenarios

    run = Run.from_context()
    run.refuse_existing_output()
    rows = []
    for family in scenarios.FAMILIES:
        for name, p in scenarios.family_params(family).items():
            rows.append(
                {
                    "family": family,
                    "parameter": name,
                    "default": p.default,
                    "min": p.lo,
                    "max": p.hi,
                    "choices": ",".join(p.choices) if p.choices else None,
                    "meaning": p.doc,
                }
            )
    run.emit_table(pd.DataFrame(rows))


def _spec(run: Run, path: str):
    from methodkit.core import io

    data = run.input_bytes(path)
    return io.read_json(data), data.name


@main.command("rollout")
@input_argument()
@click.option("--policy", type=click.Choice(POLICIES), default="expert", show_default=True, help="Who drives the ego.")
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default="native",
    show_default=True,
    help="This simulator, or highway-env itself (slow; policies idm and keep; for checks).",
)
@click.option(
    "--substeps", type=click.IntRange(1, 20), default=1, show_default=True, help="Integration steps per 0.2 s frame."
)
@click.option("--summary", metavar="PATH", default=None, help="Also write the suite summary (DS, SR, ...) as JSON.")
@common_options("output", "format", "force", "threads", "meta", "quiet", "verbose")
def rollout_cmd(input, policy, backend, substeps, summary, **_):
    """Run a policy closed loop over the scenes of spec INPUT; one row of route metrics per scene."""
    import pandas as pd

    from methodkit.core import io
    from methodkit.core.sim.highway import suite

    run = Run.from_context()
    run.refuse_existing_output(run.output, summary)
    run.threads()
    spec, name = _spec(run, input)
    rows, summ, _ = suite.run(spec, policy, backend, substeps, where=name)
    if summary:
        io.write_json(summ, summary, force=run.force)
    run.emit_table(pd.DataFrame(rows))


@main.command("scenes")
@input_argument()
@common_options("output", "force", "threads", "meta", "quiet", "verbose")
def scenes_cmd(input, **_):
    """Write the scenes of spec INPUT as one scene NPZ (states, recorded futures, expert index and trajectory)."""

    from methodkit.core.sim.highway import scenefile

    run = Run.from_context()
    run.refuse_binary_terminal("npz")
    run.refuse_existing_output()
    run.threads()
    spec, name = _spec(run, input)
    arrays, meta = scenefile.build(spec, where=name)
    run.write_meta()
    scenefile.write(run.output, arrays, meta, force=run.force)


@main.command("render")
@input_argument()
@click.option("--scene", default="0", show_default=True, help="Scene id (e.g. merge-0-3) or position in the spec.")
@click.option("--policy", type=click.Choice(POLICIES), default="expert", show_default=True, help="Who drives the ego.")
@click.option(
    "--frame", type=int, default=None, help="PNG: the frame to draw [default: the first infraction, else the last]."
)
@click.option(
    "--speedup", type=click.FloatRange(0.1, 50), default=1.0, show_default=True, help="GIF/MP4: times real time."
)
@click.option(
    "--every", type=click.IntRange(1, 50), default=1, show_default=True, help="GIF/MP4: draw every n-th frame."
)
@common_options("output", "force", "meta", "quiet", "verbose")
def render_cmd(input, scene, policy, frame, speedup, every, **_):
    """Draw one episode of spec INPUT top-down: a PNG frame, or a GIF/MP4 of all (by the -o extension).

    Lanes with their ends, every vehicle coloured by role (ego, car, truck, obstacle,
    aggressive driver), the ego's current 4 s plan, its trail, and infractions marked.
    """
    from methodkit.core.errors import UsageError
    from methodkit.core.sim.highway import render

    run = Run.from_context()
    spec, name = _spec(run, input)
    if run.output == "-":
        raise UsageError("render writes a picture file: pass -o FILE.png, FILE.gif or FILE.mp4")
    run.refuse_existing_output()
    render.render(
        spec, scene, policy, run.output, frame=frame, speedup=speedup, every=every, force=run.force, where=name
    )
    run.write_meta()
