"""casper-solve: a projection layer that guarantees constraint satisfaction (Casper)."""

from __future__ import annotations

import sys

import click

from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, input_argument, tool_group, warn
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


@tool_group(name="casper-solve")
def main():
    """Casper: project predictions onto the constraint-feasible region, exactly, in one pass.

    `compile` lowers a JSON constraint spec (one_hot, exactly_k, at_most_k,
    all_different, linear, flow_path, digit_sum, fixed) to a program: P = {y : A y = b,
    l <= y <= u} over 0/1 indicators, with slacks for inequalities, tagged by structure
    (onehot, flow, chain, assignment, general). `project` maps scores to (1) the soft
    output mu = argmin_{y in P} ||y - theta||^2, exact to machine precision
    (per-group sparsemax when only one-hot rows, otherwise semismooth Newton on the
    dual, each step one sparse LDL^T (QDLDL) refactored on the fixed pattern of A A^T,
    SuperLU where that fails; scores far outside P can stall Newton, so when ||A y - b|| has
    not halved in 4 steps (or after 25) an interior-point QP (Clarabel) supplies a
    dual point and Newton finishes from it: at most 50 steps in all, certified by the
    same KKT residual (||A mu - b|| <= 1e-10 + 1e-13 ||theta||_inf, at most 1e-6), else status
    proj_error with a NaN mu and a hard output still decoded exactly (from the safeguard's point,
    else the clipped scores); with --device cuda the whole batch is projected at once on CuPy) and differentiable
    in closed form (J = D - D A^T (A D A^T)^+ A D); and (2) the hard output, a 0/1
    assignment valid by construction: argmin over the valid set C of sum_i w_i y_i, by
    argmax, Dijkstra, Viterbi over carries, Hungarian or HiGHS MILP; every row is
    re-checked with integer arithmetic before anything is written.

    \b
    What is exact: for onehot and assignment programs mu is the projection onto
    conv(C) (SparseMAP's object); for flow, onto the unit-flow polytope; for Sudoku
    and digit_sum, P is an outer relaxation of conv(C). The hard output with
    w = 1 - mu equals the Euclidean projection of mu onto C whenever every valid y has
    the same number of ones (one-hot encodings, Sudoku, digit sums); the MILP backend
    uses w = 1/2 - mu, the exact Euclidean projection for any cardinality (our
    reading). On paths, with w > 0, the decode is a min-cost simple path; the exact
    Euclidean projection onto simple paths is NP-hard and is not claimed.

    `gen`, `train`, `eval` run the tasks (Warcraft-like shortest paths, visual Sudoku,
    MNIST-style addition on scikit-learn's 8x8 digits) with the layer or a baseline
    (unconstrained, sl-sample, sl-exact via PySDD, PyEPO's DBB / perturbed
    Fenchel-Young / I-MLE / Frank-Wolfe with our Dijkstra as oracle, PiShield, DeepProbLog);
    `bench` measures the projection against cvxpylayers and the decoders against
    networkx and brute force, and with --baselines times the exact baselines out.

    \b
    EXAMPLES
      casper-solve compile spec.json -o program.npz
      casper-solve project scores.npy --program program.npz -o out.npz > rows.jsonl
      casper-solve gen warcraft --size 12 --n 1000 --n-test 100 -o maps.npz
      casper-solve train maps.npz --task warcraft --method casper -o model.safetensors
      casper-solve train maps12.npz --calibrate-on maps30.npz -o model.safetensors
      casper-solve eval maps.npz --task warcraft --method casper --model model.safetensors | tail -1
      casper-solve bench -o bench.csv | jq .projection_speedup_vs_cvxpylayers

    \b
    EXIT STATUS
      0  success (rows ending timeout or proj_error are data, each a stderr warning)
      1  failure while running, including a failed internal certificate
      2  bad usage or bad input (malformed or infeasible spec, scores of the wrong shape, NaN scores)
      3  --strict: some row ended timeout or proj_error
      130  interrupted
    """


def _refuse_terminal_binary(output: str) -> None:
    from methodkit.core.errors import UsageError

    if output == "-" and sys.stdout.isatty():
        raise UsageError("refusing to write binary NPZ to a terminal; pass -o FILE or pipe the output")


