"""clapping-train: pipeline-parallel training with compressed activations/gradients and lazy sampling."""

from __future__ import annotations

import click

from methodkit.cli._clapping_options import model_options, run_options
from methodkit.cli._common import DemoStep, Run, common_options, input_argument, tool_group

DEMO = [
    DemoStep(
        "clapping-train run --task digits --stages 4 --algo clapping-fu --compressor topk:0.05 --reuse 4"
        " --steps 300 --lr 0.3 --backend sim -o run -q",
        "digits, 4 stages, top-k 5%",
        "val_metric.accuracy",
        "Clapping-FU accuracy",
    )
]


@tool_group(name="clapping-train")
def main():
    """Pipeline-parallel training with compressed activations and gradients (Clapping).

    Clapping (Kong et al., arXiv 2509.19029) removes AQ-SGD's per-sample activation
    buffers: a minibatch is reused for R consecutive steps (lazy sampling), both
    ends of every stage boundary track batch-sized references of the activations
    (m) and back-propagated gradients (h) with compressed deltas (error feedback on
    both directions), and stages update with momentum. Our reading of the variant
    names: clapping-fu = first step of a round uncompressed, clapping-fc = fully
    compressed (references reset to 0 at a round's start; --fc-init prev keeps
    them, damp:G scales them by G, mean sets every row to the old mean row; comm.csv
    logs each message's tracking error |a - m| / |a|). Baselines: none (exact), naive (C(a), C(g)), ef-step (residual carried to
    the next batch), aqsgd (per-sample buffers, N x d memory).

    `run` trains P stages either as P local processes talking over gloo on
    loopback (--backend gloo, the default) or in one process with the same worker
    code (--backend sim); `plan` shows the stage partition and link sizes; `bench`
    times the compression kernels against torch.

    --device cuda (or auto with a GPU and CuPy) runs each stage on the GPU and
    keeps the link buffers there; the fused top-k and quantise steps run as CuPy
    RawKernels on the device, and only the compact payloads cross to the host for
    gloo. Other compressors round-trip through their CPU code.

    Schedule: --warmup N ramps the lr linearly over the first N steps; --clip C
    clips the gradient norm taken over all stages' parameters (the ranks exchange
    their squared norms), as single-process training with clip_grad_norm_ would.

    Checkpoints: every --ckpt-every steps and at the end, each stage writes
    DIR/ckpt/step-N/stageP.safetensors with a JSON sidecar (parameters, momentum,
    both link ends' buffers m/h, ef-step residuals and AQ-SGD's per-sample
    buffers, compressor counters, torch RNG state, its logs so far), each file
    atomically; older sets are removed once a newer one is complete. `run
    --resume -o DIR` continues from the newest set in which all P stages reached
    the same step, and ends with the same numbers, bit for bit, as a run that was
    never stopped; --steps may grow. A checkpoint made with another
    configuration (anything but --steps) or other data is refused
    with exit 2 naming both spec hashes.

    \b
    EXAMPLES
      clapping-train run --task digits --stages 4 --algo clapping-fu --compressor topk:0.05 -o run1
      methodkit-data get flights | clapping-train run - --task mlp-csv --target arr_delay \\
          --columns month,day,hour,distance,carrier,origin --categorical carrier,origin \\
          --algo clapping-fc --compressor quant:2 --reuse 4 -o run2
      clapping-train run --task charlm --algo naive --compressor topk:0.05 -o run3 >> runs.jsonl
      clapping-train run --steps 400 --ckpt-every 50 -o run4    # stopped at step 230...
      clapping-train run --steps 400 --ckpt-every 50 -o run4 --resume   # ...continues from step 200
      clapping-train plan --task digits --stages 4
      clapping-train bench --compressor topk:0.05 --compressor quant:2

    \b
    EXIT STATUS
      0  success
      1  failure while running: a non-finite loss, activation or gradient (all ranks
         stop; the last complete checkpoint set is kept), a rank failed or timed out,
         --device cuda without a CUDA device or CuPy
      2  bad usage or bad input (stages > blocks, k >= d, bits not 1/2/4/8, missing target,
         --resume without a complete checkpoint set or with another spec)
      130  interrupted
    """


def _data(run: Run, input, task, target, columns, categorical, dataset, seq, text_chars, dropna, seed):
    from methodkit.core import datasets as registry
    from methodkit.tools.clapping.config import select_columns

    split = [c for c in (categorical or "").split(",") if c]
    if task == "digits":
        if input != "-":
            run.input_bytes(input)  # a missing file is reported as such first
            raise click.UsageError("--task digits reads scikit-learn's digits; INPUT is for mlp-csv and charlm")
        from methodkit.tools.clapping import tasks

        return tasks.digits_data(seed)
    if task == "mlp-csv":
        if input == "-" and dataset:
            frame = registry.load(dataset)
        else:
            frame = run.read_table(input)
        frame = select_columns(frame, target, columns, split)  # before torch is imported
        from methodkit.tools.clapping import tasks

        return tasks.table_data(frame, target, split, seed, dropna=dropna)
    from methodkit.tools.clapping import tasks

    if input == "-" and not dataset:
        text = tasks.gensim_corpus_text(text_chars)
    else:
        text = run.input_bytes(input).data.decode("utf-8", errors="replace")[:text_chars]
    return tasks.text_data(text, seq, seed)


