"""cyb-train's option groups (sqlite-utils' decorator pattern): `pretrain` and `finetune` share the
training options, `pauses` and `generate` the pause policy; cli/cyb_train.py stays a thin command."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, option_group

LOSS_CHOICES = ("ce", "ce-pause", "cyb-ap", "cyb-va", "cyb-dp")
SOURCE_HELP = "enwiki (cleaned gensim Wikipedia), lee (news), fortunes (Debian), arith (synthetic), text:FILE."

DEMO = [
    DemoStep(
        "cyb-train data --source arith --arith-problems 3000 -o tok.npz -q > /dev/null && "
        "cyb-train pretrain tok.npz --loss cyb-ap --ctx 64 --layers 2 --d-model 64 --steps 40 --batch-size 16 "
        "--warmup 10 --val-windows 8 -j 1 -o run -q",
        "arith, 3000 additions, 40 steps",
        "val.bpc_marginal",
        "CYB-AP val bits/char",
    )
]

data_options = option_group(
    click.option("--source", default="enwiki", show_default=True, help=SOURCE_HELP),
    click.option(
        "--tokenizer", default="bytes", show_default=True, help="bytes, or bpe:N (trained on the train split)."
    ),
    click.option(
        "--val",
        type=click.FloatRange(0, 1, max_open=True),
        default=0.1,
        show_default=True,
        help="Share of documents held out (by document).",
    ),
    click.option(
        "--arith-digits", type=click.IntRange(min=1, max=9), default=4, show_default=True, help="arith: digits."
    ),
    click.option(
        "--arith-problems", type=click.IntRange(min=1), default=20000, show_default=True, help="arith: additions."
    ),
    click.option(
        "--arith-per-doc",
        type=click.IntRange(min=1),
        default=50,
        show_default=True,
        help="arith: additions per document.",
    ),
    click.option("--arith-reverse", is_flag=True, help="arith: write numbers least significant digit first."),
    click.option(
        "--vocab",
        "vocab_path",
        type=OutputPath(),
        default=None,
        metavar="PATH",
        help="Also write the tokenizer here [default: vocab.json beside -o; none when -o is /dev/null or a FIFO].",
    ),
)

training_options = option_group(
    click.option("--loss", type=click.Choice(LOSS_CHOICES), default="cyb-ap", show_default=True, help="Loss."),
    click.option(
        "--max-pauses",
        "-K",
        "max_pauses",
        type=click.IntRange(min=0),
        default=2,
        show_default=True,
        help="K: pause slots per token (ce uses 0).",
    ),
    click.option("--gamma", type=float, default=0.9, show_default=True, help="cyb-ap: discount per pause."),
    click.option(
        "--anytime",
        "--ap-anytime",
        "anytime",
        type=float,
        default=0.5,
        show_default=True,
        help="CYB losses: weight of the mean forced-answer CE over all K+1 slots.",
    ),
    click.option("--beta", type=float, default=0.1, show_default=True, help="cyb-va: KL weight."),
    click.option(
        "--prior",
        default="geometric:0.5",
        show_default=True,
        help="cyb-va: prior over stopping slots: geometric:P, uniform or K+1 weights.",
    ),
    click.option(
        "--tau",
        type=float,
        default=0.01,
        show_default=True,
        help="cyb-dp: cost per pause (start value with --budget).",
    ),
    click.option("--budget", type=float, default=None, help="cyb-dp: mean pauses target (dual ascent on tau)."),
    click.option("--tau-lr", type=float, default=0.01, show_default=True, help="cyb-dp: dual-ascent step."),
    click.option(
        "--pause-mask",
        type=click.Choice(("private", "visible")),
        default="private",
        show_default=True,
        help="private: real tokens never see pauses; visible: the ablation.",
    ),
    click.option("--ctx", type=click.IntRange(min=2), default=128, show_default=True, help="Real tokens/window."),
    click.option("--layers", type=click.IntRange(min=1), default=3, show_default=True, help="Decoder layers."),
    click.option("--d-model", type=click.IntRange(min=8), default=128, show_default=True, help="Model width."),
    click.option("--heads", type=click.IntRange(min=1), default=4, show_default=True, help="Attention heads."),
    click.option(
        "--tokens",
        type=click.IntRange(min=1),
        default=None,
        help="Training tokens; sets --steps = tokens / (batch x ctx).",
    ),
    click.option("--steps", type=click.IntRange(min=1), default=None, help="Optimizer steps [default: 200]."),
    click.option("--batch-size", type=click.IntRange(min=1), default=16, show_default=True, help="Windows/batch."),
    click.option(
        "--lr",
        type=click.FloatRange(min=0, min_open=True),
        default=3e-3,
        show_default=True,
        help="Peak learning rate.",
    ),
    click.option("--weight-decay", type=click.FloatRange(min=0), default=0.1, show_default=True, help="AdamW."),
    click.option(
        "--warmup",
        type=click.IntRange(min=0),
        default=200,
        show_default=True,
        help="Linear warmup steps (capped at a fifth of the steps).",
    ),
    click.option("--log-every", type=click.IntRange(min=1), default=50, show_default=True, help="Log every N."),
    click.option(
        "--val-windows",
        type=click.IntRange(min=1),
        default=64,
        show_default=True,
        help="Validation windows per log row.",
    ),
    click.option(
        "--checkpoint-every",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        help="Checkpoint every N steps (0: at the end).",
    ),
    click.option("--fail-on-collapse", is_flag=True, help="Stop (exit 3) when the pause policy collapses."),
    click.option("--resume", is_flag=True, help="Continue from the checkpoint in -o DIR."),
)

threshold_option = click.option(
    "--threshold", type=click.FloatRange(0, 1), default=0.5, show_default=True, help="Greedy threshold."
)

eval_options = option_group(
    click.argument("tokens", metavar="TOKENS"),
    click.argument("checkpoints", nargs=-1, required=True, metavar="CHECKPOINT..."),
    click.option(
        "--split", type=click.Choice(("val", "train")), default="val", show_default=True, help="Split scored."
    ),
    click.option("--windows", type=click.IntRange(min=1), default=None, help="Score only the first N windows."),
    click.option(
        "--threshold",
        type=click.FloatRange(0, 1),
        default=0.5,
        show_default=True,
        help="Greedy policy: pause while d_k > threshold.",
    ),
    click.option(
        "--metrics",
        "metrics_path",
        type=OutputPath(),
        default=None,
        metavar="PATH",
        help="Write metrics.json (with the pause histograms per token class) here.",
    ),
)

pauses_options = option_group(
    click.option("--checkpoint", metavar="DIR", help="A cyb-train run folder [required]."),
    click.option(
        "--policy",
        type=click.Choice(("greedy", "sample")),
        default="greedy",
        show_default=True,
        help="greedy: pause while d_k > threshold; sample: pause with probability d_k.",
    ),
    threshold_option,
)

generate_options = option_group(
    click.option("--checkpoint", required=True, metavar="DIR", help="A cyb-train run folder."),
    click.option("--prompt", default="The ", show_default=True, help="Text to continue."),
    click.option(
        "-n", "--new-tokens", type=click.IntRange(min=1), default=80, show_default=True, help="Tokens to add."
    ),
    click.option("--temperature", type=click.FloatRange(min=0), default=0.0, show_default=True, help="0 = greedy."),
    click.option("--top-k", type=click.IntRange(min=1), default=None, help="Sample among the top k answers."),
    click.option(
        "--policy", type=click.Choice(("greedy", "sample")), default="greedy", show_default=True, help="Pause policy."
    ),
    threshold_option,
    click.option("--marks/--no-marks", default=True, show_default=True, help="Put ⟂ before a token per pause taken."),
)

finetune_options = option_group(
    click.option("--init", metavar="DIR", help="A cyb-train checkpoint (a ce run, or a pause run) [required]."),
    click.option("--freeze-base", is_flag=True, help="Train only the embeddings, the head and the DK bias."),
)