def _write_bytes(output: str, data: bytes, force: bool) -> None:
    from methodkit.core import io

    with io.atomic_write(output, binary=True, force=force) as handle:
        handle.write(data)


def _print_json(record: dict) -> None:
    from methodkit.core.io import dumps_json

    sys.stdout.write(dumps_json(record) + "\n")
    sys.stdout.flush()


@main.command("compile")
@input_argument()
@click.option("--no-check", is_flag=True, help="Skip the LP/MILP feasibility checks.")
@click.option("--allow-dense", is_flag=True, help="Allow the dense rank check above 20k variables.")
@common_options("output", "force", "meta", "quiet", "verbose")
def compile_(input, no_check, allow_dense, output, **_):
    """Compile a JSON constraint spec (INPUT) to a program NPZ; print its summary as JSON.

    \b
    EXAMPLES
      casper-solve compile spec.json -o program.npz
    """
    from methodkit.tools.casper.compiler import compile_spec

    run = Run.from_context()
    spec = run.read_json(input)
    program = compile_spec(spec, check_feasible=not no_check, allow_dense=allow_dense)
    _refuse_terminal_binary(output)
    _write_bytes(output, program.to_bytes(), run.force)
    if output != "-":
        run.emit_result(program.summary(), output="-")


@main.command("project")
@input_argument()
@click.option("--program", "program_path", default=None, metavar="PATH", help="Program NPZ from 'compile' (required).")
@click.option(
    "--input",
    "input_kind",
    type=click.Choice(("scores", "logits")),
    default="scores",
    show_default=True,
    help="scores: softmax per one-hot group / sigmoid per boolean, then project; logits: project as given.",
)
@click.option("--nan", type=click.Choice(("error", "zero")), default="error", show_default=True, help="NaN/Inf scores.")
@click.option(
    "--time-limit", type=click.FloatRange(min=0.1), default=60.0, show_default=True, help="MILP seconds per row."
)
@click.option("--strict", is_flag=True, help="Exit 3 when any row ends timeout or proj_error.")
@click.option(
    "-o", "--output", type=OutputPath(), default=None, metavar="PATH", help="Write soft/hard/status NPZ here."
)
@click.option(
    "--in-format",
    type=click.Choice(("npy", "npz", "parquet")),
    default=None,
    help="INPUT format on stdin [default: npy].",
)
@common_options("device", "force", "meta", "quiet", "verbose")
def project(input, program_path, input_kind, nan, time_limit, strict, output, in_format, **_):
    """Project scores (INPUT: NPY/NPZ (batch, n_vars) or Parquet, a column per variable).

    Writes soft (float32), hard (uint8), status and valid (uint8, 1 where hard is certified) to the
    NPZ given by -o, and one JSON line per instance on stdout: {i, status, objective, certificate, ms}.
    Every row's hard output comes from the exact decoder: a proj_error row (soft NaN) is decoded from
    the interior-point safeguard's point or the clipped scores; each row that is not ok is a warning on
    stderr, and --strict makes them exit 3.

    --device cuda projects the whole batch at once on the GPU (CuPy: lockstep semismooth Newton
    with batched dense solves, programs of at most 4,096 rows); auto uses it when a GPU is present
    and the program fits, else the CPU path (sparse LDL^T per instance). Decode and certificate run on
    the CPU either way.

    \b
    EXAMPLES
      casper-solve project scores.npy --program program.npz -o out.npz
      casper-solve project scores.parquet --program program.npz --input logits -o out.npz | jq .ms
    """
    from methodkit.core import io
    from methodkit.core.errors import CheckFailed, UsageError
    from methodkit.tools.casper.commands import projection_arrays, read_scores
    from methodkit.tools.casper.program import Program
    from methodkit.tools.casper.solve import run as solve

    run = Run.from_context()
    io.require_input(input)  # a missing file is named first, the flags checked before it is read
    if program_path is None:
        raise UsageError("missing option '--program' (the NPZ written by 'casper-solve compile')")
    run.refuse_existing_output(output)
    data = run.input_bytes(input)
    program = Program.from_arrays(io.read_arrays(run.input_bytes(program_path)), program_path)
    scores = read_scores(data, input, program, nan, run.params.get("in_format"))
    device = run.device()
    if device == "cuda" and run.params.get("device") == "auto":
        from methodkit.tools.casper.batched import MAX_ROWS

        device = "cuda" if program.m <= MAX_ROWS else "cpu"
    with run.progress() as callback:
        result = solve(
            program,
            scores,
            input_kind=input_kind,
            time_limit=time_limit,
            device=device,
            progress=callback,
            warn=lambda message: warn("casper-solve", message),
        )
    if output is not None:
        _refuse_terminal_binary(output)
        io.write_arrays(output, projection_arrays(result), force=run.force)
    for row in result.rows:
        _print_json(row)
    run.write_meta()
    if strict and any(s != "ok" for s in result.status):
        bad = sum(s != "ok" for s in result.status)
        raise CheckFailed(f"--strict: {bad} of {len(result.status)} rows ended timeout or proj_error")


