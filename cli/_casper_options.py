"""casper-solve's option groups, one per verb, and the output helpers its verbs share (cli/casper_solve.py
stays a thin command)."""

from __future__ import annotations

import sys

import click

from methodkit.cli._common import DemoStep, OutputPath, option_group
from methodkit.tools.casper.names import METHODS, TASKS  # no NumPy: --help stays fast

DEMO = [
    DemoStep(
        "casper-solve gen warcraft --size 8 --n 96 --n-test 20 -o maps.npz >/dev/null && "
        "casper-solve train maps.npz --method casper --epochs 1 -o model.safetensors >/dev/null && "
        "casper-solve eval maps.npz --method casper --model model.safetensors | tail -1",
        "generated 8x8 maps",
        "valid",
        "Warcraft 8x8 Casper validity",
    ),
    DemoStep(
        "casper-solve bench --quick -o bench.csv",
        "generated programs",
        "projection_speedup_vs_cvxpylayers",
        "projection speed-up",
    ),
]

task_option = click.option(
    "--task", type=click.Choice(TASKS), default=None, help="The dataset's task [default: read from INPUT]."
)

compile_options = option_group(
    click.option(
        "--example",
        type=click.Choice(
            ("one_hot", "exactly_k", "at_most_k", "all_different", "linear", "flow_path", "digit_sum", "fixed")
        ),
        default=None,
        help="Print a worked spec of this template (JSON) instead of compiling; INPUT is not read.",
    ),  # fmt: skip
    click.option("--no-check", is_flag=True, help="Skip the LP/MILP feasibility checks."),
    click.option("--allow-dense", is_flag=True, help="Allow the dense rank check above 20k variables."),
)

project_options = option_group(
    click.option(
        "--program", "program_path", default=None, metavar="PATH", help="Program NPZ from 'compile' (required)."
    ),
    click.option(
        "--scores",
        "score_kind",
        type=click.Choice(("probabilities", "logits")),
        default=None,
        help="What INPUT holds. probabilities [default]: raw scores turned into probabilities (softmax per one-hot "
        "group, sigmoid per boolean) before projecting; logits: projected as given.",
    ),
    click.option("--input", "input_kind", type=click.Choice(("scores", "logits")), default=None, hidden=True),
    click.option(
        "--nan", type=click.Choice(("error", "zero")), default="error", show_default=True, help="NaN/Inf scores."
    ),
    click.option(
        "--time-limit", type=click.FloatRange(min=0.1), default=60.0, show_default=True, help="MILP seconds per row."
    ),
    click.option(
        "--decode-weights",
        type=click.Choice(("linear", "log", "log-p")),
        default="linear",
        show_default=True,
        help="Cost of an indicator in the exact decode: 1 - mu, -log mu, or -log p of the scores' "
        "probabilities (log-p: the most probable valid output under the predictor; no projection).",
    ),
    click.option("--strict", is_flag=True, help="Exit 3 when any row ends timeout or proj_error."),
    click.option(
        "-o", "--output", type=OutputPath(), default=None, metavar="PATH", help="Write soft/hard/status NPZ here."
    ),
    click.option(
        "--in-format",
        type=click.Choice(("npy", "npz", "parquet")),
        default=None,
        help="INPUT format on stdin [default: npy].",
    ),
)

gen_options = option_group(
    click.argument("task", type=click.Choice(TASKS)),
    click.option("--size", type=click.IntRange(min=3), default=12, show_default=True, help="Warcraft grid side."),
    click.option("--digits", type=click.IntRange(min=1), default=1, show_default=True, help="MNIST-add digits N."),
    click.option("--n", "n", type=click.IntRange(min=0), default=1000, show_default=True, help="Training instances."),
    click.option("--n-test", type=click.IntRange(min=1), default=100, show_default=True, help="Test instances."),
)

train_options = option_group(
    task_option,
    click.option("--method", type=click.Choice(METHODS), default="casper", show_default=True, help="Training method."),
    click.option("--epochs", type=click.IntRange(min=1), default=3, show_default=True, help="Epochs."),
    click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True, help="Batch size."),
    click.option(
        "--lr", type=click.FloatRange(min=0, min_open=True), default=3e-3, show_default=True, help="AdamW rate."
    ),
    click.option(
        "--limit", type=click.IntRange(min=1), default=None, help="Use at most this many instances per epoch."
    ),
    click.option(
        "--scale",
        type=click.FloatRange(min=0, min_open=True),
        default=1.0,
        show_default=True,
        help="Warcraft: multiply the cell probabilities by this while training through the projection.",
    ),
    click.option(
        "--calibrate/--no-calibrate",
        default=True,
        show_default=True,
        help="Warcraft casper: after training, pick the decode temperature on 16-64 training maps "
        "(stored in the sidecar).",
    ),
    click.option(
        "--calibrate-on",
        "calibrate_on",
        multiple=True,
        metavar="PATH",
        help="Warcraft casper: also calibrate on this dataset's training maps (its map side gets its own "
        "temperature; give the sizes you will decode, e.g. a 30x30 set when training at 12x12). Repeatable.",
    ),
    click.option(
        "--time-limit",
        type=click.FloatRange(min=0.1),
        default=600.0,
        show_default=True,
        help="sl-exact: seconds allowed for the SDD compilation.",
    ),
    click.option(
        "-o",
        "--output",
        type=OutputPath(sidecars=(".json",)),
        default=None,
        metavar="PATH",
        help="Weights (.safetensors), JSON sidecar beside it (required).",
    ),
)

eval_options = option_group(
    task_option,
    click.option("--method", type=click.Choice(METHODS), default="casper", show_default=True, help="Decode method."),
    click.option("--model", "model_path", default=None, metavar="PATH", help="Weights from 'train' (required)."),
    click.option(
        "--limit", type=click.IntRange(min=1), default=None, help="Evaluate at most this many test instances."
    ),
    click.option(
        "--scale",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help="Warcraft: multiply the cell scores before projecting [default: the decode temperature calibrated "
        "at this map side (else the nearest calibrated side) in the model's JSON sidecar, else 1].",
    ),
    click.option(
        "--time-limit",
        type=click.FloatRange(min=0.1),
        default=600.0,
        show_default=True,
        help="pishield / deepproblog: seconds allowed (the shield build; one DeepProbLog query).",
    ),
    click.option(
        "-o", "--output", type=OutputPath(), default=None, metavar="PATH", help="Write the predictions NPZ here."
    ),
)

bench_options = option_group(
    click.option("--quick", is_flag=True, help="Small sizes (for make demo)."),
    click.option(
        "--batch", type=click.IntRange(min=1), default=32, show_default=True, help="Instances in the projection case."
    ),
    click.option(
        "--baselines",
        is_flag=True,
        help="Instead: time the exact baselines (sl-exact SDD compile per grid side, DeepProbLog per N) "
        "under --time-limit.",
    ),
    click.option(
        "--time-limit",
        type=click.FloatRange(min=0.1),
        default=600.0,
        show_default=True,
        help="Seconds per baseline case.",
    ),
)


def write_bytes(output: str, data: bytes, force: bool) -> None:
    from methodkit.core import io

    with io.atomic_write(output, binary=True, force=force) as handle:
        handle.write(data)


def print_json(record: dict) -> None:
    from methodkit.core.io import dumps_json

    sys.stdout.write(dumps_json(record) + "\n")
    sys.stdout.flush()
