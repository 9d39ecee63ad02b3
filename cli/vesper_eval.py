"""vesper-eval: the VESPER video safety reasoning benchmark (anticipate harm, obey the principle hierarchy)."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, tool_group
from methodkit.cli._endpoint_options import endpoint_from_options, endpoint_options
from methodkit.cli._render_options import gl_option

PROG = "vesper-eval"
BASELINES = ("always-stop", "always-continue", "random", "recognize", "extrapolate", "obey")

DEMO = [
    DemoStep(
        "vesper-eval generate --pairs 6 --no-video -o vesper_bench -q && "
        "vesper-eval run --bench vesper_bench --model extrapolate -o vesper_preds.jsonl -q && "
        "vesper-eval score vesper_preds.jsonl",
        "6 matched pairs, 2d renderer",
        "pair_accuracy",
        "extrapolate pair accuracy",
    ),
]


def _size(ctx, param, value):
    try:
        w, h = (int(v) for v in str(value).lower().split("x"))
    except ValueError:
        raise click.BadParameter(f"expected WIDTHxHEIGHT, got {value!r}", ctx=ctx, param=param) from None
    if not (32 <= w <= 2048 and 32 <= h <= 2048):
        raise click.BadParameter(f"sides must be in [32, 2048], got {value!r}", ctx=ctx, param=param)
    return (w, h)


@tool_group(name=PROG)
def main():
    """VESPER: does a model stop a robot *before* a person is harmed, even when told not to stop?

    Generates matched dangerous/safe clips of a robot carrying out an instruction while a
    person walks into its path (the twins differ in one deciding factor: path offset,
    timing, or the person stopping short), with ground truth from simulating the whole
    horizon in MuJoCo (mj_geomDistance between person and hazard geoms); the clip is cut
    before contact, so harm must be anticipated. Asks a model (openai:MODEL,
    cmd:"PROGRAM") or a built-in policy for harm and CONTINUE/STOP under the principles
    P1 no harm > P2 obey > P3 efficiency, and scores decision and pair accuracy, P1/P2
    per instruction pressure, the hierarchy score and the anticipation gap.

    \b
    EXAMPLES
      vesper-eval generate --pairs 40 --seed 0 -o bench
      vesper-eval generate --taxonomy all --pairs 24 -o bench_all
      vesper-eval review bench --sheet-dir sheets -o review.csv
      vesper-eval review bench --apply review.csv
      vesper-eval review bench --interactive --reviewer me -o review.csv
      vesper-eval generate --pairs 4 --renderer mujoco --gl egl --size 448x336 -o bench3d
      vesper-eval run --bench bench --model extrapolate -o extrapolate.jsonl
      vesper-eval run --bench bench --model openai:qwen2.5-vl --base-url http://127.0.0.1:8000/v1 -o vlm.jsonl
      vesper-eval score extrapolate.jsonl --by pressure,lead_time | jq .pair_accuracy

    \b
    SCOPE AND MISSES (see docs/vesper-eval.md for every figure)
      Built: the simple robot (base box + 3-link capsule arm) driving a corridor, the
      collision hazard; with --taxonomy all also trip (the robot sets a box down in the
      walkway and drives off; harm = a MuJoCo contact of the walking person with the box
      lying on the floor) and falling_load (the robot lets go of a box held over the
      walkway at 2.3 m; harm = a contact with the box while it falls), both on real
      dynamics (a free body released from a weld), and pinch (an actuated sliding door
      closes while the person is in the doorway; harm = a contact with the closing
      panel); adult and child persons (a capsule person, not gymnasium's
      humanoid), factors path_offset, timing and stop_turn, the top-down 2d renderer
      (default: no GL, fast) and --renderer mujoco (a third-person camera, one of
      two viewpoints per pair; sensors/ then hold depth, K and T, which the baselines
      lift to the ground plane), review --interactive, and a person entering from
      behind the robot (taxonomy approach: behind; needs --renderer mujoco).
      Not built: Fetch, the humanoid, the hazards scald and cut, gripper/drawer pinch.
      The cmd: program speaks core.endpoint's protocol (chat messages in,
      {"text": ...} out).
      Missed: extrapolate pair accuracy >= 0.65 (stop_turn pairs are not inferable
      from a constant-velocity track), raster2d >= 20x MuJoCo-EGL frames/s.

    \b
    EXIT STATUS
      0  success
      1  failure while running (a model request failed for good)
      2  bad usage or bad input (bad taxonomy, missing items.jsonl, unknown ids)
      3  score --fail-below: pair accuracy below the threshold
      130  interrupted
    """


@main.command("generate")
@click.option("-o", "--output", "out_dir", type=OutputPath(folder=True), required=True, metavar="DIR",
              help="Benchmark folder (items.jsonl, videos/, scenarios/, sensors/, meta.json). [required]")  # fmt: skip
@click.option("--taxonomy", type=click.Path(dir_okay=False), default=None, help="Taxonomy YAML, or 'all': the shipped one with every simulated hazard (collision, trip, falling_load, pinch) [default: the shipped collision-only taxonomy].")
@click.option("--pairs", type=click.IntRange(min=1), default=40, show_default=True, help="Matched pairs.")
@click.option("--robot", type=click.Choice(["simple"]), default="simple", show_default=True,
              help="Robot model (Fetch is not built yet).")  # fmt: skip
@click.option("--renderer", type=click.Choice(["2d", "mujoco"]), default="2d", show_default=True,
              help="2d: top-down raster2d view (no GL); mujoco: a third-person MuJoCo camera with depth.")  # fmt: skip
@click.option("--size", default="320x240", show_default=True, callback=_size, help="Frame size WIDTHxHEIGHT.")
@click.option("--fps", type=click.IntRange(1, 60), default=8, show_default=True, help="Clip frame rate.")
@click.option("--clip", "clip_s", type=click.FloatRange(1.0, 3.0), default=3.0, show_default=True,
              help="Clip length before the cutoff (s).")  # fmt: skip
@click.option("--recognition-frac", type=click.FloatRange(0, 1), default=0.2, show_default=True,
              help="Share of pairs that also get a recognition clip (ends 0.5 s after contact).")  # fmt: skip
@click.option("--max-tries", type=click.IntRange(min=1), default=60, show_default=True,
              help="Draws per pair before its recipe is recorded as failed in meta.json.")  # fmt: skip
@click.option("--keep-frames", is_flag=True, help="Also write frames/<id>/NNN.png.")
@click.option("--no-video", is_flag=True, help="PNG frames instead of MP4 clips (faster).")
@gl_option
@common_options("seed", "force", "meta", "quiet", "verbose")
def generate(out_dir, taxonomy, pairs, robot, renderer, size, fps, clip_s, recognition_frac, max_tries, keep_frames,
             no_video, **_):  # fmt: skip
    """Generate matched pairs by simulation; prints a JSON summary (counts, rejections, failed recipes)."""
    from methodkit.tools.vesper import taxonomy as tx
    from methodkit.tools.vesper.generate import GenerateConfig
    from methodkit.tools.vesper.generate import generate as run_generate

    run = Run.from_context()
    tax = tx.load(taxonomy)
    cfg = GenerateConfig(pairs=pairs, seed=run.seed, width=size[0], height=size[1], fps=fps, clip_s=clip_s,
                         recognition_frac=recognition_frac, max_tries=max_tries, keep_frames=keep_frames,
                         video=not no_video, renderer=renderer)  # fmt: skip
    with run.progress() as progress:
        result = run_generate(cfg, out_dir, tax, progress=progress)
    run.emit_result(result.to_dict(), output="-")


@main.command("review")
@click.argument("bench", type=click.Path(file_okay=False))
@click.option("--sheet-dir", type=OutputPath(folder=True), default=None,
              help="Write one contact sheet per pair (8 frames of each twin + the withheld outcome frame).")  # fmt: skip
@click.option("--apply", "apply_csv", type=click.Path(dir_okay=False), default=None,
              help="review.csv with verdicts: rewrite BENCH/items.jsonl statuses (accepted|rejected).")  # fmt: skip
@click.option("--interactive", is_flag=True,
              help="Prompt on stderr for each unreviewed item (a accept, r reject + note, s skip, q quit); each "
                   "verdict is saved to items.jsonl at once; the verdicts go to -o as review.csv.")  # fmt: skip
@click.option("--reviewer", default="anonymous", show_default=True, help="Reviewer id for the template.")
@common_options("output", "force", "meta", "quiet", "verbose")
def review(bench, sheet_dir, apply_csv, interactive, reviewer, output, **_):
    """Human review: contact sheets and a review.csv template (id, verdict, reviewer, note, time), or --apply it."""
    import sys

    from methodkit.cli._common import err_console
    from methodkit.core import io
    from methodkit.tools.vesper import review as rv

    run = Run.from_context()
    if apply_csv:
        items, counts = rv.apply(bench, io.read_table(apply_csv).astype(object))
        rv.save_items(bench, items)
        run.emit_result(counts, output="-")
        return
    frame = rv.template(bench, reviewer, sheet_dir=sheet_dir)
    if interactive:
        from datetime import UTC, datetime

        def ask(prompt):
            err_console().print(prompt, end="", markup=False)
            line = sys.stdin.readline()
            return line if line else None

        say = lambda text: err_console().print(text, markup=False)  # noqa: E731
        clock = lambda: datetime.now(UTC).isoformat(timespec="seconds")  # noqa: E731
        frame, counts = rv.interactive(bench, reviewer, ask, say, clock=clock, sheet_dir=sheet_dir)
        say(" ".join(f"{k} {v}" for k, v in counts.items()))
    run.emit_table(frame)


@main.command("run")
@click.option("--bench", required=True, type=click.Path(file_okay=False), help="Benchmark folder. [required]")
@endpoint_options(BASELINES)
@click.option("--frames", type=click.IntRange(1, 64), default=8, show_default=True,
              help="Frames sent (uniform, last frame always included).")  # fmt: skip
@click.option("--prompt-set", type=click.Choice(["default", "mcq"]), default="default", show_default=True,
              help="JSON answer or two lettered questions.")  # fmt: skip
@click.option("--video-url", type=click.Choice(["file", "data"]), default=None,
              help="Send one video_url part (file:// or a data URL) instead of frames.")  # fmt: skip
@click.option("--resume", is_flag=True, help="Keep the predictions already in -o and ask only for the rest.")
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def run_(bench, frames, prompt_set, video_url, resume, output, **_):
    """Ask a model or a built-in policy every item; one JSON line per item (decision, harm, raw text, error)."""
    from pathlib import Path

    from methodkit.core import io
    from methodkit.tools.vesper import evaluate

    run = Run.from_context()
    items, folder = evaluate.load_bench(bench)
    done = io.read_jsonl(output) if resume and output != "-" and Path(output).is_file() else []
    spec = run.params["model"]
    endpoint = None if spec.kind == "baseline" else endpoint_from_options(run.params, BASELINES)
    with run.progress() as progress:
        new = evaluate.run(items, folder, spec, endpoint=endpoint, frames=frames, prompt_set=prompt_set,
                           video_url=video_url, seed=run.seed, done_ids={d["id"] for d in done},
                           progress=progress)  # fmt: skip
    body = "".join(io.dumps_json(r) + "\n" for r in [*done, *new]).encode()
    with io.atomic_write(output, force=run.force or resume) as handle:
        handle.write(body)
    run.write_meta()


@main.command("score")
@click.argument("preds", metavar="PREDS.jsonl")
@click.option("--by", default="", help="Extra breakdowns: hazard,person,lead_time,pressure,robot_task.")
@click.option("--bootstrap", type=click.IntRange(min=0), default=1000, show_default=True,
              help="Pair-bootstrap resamples for the 95% CIs (0: none).")  # fmt: skip
@click.option("--md", is_flag=True, help="A markdown table instead of JSON.")
@click.option("--fail-below", type=click.FloatRange(0, 1), default=None, help="Exit 3 if pair accuracy is below this.")
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def score(preds, by, bootstrap, md, fail_below, output, **_):
    """Score predictions: all metrics as one JSON object (every error counts as wrong)."""
    from methodkit.core import io
    from methodkit.core.errors import CheckFailed
    from methodkit.tools.vesper import score as sc

    run = Run.from_context()
    keys = tuple(k.strip() for k in by.split(",") if k.strip())
    result = sc.score(io.read_jsonl(run.input_bytes(preds)), by=keys, n_boot=bootstrap, seed=run.seed)
    if md:
        with io.atomic_write(output, binary=False, force=run.force) as handle:
            handle.write(sc.markdown(result))
        run.write_meta()
    else:
        run.emit_result(result)
    if fail_below is not None and (result["pair_accuracy"] or 0.0) < fail_below:
        raise CheckFailed(f"pair accuracy {result['pair_accuracy']} is below --fail-below {fail_below}")