@main.command("gen")
@click.argument("task", type=click.Choice(TASKS))
@click.option("--size", type=click.IntRange(min=3), default=12, show_default=True, help="Warcraft grid side.")
@click.option("--digits", type=click.IntRange(min=1), default=1, show_default=True, help="MNIST-add digits N.")
@click.option("--n", "n", type=click.IntRange(min=0), default=1000, show_default=True, help="Training instances.")
@click.option("--n-test", type=click.IntRange(min=1), default=100, show_default=True, help="Test instances.")
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def gen(task, size, digits, n, n_test, output, seed, **_):
    """Generate a TASK dataset (NPZ with train_ and test_ arrays); print a JSON summary.

    \b
    EXAMPLES
      casper-solve gen warcraft --size 30 --n 200 --n-test 50 -o maps30.npz
      casper-solve gen mnist-add --digits 15 --n-test 200 -o add15.npz
      casper-solve gen sudoku --n 500 --n-test 100 -o sudoku.npz
    """
    from methodkit.core.memory import guard_memory
    from methodkit.tools.casper.commands import dataset_npz, gen_summary
    from methodkit.tools.casper.tasks import dataset_bytes, generate

    run = Run.from_context()
    _refuse_terminal_binary(output)
    run.refuse_existing_output(output)
    guard_memory(dataset_bytes(task, size=size, digits=digits, n=n + n_test), f"a {task} dataset", "--n")
    arrays = generate(task, size=size, digits=digits, n=n, n_test=n_test, seed=seed)
    _write_bytes(output, dataset_npz(arrays), run.force)
    if output != "-":
        run.emit_result(gen_summary(task, arrays, size=size, digits=digits, n=n, n_test=n_test, seed=seed), output="-")


def _load_dataset(run: Run, path: str, task: str | None):
    """The dataset's arrays and its task (checked against --task when given)."""
    from methodkit.tools.casper.commands import dataset_of

    return dataset_of(run.input_bytes(path), task)


_TASK_OPTION = click.option(
    "--task", type=click.Choice(TASKS), default=None, help="The dataset's task [default: read from INPUT]."
)


