"""clapping-train's option groups: the model's shape (run, plan) and run's training options."""

from __future__ import annotations

import click

from methodkit.cli._common import option_group

# the model's shape, shared by `run` and `plan`
model_options = option_group(
    click.option(
        "--task",
        type=click.Choice(["digits", "mlp-csv", "charlm"]),
        default="digits",
        show_default=True,
        help="What to train (the model family).",
    ),
    click.option("--stages", type=click.IntRange(min=1), default=4, show_default=True, help="Pipeline stages P."),
    click.option(
        "--width",
        type=click.IntRange(min=4),
        default=128,
        show_default=True,
        help="Hidden width / model dimension.",
    ),
    click.option(
        "--blocks", type=click.IntRange(min=2), default=4, show_default=True, help="Model blocks (>= stages)."
    ),
    click.option("--seq", type=click.IntRange(min=4), default=64, show_default=True, help="charlm: sequence length."),
)

# what `run` trains with: data, algorithm, schedule, backend, checkpoints, emulated links
run_options = option_group(
    click.option("--target", help="mlp-csv: the column to predict."),
    click.option("--columns", help="mlp-csv: feature columns (default: all but the target)."),
    click.option("--categorical", help="mlp-csv: columns to one-hot encode."),
    click.option("--dataset", help="mlp-csv: a registered data set instead of INPUT (e.g. flights)."),
    click.option(
        "--dropna/--no-dropna", default=True, show_default=True, help="mlp-csv: drop rows with missing values."
    ),
    click.option(
        "--text-chars",
        type=click.IntRange(min=1000),
        default=400_000,
        show_default=True,
        help="charlm: characters used.",
    ),
    click.option(
        "--algo",
        type=click.Choice(["none", "naive", "ef-step", "aqsgd", "clapping-fu", "clapping-fc"]),
        default="clapping-fu",
        show_default=True,
        help="Communication algorithm.",
    ),
    click.option(
        "--compressor",
        default="topk:0.05",
        show_default=True,
        help="identity, topk:RHO, randk:RHO[:scaled], quant:BITS[:nearest], topk+quant:RHO:BITS, lowrank:R.",
    ),
    click.option("--grad-compressor", help="Compressor for gradients [default: --compressor]."),
    click.option(
        "--reuse", type=int, default=4, show_default=True, help="R: steps per drawn minibatch (lazy sampling)."
    ),
    click.option("--steps", type=int, default=400, show_default=True, help="Optimizer steps."),
    click.option("--batch", type=int, default=64, show_default=True, help="Minibatch size B."),
    click.option(
        "--microbatches", type=click.IntRange(min=1), default=1, show_default=True, help="GPipe microbatches M."
    ),
    click.option("--lr", type=float, default=0.1, show_default=True, help="Learning rate."),
    click.option("--beta", type=float, default=0.9, show_default=True, help="Momentum (0 = plain SGD)."),
    click.option("--nesterov", is_flag=True, help="Nesterov momentum."),
    click.option(
        "--warmup", type=click.IntRange(min=0), default=0, show_default=True, help="Linear lr warm-up over N steps."
    ),
    click.option(
        "--clip",
        type=click.FloatRange(min=0),
        default=0.0,
        show_default=True,
        help="Clip the gradient norm over all stages' parameters to this (0: off).",
    ),
    click.option(
        "--aqsgd-warm",
        type=click.Choice(["full", "compressed"]),
        default="full",
        show_default=True,
        help="aqsgd: first visit of a sample.",
    ),
    click.option(
        "--fc-init",
        default="zero",
        show_default=True,
        metavar="zero|prev|mean|damp:G",
        help="clapping-fc: references at a round's start (0, kept, the old mean row, G x the old).",
    ),
    click.option(
        "--backend",
        type=click.Choice(["gloo", "sim"]),
        default="gloo",
        show_default=True,
        help="P processes over gloo, or one process.",
    ),
    click.option(
        "--timeout",
        type=click.IntRange(min=5),
        default=300,
        show_default=True,
        help="gloo: seconds before a silent rank fails the run.",
    ),
    click.option(
        "--ckpt-every",
        type=click.IntRange(min=0),
        default=100,
        show_default=True,
        help="Checkpoint every stage every N steps (0: only at the end) under DIR/ckpt.",
    ),
    click.option("--resume", is_flag=True, help="Continue from the newest complete stage checkpoint set in -o DIR."),
    click.option(
        "--bandwidth-mbps",
        type=float,
        help="gloo: emulate links of this bandwidth (the receiver waits for each message).",
    ),
    click.option(
        "--latency-ms", type=float, default=0.0, show_default=True, help="gloo: emulated latency per message."
    ),
)
