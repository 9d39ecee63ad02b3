"""causal-spatial: the CausalSpatial benchmark (collision, compatibility, occlusion, trajectory) made by simulation."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, tool_group
from methodkit.cli._endpoint_options import endpoint_from_options, endpoint_options
from methodkit.cli._render_options import gl_option

PROG = "causal-spatial"
TASKS = ("collision", "compatibility", "occlusion", "trajectory")
BASELINES = ("random", "majority", "text-prior", "heuristic2d", "cow-reader")

DEMO = [
    DemoStep(
        "causal-spatial generate --gl none --per-task 4 -o bench -q && "
        "causal-spatial generate --gl none --per-task 4 --seed 1 -o train -q && "
        "causal-spatial eval --bench bench --model majority --train train -o preds.jsonl -q && "
        "causal-spatial score preds.jsonl",
        "16 items, physics only",
        "accuracy",
        "majority baseline accuracy",
    ),
]


def _int_list(ctx, param, value):
    if value is None:
        return None
    try:
        out = tuple(int(v) for v in str(value).split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}", ctx=ctx, param=param) from None
    if not out:
        raise click.BadParameter("empty list", ctx=ctx, param=param)
    return out


def _float_pair(ctx, param, value):
    try:
        a, b = (float(v) for v in str(value).split(","))
    except ValueError:
        raise click.BadParameter(f"expected LOW,HIGH, got {value!r}", ctx=ctx, param=param) from None
    if not a <= b:
        raise click.BadParameter(f"LOW must not exceed HIGH, got {value!r}", ctx=ctx, param=param)
    return (a, b)


def _tasks(ctx, param, value):
    out = tuple(t.strip() for t in value.split(",") if t.strip())
    bad = [t for t in out if t not in TASKS]
    if bad or not out:
        raise click.BadParameter(f"unknown task '{bad[0] if bad else value}' (tasks: {', '.join(TASKS)})", ctx=ctx,
                                 param=param)  # fmt: skip
    return out


@tool_group(name=PROG)
def main():
    """CausalSpatial: can a model anticipate what object motion will do in a 3D scene?

    Generates the four tasks of CausalSpatial (Collision, Compatibility, Occlusion,
    Trajectory; two levels each) as MuJoCo scenes whose answers come from simulating the
    asked-about motion, with RGB images and RGB-D sensors (depth, instance ids, K, T);
    exports them as HF-CausalSpatial Parquet or VLMEvalKit TSV; asks a model
    (openai:MODEL, cmd:"PROGRAM") or a built-in baseline, with or without the simulated
    frames of cow-simulate; and scores the predictions (per task and level, micro and
    task-macro accuracy, not-sure and parse-error rates, bootstrap CI, McNemar).

    \b
    EXAMPLES
      causal-spatial generate --per-task 100 --seed 0 -o bench
      causal-spatial generate --per-task 100 --seed 100 -o train
      cow-simulate --bench bench -o cow
      causal-spatial eval --bench bench --model heuristic2d -o h2d.jsonl
      causal-spatial eval --bench bench --model cow-reader --cow cow -o cow.jsonl
      causal-spatial score cow.jsonl --paired h2d.jsonl cow.jsonl | jq .paired.p_value
      causal-spatial eval --bench bench --model openai:qwen2.5vl:3b --base-url http://127.0.0.1:11434/v1 \\
          --cow cow --frames 1,3,5 -o vlm_cow.jsonl
      causal-spatial export --bench bench --format parquet -o bench.parquet

    \b
    EXIT STATUS
      0  success
      1  failure while running (no usable scene after --max-tries; eval: requests failed, error records written)
      2  bad usage or bad input (bad flags, missing COW outputs, no GL backend)
      3  score --fail-below: accuracy below the threshold
      130  interrupted
    """


@main.command("generate")
@click.option("-o", "--output", "out_dir", type=OutputPath(folder=True), required=True, metavar="DIR",
              help="Benchmark folder to write (items.jsonl, images/, scenes/, sensors/, meta.json). [required]")  # fmt: skip
@click.option("--tasks", "task_list", default=",".join(TASKS), show_default=True, callback=_tasks, help="Tasks.")
@click.option("--per-task", type=click.IntRange(min=1), default=100, show_default=True, help="Items per task.")
@click.option("--levels", default="1,2", show_default=True, callback=_int_list, help="Levels (1, 2).")
@click.option("--size", type=click.IntRange(32, 2048), default=336, show_default=True, help="Image side (px).")
@click.option("--camera-elevation", default="25,45", show_default=True, callback=_float_pair,
              help="Camera elevation range (degrees).")  # fmt: skip
@click.option("--objects", default="2,5", show_default=True, callback=_int_list, help="Objects per scene: MIN,MAX.")
@click.option("--max-tries", type=click.IntRange(min=1), default=200, show_default=True,
              help="Draws per item before giving up (exit 1 with the seed).")  # fmt: skip
@gl_option
@common_options("seed", "force", "meta", "quiet", "verbose")
def generate(out_dir, task_list, per_task, levels, size, camera_elevation, objects, max_tries, gl_backend, **_):
    """Generate items by simulation; prints a JSON summary (counts, rejections, answer balance).

    Each item is rejection-sampled until its simulated answer is unambiguous and the
    answers of each task and level are balanced; rejection reasons go to meta.json.
    With --gl none no images or sensors are written (scene specs and answers only; the
    occlusion answers then come from ray casts alone). Trajectory balls are thrown or slid
    up a frictionless ramp that launches them; at level 2 a frictionless wall with a stated
    coefficient of restitution bounces them back onto the mats.
    """
    from methodkit.core.errors import UsageError
    from methodkit.tools.causal_spatial.generate import GenerateConfig
    from methodkit.tools.causal_spatial.generate import generate as run_generate

    if any(lv not in (1, 2) for lv in levels):
        raise UsageError(f"--levels: only 1 and 2 exist, got {','.join(map(str, levels))}")
    if len(objects) != 2 or not 2 <= objects[0] <= objects[1] <= 6:
        raise UsageError("--objects: expected MIN,MAX with 2 <= MIN <= MAX <= 6")
    run = Run.from_context()
    cfg = GenerateConfig(tasks=task_list, per_task=per_task, levels=levels, seed=run.seed, size=size,
                         elevation=camera_elevation, objects=objects, max_tries=max_tries,
                         render=gl_backend != "none")  # fmt: skip
    with run.progress() as progress:
        result = run_generate(cfg, out_dir, progress=progress)
    run.emit_result(result.to_dict(), output="-")


@main.command("export")
@click.option("--bench", required=True, type=click.Path(file_okay=False), help="Benchmark folder. [required]")
@click.option("--format", "export_format", type=click.Choice(("parquet", "vlmevalkit-tsv")), default="parquet",
              show_default=True, help="Parquet (HF CausalSpatial columns) or VLMEvalKit TSV.")  # fmt: skip
@common_options("output", "force", "meta", "quiet", "verbose")
def export(bench, export_format, output, **_):
    """Export a generated benchmark for other harnesses."""
    from methodkit.core.errors import UsageError
    from methodkit.tools.causal_spatial import export as ex

    run = Run.from_context()
    if export_format == "parquet":
        import sys

        if output == "-" and sys.stdout.isatty():
            raise UsageError("refusing to write binary parquet to a terminal; pass -o FILE or pipe the output")
        run.emit_table(ex.parquet_frame(bench), fmt="parquet")
    else:
        run.emit_table(ex.tsv_frame(bench), fmt="tsv")


@main.command("eval")
@click.option("--bench", required=True, type=click.Path(), help="Benchmark folder or .parquet. [required]")
@endpoint_options(BASELINES)
@click.option("--cow", "cow_dir", type=click.Path(file_okay=False), default=None,
              help="COW folder (cow-simulate -o): its frames are appended (models) or its events read (cow-reader).")  # fmt: skip
@click.option("--frames", default="1,3,5", show_default=True, callback=_int_list, help="COW frames to append.")
@click.option("--from-frames", is_flag=True,
              help="cow-reader: re-derive the events from the frames' segmentation (cow-simulate --segmentation).")
@click.option("--train", "train_bench", type=click.Path(file_okay=False), default=None,
              help="A disjoint benchmark the majority and text-prior baselines learn from.")  # fmt: skip
@click.option("--cmd-protocol", type=click.Choice(("chat", "line")), default="chat", show_default=True,
              help="cmd: models: chat (a chat-completions request) or line ({id, question, images} in, {answer} out).")
@click.option("--resume", is_flag=True, help="Keep the answers already in -o; ask the rest and the errors again.")
@click.option("--allow-version-drift", is_flag=True,
              help="Accept COW outputs simulated with another MuJoCo version than the benchmark's answers.")
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def eval_(bench, cow_dir, frames, from_frames, train_bench, cmd_protocol, resume, allow_version_drift, output, **_):
    """Ask a model or a baseline every item; writes one JSON line per item (id, answer, text, error).

    The prompt is the question, its options and the official JSON answer template; with
    --cow the first image is followed by the chosen simulated frames and the official
    note on them. Items missing from the COW folder are an error, never evaluated
    image-only. A request that still fails after --retries is written as an error
    record for its id (counted wrong by score) and the others go on; the run then
    exits 1 after writing everything, and --resume asks the failed ids again.

    \b
    --cmd-protocol line: the program is started once per item, reads one JSON line
    {"id": ID, "question": PROMPT, "images": [absolute paths: the item's image,
    then the COW frames]} and writes one JSON object, {"answer": "B"} or
    {"text": "..."}; a non-zero exit or other output fails that item, its last
    stderr line kept in the error record. chat: core/endpoint's protocol (one
    chat-completions request on stdin, {"text": ...} or a completion on stdout).
    """
    from methodkit.core import io
    from methodkit.tools.causal_spatial import bench_io, evaluate

    run = Run.from_context()
    items, folder, meta = evaluate.load_bench(bench)
    done = []
    if resume and output not in ("-", None):
        from pathlib import Path

        if Path(output).is_file():
            done = [d for d in io.read_jsonl(output) if not d.get("error")]
    train = bench_io.load_items(train_bench) if train_bench else None
    spec = run.params["model"]
    endpoint = None if spec.kind == "baseline" else endpoint_from_options(run.params, BASELINES)
    with run.progress() as progress:
        new = evaluate.evaluate(items, folder, spec, endpoint=endpoint, cow_dir=cow_dir, frames=frames,
                                done_ids={d["id"] for d in done}, train=train, seed=run.seed,
                                bench_sha=meta.get("bench_sha256"), mujoco_version=meta.get("mujoco_version"),
                                allow_drift=allow_version_drift, cmd_protocol=cmd_protocol, from_frames=from_frames,
                                progress=progress)  # fmt: skip
    body = "".join(io.dumps_json(r) + "\n" for r in [*done, *new]).encode()
    with io.atomic_write(output, force=run.force or resume) as handle:
        handle.write(body)
    run.write_meta()
    evaluate.raise_if_failed(new)  # error records are results: written first, then exit 1


@main.command("score")
@click.argument("preds", nargs=-1, required=True, metavar="PREDS.jsonl...")
@click.option("--paired", nargs=2, default=None, metavar="A.jsonl B.jsonl",
              help="Add McNemar's test between two prediction files (e.g. without and with COW).")  # fmt: skip
@click.option("--markdown", is_flag=True, help="A markdown table instead of JSON.")
@click.option("--fail-below", type=click.FloatRange(0, 1), default=None, help="Exit 3 if accuracy is below this.")
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def score(preds, paired, markdown, fail_below, output, **_):
    """Score prediction files: accuracy per task and level, micro, task-macro, CI, rates.

    Answers are read from the JSON template's Answer field, then from 'answer is (X)';
    anything else is a parse error, counted wrong.
    """
    from methodkit.core import io
    from methodkit.core.errors import CheckFailed
    from methodkit.tools.causal_spatial import scoring

    run = Run.from_context()
    records = []
    for p in preds:
        records += io.read_jsonl(run.input_bytes(p))
    result = scoring.score(records, seed=run.seed)
    if paired:
        result["paired"] = scoring.paired(io.read_jsonl(run.input_bytes(paired[0])),
                                          io.read_jsonl(run.input_bytes(paired[1])))  # fmt: skip
    if markdown:
        with io.atomic_write(output, binary=False, force=run.force) as handle:
            handle.write(scoring.markdown(result))
        run.write_meta()
    else:
        run.emit_result(result)
    if fail_below is not None and result["accuracy"] < fail_below:
        raise CheckFailed(f"accuracy {result['accuracy']:.3f} is below --fail-below {fail_below}")
