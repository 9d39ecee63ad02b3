"""casper-solve: a projection layer that guarantees constraint satisfaction (Casper)."""

from __future__ import annotations

from methodkit.cli import _casper_options as opt
from methodkit.cli._casper_options import DEMO  # noqa: F401  (make demo reads it here)
from methodkit.cli._common import Run, common_options, input_argument, tool_group, warn
from methodkit.tools.casper.names import METHODS, TASKS  # noqa: F401  (no NumPy: --help stays fast)


@tool_group(name="casper-solve")
def main():
    """Casper: project predictions onto the constraint-feasible region and decode a valid 0/1 output.

    `compile` lowers a JSON constraint spec (one_hot, exactly_k, at_most_k, all_different,
    linear, flow_path, digit_sum, fixed) to a program P = {y : A y = b, l <= y <= u} over 0/1
    indicators. `project` maps scores to the soft output mu = argmin_{y in P} ||y - theta||^2
    (certified by its KKT residual, differentiable) and to a hard 0/1 output from an exact
    decoder (argmax, Dijkstra, Viterbi, Hungarian or MILP), re-checked with integer arithmetic
    before anything is written. `gen`, `train`, `eval` run the tasks (Warcraft-like paths, visual
    Sudoku, MNIST-style addition); `bench` times the projection and decoders against references.

    Our reading of "closed-form projection in a single forward pass": a closed form where the rows
    have disjoint supports (one_hot: per-group sparsemax; exactly_k, at_most_k, one linear row, fixed,
    a box: one sort-and-threshold per row), certified by the same KKT residual; every program whose
    rows share variables (all_different, flow_path, digit_sum, overlapping rows) is solved by an
    iterative semismooth Newton with an interior-point safeguard (docs/casper.md: figures).

    \b
    EXAMPLES
      casper-solve compile spec.json -o program.npz
      casper-solve project scores.npy --program program.npz -o out.npz > rows.jsonl
      casper-solve gen warcraft --size 12 --n 1000 --n-test 100 -o maps.npz
      casper-solve train maps.npz --task warcraft --method casper -o model.safetensors
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


@main.command("compile")
@input_argument()
@opt.compile_options
@common_options("output", "force", "meta", "quiet", "verbose")
def compile_(input, example, no_check, allow_dense, output, **_):
    """Compile a JSON constraint spec (INPUT) to a program NPZ; print its summary as JSON.

    A spec is {"variables": [{"name", "domain": K or "bool"}], "constraints": [{"type", ...}]} with the
    templates one_hot, exactly_k, at_most_k, all_different, linear, flow_path, digit_sum and fixed;
    --example TEMPLATE prints a worked one, and docs/casper.md gives every field.

    \b
    EXAMPLES
      casper-solve compile --example flow_path > spec.json
      casper-solve compile spec.json -o program.npz
    """
    from methodkit.tools.casper.compiler import compile_spec

    run = Run.from_context()
    if example is not None:  # the worked spec on stdout, INPUT unread
        from methodkit.tools.casper.examples import example as worked

        return opt.print_json(worked(example))
    program = compile_spec(run.read_json(input), check_feasible=not no_check, allow_dense=allow_dense)
    run.refuse_binary_terminal("NPZ", output)
    opt.write_bytes(output, program.to_bytes(), run.force)
    if output != "-":
        run.emit_result(program.summary(), output="-")


@main.command("project")
@input_argument()
@opt.project_options
@common_options("device", "force", "meta", "quiet", "verbose")
def project(input, program_path, score_kind, input_kind, nan, time_limit, decode_weights, strict, output, in_format,
            **_):  # fmt: skip
    """Project scores (INPUT: NPY/NPZ (batch, n_vars) or Parquet, a column per variable).

    Writes soft (float32), hard (uint8), status and valid (uint8, 1 where hard is certified) to the
    NPZ given by -o, and one JSON line per instance on stdout: {i, status, objective, certificate, ms}.
    Every hard output comes from the exact decoder, whatever the projection's status; each row that
    is not ok is a warning on stderr. --device cuda projects the whole batch at once (CuPy, programs
    of at most 4,096 rows; auto falls back to the CPU); decode and certificate run on the CPU.

    \b
    EXAMPLES
      casper-solve project scores.npy --program program.npz -o out.npz
      casper-solve project scores.parquet --program program.npz --scores logits -o out.npz | jq .ms
    """
    from methodkit.core import io
    from methodkit.core.errors import CheckFailed, UsageError
    from methodkit.tools.casper import commands as cmd
    from methodkit.tools.casper.program import Program
    from methodkit.tools.casper.solve import run as solve

    run = Run.from_context()
    io.require_input(input)  # a missing file is named first, the flags checked before it is read
    if program_path is None:
        raise UsageError("missing option '--program' (the NPZ written by 'casper-solve compile')")
    input_kind = cmd.score_input(score_kind, input_kind)
    run.refuse_existing_output(output)
    data = run.input_bytes(input)
    program = Program.from_arrays(io.read_arrays(run.input_bytes(program_path)), program_path)
    scores = cmd.read_scores(data, input, program, nan, run.params.get("in_format"))
    device = cmd.solve_device(run.device(), run.params.get("device"), program)
    with run.progress() as callback:
        result = solve(program, scores, input_kind=input_kind, time_limit=time_limit, device=device,
                       progress=callback, warn=lambda message: warn("casper-solve", message),
                       decode_weights=decode_weights)  # fmt: skip
    if output is not None:
        run.refuse_binary_terminal("NPZ", output)
        io.write_arrays(output, cmd.projection_arrays(result), force=run.force)
    for row in result.rows:
        opt.print_json(row)
    run.write_meta()
    if strict and (message := cmd.strict_failure(result.status)):
        raise CheckFailed(message)


@main.command("gen")
@opt.gen_options
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
    run.refuse_binary_terminal("NPZ", output)
    run.refuse_existing_output(output)
    guard_memory(dataset_bytes(task, size=size, digits=digits, n=n + n_test), f"a {task} dataset", "--n")
    arrays = generate(task, size=size, digits=digits, n=n, n_test=n_test, seed=seed)
    opt.write_bytes(output, dataset_npz(arrays), run.force)
    if output != "-":
        run.emit_result(gen_summary(task, arrays, size=size, digits=digits, n=n, n_test=n_test, seed=seed), output="-")


@main.command("train")
@input_argument()
@opt.train_options
@common_options("seed", "threads", "force", "meta", "quiet", "verbose")
def train(input, task, method, epochs, batch_size, lr, limit, scale, calibrate, calibrate_on, time_limit, output,
          seed, **_):  # fmt: skip
    """Train the task's predictor on a dataset (INPUT) with the layer or a baseline.

    Prints one JSON line per epoch. Writes safetensors weights and a JSON sidecar (PATH with .json:
    config, data fingerprint, Warcraft decode temperatures per map side). Methods: docs/casper.md.

    \b
    EXAMPLES
      casper-solve train maps.npz --task warcraft --method casper -o model.safetensors
      casper-solve train maps12.npz --calibrate-on maps30.npz -o model.safetensors
      casper-solve train add.npz --task mnist-add --epochs 4 -o add.safetensors
    """
    from methodkit.tools.casper.commands import train_inputs, trained_files
    from methodkit.tools.casper.tasks import train as train_model

    run = Run.from_context()
    run.threads()
    sidecar, arrays, task, extra = train_inputs(run.input_bytes, run.refuse_existing_output, input, output, task,
                                                method, calibrate, calibrate_on)  # fmt: skip
    with run.progress() as callback:
        result = train_model(task, method, arrays, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed,
                             limit=limit, scale=scale, calibrate=calibrate, calibration_sets=extra,
                             time_limit=time_limit, progress=callback)  # fmt: skip
    weights, config = trained_files(result, next(iter(run.input_digests.values())))
    opt.write_bytes(output, weights, run.force)
    opt.write_bytes(str(sidecar), config, run.force)
    for row in result.log:
        opt.print_json(row)
    run.write_meta()


@main.command("eval")
@input_argument()
@opt.eval_options
@common_options("seed", "threads", "force", "meta", "quiet", "verbose")
def eval_(input, task, method, model_path, limit, scale, time_limit, output, **_):
    """Evaluate a trained predictor on the dataset's test split (INPUT).

    Prints one JSON line per instance, then a summary line (validity, exact match, cost ratio or
    accuracy, ms per instance); a pishield or deepproblog timeout is a row with status "timeout".

    \b
    EXAMPLES
      casper-solve eval maps.npz --task warcraft --method casper --model model.safetensors | tail -1
    """
    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.casper.commands import dataset_of, eval_scale, load_weights
    from methodkit.tools.casper.tasks import evaluate

    run = Run.from_context()
    run.threads()
    io.require_input(input)
    if model_path is None:
        raise UsageError("missing option '--model' (weights written by 'casper-solve train')")
    run.refuse_existing_output(output)
    arrays, task = dataset_of(run.input_bytes(input), task)
    model = load_weights(run.input_bytes(model_path).data, model_path, task)
    scale = eval_scale(scale, task, arrays, model_path)  # Warcraft: the temperature calibrated at this side
    with run.progress() as callback:
        result = evaluate(task, method, model, arrays, limit=limit, scale=scale, time_limit=time_limit,
                          progress=callback)  # fmt: skip
    if output is not None:
        io.write_arrays(output, result.predictions, force=run.force)
    for row in result.rows:
        opt.print_json(row)
    run.emit_result(result.summary, output="-")


@main.command("bench")
@opt.bench_options
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def bench(quick, batch, baselines, time_limit, output, seed, **_):
    """Time the projection and the decoders against references; CSV to -o, JSON summary on stdout.

    Times are CPU seconds of the process; --baselines times the exact baselines instead.

    \b
    EXAMPLES
      casper-solve bench -o bench.csv | jq .
    """
    import pandas as pd

    from methodkit.core import io
    from methodkit.tools.casper.bench import run as run_bench

    run = Run.from_context()
    with run.progress() as callback:
        result = run_bench(quick=quick, batch=batch, seed=seed, baselines=baselines, time_limit=time_limit,
                           progress=callback)  # fmt: skip
    if output != "-":
        io.write_table(pd.DataFrame(result.rows), output, force=run.force)
    run.emit_result(result.to_dict(), output="-")