@main.command("train")
@input_argument()
@_TASK_OPTION
@click.option("--method", type=click.Choice(METHODS), default="casper", show_default=True, help="Training method.")
@click.option("--epochs", type=click.IntRange(min=1), default=3, show_default=True, help="Epochs.")
@click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True, help="Batch size.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True), default=3e-3, show_default=True, help="AdamW rate.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Use at most this many instances per epoch.")
@click.option(
    "--scale",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Warcraft: multiply the cell probabilities by this while training through the projection.",
)
@click.option(
    "--calibrate/--no-calibrate",
    default=True,
    show_default=True,
    help="Warcraft casper: after training, pick the decode temperature on 16-64 training maps (stored in the sidecar).",
)
@click.option(
    "--calibrate-on",
    "calibrate_on",
    multiple=True,
    metavar="PATH",
    help="Warcraft casper: also calibrate on this dataset's training maps (its map side gets its own "
    "temperature; give the sizes you will decode, e.g. a 30x30 set when training at 12x12). Repeatable.",
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=0.1),
    default=600.0,
    show_default=True,
    help="sl-exact: seconds allowed for the SDD compilation.",
)
@click.option(
    "-o",
    "--output",
    type=OutputPath(sidecars=(".json",)),
    default=None,
    metavar="PATH",
    help="Weights (.safetensors), JSON sidecar beside it (required).",
)
@common_options("seed", "threads", "force", "meta", "quiet", "verbose")
def train(
    input, task, method, epochs, batch_size, lr, limit, scale, calibrate, calibrate_on, time_limit, output, seed, **_
):
    """Train the task's predictor on a dataset (INPUT) with the layer or a baseline.

    Prints one JSON line per epoch. Writes the weights as safetensors and a JSON sidecar
    (PATH with .json) holding the config and the data fingerprint.

    Warcraft with --method casper trains through the projection at --scale (1: the Jacobian
    is informative there), then calibrates the decode temperature s (the cell scores z enter the
    projection as s*z): the s in {1, 2, 4, 8, 16, 32, 64} whose decoded paths on 64 training maps (22 at 30x30)
    have the lowest mean cost ratio (by their true costs, train_costs; Hamming distance to the
    labelled paths when a dataset has no costs), once per map side (the training set's and each
    --calibrate-on set's), stored in the sidecar as decode_scales (ours: the quadratic term spreads
    mu over near-optimal paths, more of them on larger maps, so the best s grows with the side;
    the CNN is fully convolutional and can be trained at 12x12 and decoded at 30x30).
    Baselines: sl-sample (semantic loss from 64 Bernoulli samples), sl-exact (exact semantic loss on a PySDD circuit; grids of side <= 4, longer compilations stop
    at --time-limit and exit 1), pyepo-dbb / pyepo-pfyl / pyepo-imle / pyepo-fw (PyEPO's DBB,
    perturbed Fenchel-Young, I-MLE and regularised Frank-Wolfe with our Dijkstra as the oracle;
    the CNN then predicts cell costs), pishield (trains the plain classifier; the shield is applied
    by eval). deepproblog is evaluation only.

    \b
    EXAMPLES
      casper-solve train maps.npz --task warcraft --method casper -o model.safetensors
      casper-solve train maps12.npz --calibrate-on maps30.npz -o model.safetensors
      casper-solve train add.npz --task mnist-add --epochs 4 -o add.safetensors
    """
    from pathlib import Path

    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.casper.commands import check_calibration, trained_files
    from methodkit.tools.casper.tasks import train as train_model

    run = Run.from_context()
    run.threads()
    io.require_input(input)
    if output is None or output == "-":
        raise UsageError("pass -o PATH.safetensors for the trained weights")
    sidecar = Path(output).with_suffix(".json")
    run.refuse_existing_output(output, sidecar)
    arrays, task = _load_dataset(run, input, task)
    check_calibration(calibrate_on, task, method, calibrate)
    extra = []
    for path in calibrate_on:
        found, found_task = _load_dataset(run, path, None)
        if found_task != "warcraft":
            raise UsageError(f"--calibrate-on {path}: holds a {found_task} dataset, not warcraft")
        extra.append(found)
    with run.progress() as callback:
        result = train_model(
            task,
            method,
            arrays,
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            seed=seed,
            limit=limit,
            scale=scale,
            calibrate=calibrate,
            calibration_sets=tuple(extra),
            time_limit=time_limit,
            progress=callback,
        )
    weights, config = trained_files(result, next(iter(run.input_digests.values())))
    _write_bytes(output, weights, run.force)
    _write_bytes(str(sidecar), config, run.force)
    for row in result.log:
        _print_json(row)
    run.write_meta()