@main.command("run")
@input_argument()
@model_options
@run_options
@common_options("output", "seed", "device", "force", "meta", "quiet", "verbose", output_kind="folder")
def run_cmd(
    input,
    task,
    target,
    columns,
    categorical,
    dataset,
    dropna,
    seq,
    text_chars,
    backend,
    timeout,
    bandwidth_mbps,
    latency_ms,
    ckpt_every,
    resume,
    **options,
):
    """Train a pipeline; writes log.csv, comm.csv, run.json and ckpt/ to -o DIR, final JSON on stdout.

    --resume continues from DIR/ckpt (the newest complete set of stage checkpoints).
    """
    import math
    from pathlib import Path

    from methodkit.core.errors import UsageError
    from methodkit.tools.clapping.config import RunConfig, check_run_folder, check_settings, write_run

    run = Run.from_context()
    if bandwidth_mbps is not None and not (math.isfinite(bandwidth_mbps) and bandwidth_mbps > 0):
        raise UsageError(f"--bandwidth-mbps must be a positive finite number, got {bandwidth_mbps}")
    if not (math.isfinite(latency_ms) and latency_ms >= 0):
        raise UsageError(f"--latency-ms must be a finite number >= 0, got {latency_ms}")
    fields = RunConfig.__dataclass_fields__
    chosen = {k: v for k, v in options.items() if k in fields and k not in ("seed", "device")}
    cfg = RunConfig(task=task, **chosen, seed=run.seed, device=run.device())
    check_settings(cfg, cfg.width * (seq if task == "charlm" else 1))  # before torch and the data are loaded
    data = _data(run, input, task, target, columns, categorical, dataset, seq, text_chars, dropna, run.seed)

    import torch

    from methodkit.tools.clapping.pipeline import simulate

    folder = run.output
    check_run_folder(folder, resume, run.force)
    cfg.validate(len(data.x_train))  # --batch against the rows; nothing is created before this
    torch.set_num_threads(1)
    Path(folder).mkdir(parents=True, exist_ok=True)
    with run.progress() as progress:
        if backend == "sim":
            result = simulate(cfg, data, progress, folder=folder, ckpt_every=ckpt_every, resume=resume)
        else:
            from methodkit.tools.clapping.distributed import run_distributed

            result = run_distributed(
                cfg, data, folder, timeout_s=timeout, bandwidth_mbps=bandwidth_mbps, latency_ms=latency_ms,
                ckpt_every=ckpt_every, resume=resume, progress=progress,
            )  # fmt: skip
    summary = {**result.to_dict(), "backend": backend, "data": data.meta}
    write_run(folder, result, summary)
    run.emit_result(summary, output="-")


@main.command("plan")
@model_options
@click.option("--features", type=click.IntRange(min=1), default=64, show_default=True, help="mlp-csv: input features.")
@click.option("--batch", type=int, default=64, show_default=True, help="Minibatch size (for buffer sizes).")
@click.option("--compressor", default="topk:0.05", show_default=True, help="Compressor whose message size is shown.")
@common_options("output", "format", "force", "quiet", "verbose")
def plan_cmd(task, stages, width, blocks, features, seq, batch, compressor, **_):
    """Show the stage partition: parameters per stage and bytes per link message (exact and compressed)."""
    import pandas as pd

    from methodkit.tools.clapping.plan import plan_rows

    run = Run.from_context()
    run.emit_table(pd.DataFrame(plan_rows(task, stages, width, blocks, features, seq, batch, compressor)))


@main.command("bench")
@click.option(
    "--compressor",
    "compressors",
    multiple=True,
    default=["topk:0.05", "quant:2"],
    show_default=True,
    help="Compressors to time.",
)
@click.option("--rows", type=click.IntRange(min=1), default=64, show_default=True, help="Rows of the tensor.")
@click.option("--cols", type=click.IntRange(min=2), default=4096, show_default=True, help="Columns of the tensor.")
@click.option("--repeat", type=click.IntRange(min=1), default=20, show_default=True, help="Timed repetitions.")
@common_options("output", "format", "force", "quiet", "verbose")
def bench_cmd(compressors, rows, cols, repeat, **_):
    """Time the fused delta-compress-update kernels against the same sequence in torch (ratio = torch / ours)."""
    import pandas as pd

    from methodkit.tools.clapping.kernel_bench import bench

    run = Run.from_context()
    run.emit_table(pd.DataFrame([bench(spec, rows, cols, repeat) for spec in compressors]))
