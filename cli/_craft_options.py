"""craft-finetune's options (sqlite-utils' decorator pattern): the suite and backend options that every
verb shares, and finetune's method options, so cli/craft_finetune.py stays a thin command."""

from __future__ import annotations

import click

from methodkit.cli._common import OutputPath, option_group

SUITES = ("hwy-mini", "hwy-train", "hwy-test")
METHODS = (
    "craft", "bc", "closed-loop-ppo", "proxy-only", "craft-no-res", "craft-res-all", "craft-no-kl", "craft-refkl",
)  # fmt: skip
POLICY_OUT = OutputPath(sidecars=(".json",))


def suite_option(default="hwy-mini", flag="--suite", help_text="Built-in suite, or a suite JSON file."):
    return click.option(flag, "suite", default=default, show_default=True, metavar="NAME|PATH", help=help_text)


backend_option = click.option("--backend", type=click.Choice(("numba", "highway-env")), default="numba",
                              show_default=True, help="Simulator backend.")  # fmt: skip

# fmt: off
finetune_options = option_group(
    click.option("--method", type=click.Choice(METHODS), default="craft", show_default=True, help="Fine-tuning method."),
    click.option("--iterations", type=click.IntRange(1), default=100, show_default=True, help="On-policy iterations."),
    click.option("--episodes", type=click.IntRange(1), default=32, show_default=True, help="Episodes per iteration."),
    click.option("--epochs", type=click.IntRange(1), default=4, show_default=True, help="Passes over each batch."),
    click.option("--minibatch", type=click.IntRange(1), default=512, show_default=True, help="States per step."),
    click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=1e-4, show_default=True, help="Adam LR."),
    click.option("--group-size", type=click.IntRange(2, 16), default=16, show_default=True,
                 help="Candidates per group (16: all; fewer: sampled from pi_old)."),
    click.option(
        "--proxy-futures",
        type=click.Choice(("cv", "log")),
        default="cv",
        show_default=True,
        help="Others' futures in the proxy: constant-velocity forecasts or the realised log (non-reactive).",
    ),
    click.option("--beta", type=click.FloatRange(min=0), default=0.05, show_default=True, help="KL weight."),
    click.option("--lambda-res", type=click.FloatRange(min=0), default=1.0, show_default=True, help="Residual weight."),
    click.option("--entropy", type=click.FloatRange(min=0), default=0.001, show_default=True, help="Entropy bonus."),
    click.option("--ema", type=click.FloatRange(0, 1), default=0.995, show_default=True, help="EMA teacher decay."),
    click.option("--kl-dir", type=click.Choice(("fwd", "rev", "sym")), default="fwd", show_default=True,
                 help="fwd = KL(teacher || student), mode covering."),
    click.option("--kl-gate", type=click.Choice(("none", "adv")), default="none", show_default=True,
                 help="adv: weight 0.1 on drift backed by advantage."),
    click.option("--adv-floor", type=click.FloatRange(min=0), default=0.0, show_default=True,
                 help="Ours: divide the group advantage by max(std_G, this); 0 = the paper's std."),
    click.option("--critical-events", default="collision,ttc,rear_brake,tight_lane_change,hard_brake,proxy_conflict",
                 show_default=True, metavar="LIST", help="Events that make a window critical (comma-separated)."),
    click.option("--eval-suite", default=None, metavar="NAME|PATH", help="Greedy DS on this suite every --eval-every."),
    click.option("--eval-every", type=click.IntRange(0), default=0, show_default=True, help="Iterations between evals."),
    backend_option,
    click.option("--log", "log_path", type=OutputPath(), default=None, metavar="PATH", help="One JSON line per iteration."),
    click.option("--run-dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
                 help="Checkpoint folder (every iteration), for --resume."),
    click.option("--resume", is_flag=True, help="Continue from the checkpoint in --run-dir."),
)
# fmt: on