@main.command("eval")
@input_argument()
@_TASK_OPTION
@click.option("--method", type=click.Choice(METHODS), default="casper", show_default=True, help="Decode method.")
@click.option("--model", "model_path", default=None, metavar="PATH", help="Weights from 'train' (required).")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Evaluate at most this many test instances.")
@click.option(
    "--scale",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Warcraft: multiply the cell scores before projecting [default: the decode temperature calibrated "
    "at this map side (else the nearest calibrated side) in the model's JSON sidecar, else 1].",
)
@click.option(
    "--time-limit",
    type=click.FloatRange(min=0.1),
    default=600.0,
    show_default=True,
    help="pishield / deepproblog: seconds allowed (the shield build; one DeepProbLog query).",
)
@click.option("-o", "--output", type=OutputPath(), default=None, metavar="PATH", help="Write the predictions NPZ here.")
@common_options("seed", "threads", "force", "meta", "quiet", "verbose")
def eval_(input, task, method, model_path, limit, scale, time_limit, output, **_):
    """Evaluate a trained predictor on the dataset's test split (INPUT).

    Prints one JSON line per instance, then a summary line (validity, exact match,
    cost ratio or accuracy, ms per instance). pishield and deepproblog run under --time-limit;
    a timeout is a result (rows with status "timeout", counted in the summary), not a failure.

    \b
    EXAMPLES
      casper-solve eval maps.npz --task warcraft --method casper --model model.safetensors | tail -1
    """
    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.casper.commands import eval_scale, load_weights
    from methodkit.tools.casper.tasks import evaluate

    run = Run.from_context()
    run.threads()
    io.require_input(input)
    if model_path is None:
        raise UsageError("missing option '--model' (weights written by 'casper-solve train')")
    run.refuse_existing_output(output)
    arrays, task = _load_dataset(run, input, task)
    model = load_weights(run.input_bytes(model_path).data, model_path, task)
    scale = eval_scale(scale, task, arrays, model_path)  # Warcraft: the temperature calibrated at this side
    with run.progress() as callback:
        result = evaluate(
            task, method, model, arrays, limit=limit, scale=scale, time_limit=time_limit, progress=callback
        )
    if output is not None:
        io.write_arrays(output, result.predictions, force=run.force)
    for row in result.rows:
        _print_json(row)
    run.emit_result(result.summary, output="-")


def _sidecar_scale(model_path: str, side: int) -> float:
    """The decode temperature stored beside the weights by 'train' (tools/casper/commands.sidecar_scale)."""
    from methodkit.tools.casper.commands import sidecar_scale

    return sidecar_scale(model_path, side)


@main.command("bench")
@click.option("--quick", is_flag=True, help="Small sizes (for make demo).")
@click.option(
    "--batch", type=click.IntRange(min=1), default=32, show_default=True, help="Instances in the projection case."
)
@click.option(
    "--baselines",
    is_flag=True,
    help="Instead: time the exact baselines (sl-exact SDD compile per grid side, DeepProbLog per N) under --time-limit.",
)
@click.option(
    "--time-limit", type=click.FloatRange(min=0.1), default=600.0, show_default=True, help="Seconds per baseline case."
)
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def bench(quick, batch, baselines, time_limit, output, seed, **_):
    """Time the projection and the decoders against references; CSV to -o, JSON summary on stdout.

    Times are CPU seconds of the process (all threads), so ratios hold on a shared machine; the
    projection case (30x30 flow polytope, --batch instances, cvxpylayers run serially) also
    records wall seconds.

    With --baselines: compile the Warcraft path constraint to an SDD (PySDD; sl-exact) for grid
    sides 3, 4, 5 and 30, and run DeepProbLog's exact inference of one N-digit sum for N = 1, 2, ...
    15, each under --time-limit; a timeout is a row (status timeout), and the summary gives the
    largest grid side and the largest N that finished.

    \b
    EXAMPLES
      casper-solve bench -o bench.csv | jq .
    """
    import pandas as pd

    from methodkit.core import io
    from methodkit.tools.casper.bench import run as run_bench

    run = Run.from_context()
    with run.progress() as callback:
        result = run_bench(
            quick=quick, batch=batch, seed=seed, baselines=baselines, time_limit=time_limit, progress=callback
        )
    if output != "-":
        io.write_table(pd.DataFrame(result.rows), output, force=run.force)
    run.emit_result(result.to_dict(), output="-")
