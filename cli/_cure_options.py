"""cure-unlearn's option groups and demo (sqlite-utils' decorator pattern); cli/cure_unlearn.py stays thin."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, FiniteFloatRange, OutputPath, option_group

ALGOS = ("td3bc", "iql", "cql")
METHODS = ("cure", "retrain", "finetune", "neggrad", "random-reward", "trajdeleter", "cure-uniform", "cure-noactor")
ONE_TORCH_THREAD = "1 thread"

DEMO = [
    DemoStep(
        "cure-unlearn collect --scale 0.1 --chunk 50 -o d.npz -q > /dev/null && "
        "cure-unlearn train d.npz --steps 300 --hidden 64 -j 1 -o m0.safetensors -q > /dev/null && "
        "cure-unlearn train d.npz --steps 300 --hidden 64 --exclude-contributor F-mix -j 1 -o mr.safetensors -q "
        "> /dev/null && cure-unlearn forget m0.safetensors d.npz --forget-contributor F-mix --baseline-steps 200 "
        "--calib-trajs 10 -j 1 -o mc.safetensors -q > /dev/null && cure-unlearn audit d.npz --original "
        "m0.safetensors --reference-retrain mr.safetensors mc.safetensors --forget-contributor F-mix --episodes 1 "
        "--max-episode-steps 200 --shadows 0 -j 1 -q | jq -c '.models[-1]'",
        "HalfCheetah-v5, 75 chunks of 50 steps, TD3+BC 300 steps",
        "fir",
        "CURE forget-influence remaining",
    )
]

forget_set_options = option_group(
    click.option("--forget", "forget_path", default=None, metavar="IDS.txt", help="Trajectory ids to forget."),
    click.option("--forget-contributor", default=None, metavar="NAME", help="Forget a contributor's trajectories."),
)

exclude_options = option_group(
    click.option("--exclude", "exclude_path", default=None, metavar="IDS.txt", help="Trajectory ids left out."),
    click.option("--exclude-contributor", default=None, metavar="NAME", help="Leave a contributor out."),
)

train_options = option_group(
    click.option("--algo", type=click.Choice(ALGOS), default="td3bc", show_default=True, help="Backbone."),
    click.option("--steps", type=click.IntRange(min=1), default=50000, show_default=True, help="Gradient steps."),
    click.option("--hidden", type=click.IntRange(min=4), default=256, show_default=True, help="MLP width (2 layers)."),
    click.option("--batch-size", type=click.IntRange(min=2), default=256, show_default=True, help="Transitions/step."),
    click.option("--checkpoint-every", type=click.IntRange(min=0), default=5000, show_default=True,
                 help="Save MODEL.partial.safetensors every N steps (0: only when interrupted)."),  # fmt: skip
    click.option("--resume", is_flag=True, help="Continue from MODEL.partial.safetensors (same data and flags)."),
)


def _float(name, default, help_text, low=0.0):
    return click.option(name, type=FiniteFloatRange(min=low), default=default, show_default=True, help=help_text)


cure_options = option_group(
    click.option("--method", type=click.Choice(METHODS), default="cure", show_default=True, help="Unlearning method."),
    click.option("--algo", type=click.Choice(ALGOS), default=None, help="Expected backbone [default: the model's]."),
    click.option("--steps", type=click.IntRange(min=1), default=None, help="Steps [default: 5% of the model's]."),
    click.option("--batch-size", type=click.IntRange(min=2), default=256, show_default=True, help="Per side (D_r, D_f)."),
    click.option("--baseline", type=click.Choice(("expectile", "qmu")), default="expectile", show_default=True,
                 help="b(s): expectile V_R of Q_0 on D_r, or Q_0(s, mu_R(s)) with a BC policy."),  # fmt: skip
    click.option("--baseline-steps", type=click.IntRange(min=1), default=2000, show_default=True, help="Step A steps."),
    _float("--kappa", 0.5, "Margin m = kappa * std(Q_0 on D_r)."),
    _float("--lambda-s", 1.0, "Weight of the gated critic suppression."),
    _float("--lambda-a", 0.1, "Weight of the retained Q anchor."),
    _float("--lambda-r", 0.5, "Weight of the actor's repulsion from forget actions."),
    click.option("--rho", type=FiniteFloatRange(min=0), default=None, help="Repulsion radius [default: 0.25*act_dim]."),
    _float("--lambda-p", 0.1, "Weight of the actor's anchor to pi_0 on D_r."),
    _float("--w-min", 0.1, "Smallest gate."),
    click.option("--c0", type=FiniteFloatRange(-1, 1), default=None, help="Gate centre [default: 10% calib. quantile]."),
    click.option("--temp", type=FiniteFloatRange(min=0, min_open=True), default=None,
                 help="Gate temperature [default: 0.5 * std of calibration cosines]."),  # fmt: skip
    click.option("--calib-trajs", type=click.IntRange(min=2), default=50, show_default=True,
                 help="Retained trajectories kept out of g_R to calibrate the gate."),  # fmt: skip
    click.option("--grad-layers", type=click.Choice(("all", "last2")), default="all", show_default=True,
                 help="Critic parameters in the cosines."),  # fmt: skip
    click.option("--rescore-every", type=click.IntRange(min=0), default=0, show_default=True,
                 help="Recompute cosines every K steps (0 = never)."),  # fmt: skip
    click.option("--scores-out", type=OutputPath(), default=None, metavar="PATH",
                 help="Per-trajectory cosine, gate and overlap (CSV)."),  # fmt: skip
    click.option("--allow-dataset-mismatch", is_flag=True, help="Accept a data set other than the model's."),
    click.option("--checkpoint-every", type=click.IntRange(min=0), default=500, show_default=True,
                 help="Save MODEL.partial.safetensors every N steps (0: after steps A-B and when interrupted)."),  # fmt: skip
    click.option("--resume", is_flag=True, help="Continue from MODEL.partial.safetensors (same model, data, flags)."),
    click.option("--device", type=click.Choice(("cpu", "cuda")), default="cpu", show_default=True,
                 help="Where the support-overlap 1-NN runs (cuda: CuPy); torch stays on the CPU."),  # fmt: skip
)

audit_options = option_group(
    click.option("--original", required=True, metavar="MODEL", help="The original model (return_ratio = 1)."),
    click.option("--reference-retrain", default=None, metavar="MODEL", help="Exact retrain (fir, cost_ratio)."),
    click.option("--episodes", type=click.IntRange(min=1), default=10, show_default=True, help="Evaluation episodes."),
    click.option("--max-episode-steps", type=click.IntRange(min=1), default=1000, show_default=True, help="Per episode."),
    click.option("--shadows", type=click.IntRange(min=0), default=4, show_default=True,
                 help="Shadow copies for the Grubbs audit (0 or 1 = no unlearn_rate)."),  # fmt: skip
    click.option("--shadow-steps", type=click.IntRange(min=1), default=200, show_default=True, help="Per shadow."),
    click.option("--per-traj-out", type=OutputPath(), default=None, metavar="PATH",
                 help="Per forget trajectory statistics (CSV)."),  # fmt: skip
    click.option("--fail-above", type=FiniteFloatRange(min=0), default=None, metavar="FIR",
                 help="Exit 3 when an audited model's fir exceeds FIR."),  # fmt: skip
    click.option("--allow-dataset-mismatch", is_flag=True, help="Accept a data set other than the models'."),
)
