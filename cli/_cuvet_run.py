"""cuvet-assign's steps under the verbs' flags (reading INPUT and the model, and gen's
generator), so that cli/cuvet_assign.py keeps to parsing, calling tools/cuvet and writing."""

from __future__ import annotations

from methodkit.cli._common import Run, err_console, print_frame, warn
from methodkit.cli._cuvet_options import COSTS


def spec(opts):
    """The cost flags checked (tools/cuvet/commands.cost_spec) before any data is read."""
    from methodkit.tools.cuvet.commands import cost_spec

    return cost_spec(*(opts[k] for k in COSTS))


def parse(run: Run, raw):
    """The table from INPUT's bytes (read once the flags are checked)."""
    from methodkit.core import io

    return io.read_table(raw, run.params.get("in_format"))


def load(run: Run, frame, spec, opts, strata=None, columns=True, levels=None):
    """INPUT's RCT under the column flags; its warnings on stderr (`levels`: code categories as a training table)."""
    from methodkit.tools.cuvet.commands import rct

    feats = (opts.get("features"), opts.get("exclude", ())) if columns else (None, ())
    kinds = (opts.get("categorical", ()), opts.get("numeric", ())) if columns else ((), ())
    data = rct(frame, opts["treatment"], opts["value"], spec, opts["id_col"], *feats, strata, *kinds, levels)
    for message in data.warnings:
        warn(run.tool.split()[0], message)
    return data


def read_model(run: Run, path: str):
    doc = run.read_json(path)  # a file that is not JSON fails before the model code loads
    from methodkit.tools.cuvet.model import CuvetModel

    return CuvetModel.from_dict(doc, path)


def print_summary(frame, title: str) -> None:
    """A summary table on stderr: rich on a terminal; CSV in a log, every column whole (rich cuts it)."""
    import sys

    if err_console().is_terminal:
        print_frame(frame, title)
    else:
        sys.stderr.write(frame.to_csv(index=False))


def generate(run: Run, source, n, regime, truth_seed, unit_cost, with_hiv, sidecar):
    """`gen`: the RCT table and its JSON sidecar (written here; the table is the caller's to emit)."""
    from methodkit.core import io
    from methodkit.tools.cuvet import synth

    path = sidecar or (f"{run.output}.json" if run.output != "-" else None)
    run.claim_outputs(path)
    if source == "synthetic":
        from methodkit.core.memory import guard_memory

        guard_memory(n * synth.SYNTH_BYTES_PER_ROW, f"a synthetic table of {n:,} rows", "--n")
        frame, side = synth.synthetic(n, run.seed, synth.synthetic_truth(truth_seed, regime))
        side = {**side, "treatment": "treatment", "value": "conversion", "cost_on_outcome": True, "seed": run.seed}
    elif source == "thornton":
        frame, side = synth.thornton(with_hiv)
    else:
        frame, side = synth.social_insure(unit_cost)
    if path is not None:
        io.write_json(side, path, force=run.force, indent=1)
    return frame


def fit_data(run: Run, input, opts):
    """`fit`'s RCT, read once every flag is checked, with the thread count set for it."""
    from methodkit.core import io
    from methodkit.core.threads import hold_blas_to_one_thread, prefer_workqueue
    from methodkit.tools.cuvet.commands import check_budget

    io.require_input(input)  # a missing file is named first, the flags checked before it is read
    if opts["threads"]:  # without -j the count is chosen from the data, before Numba loads
        run.threads()
    hold_blas_to_one_thread()  # before NumPy loads, as -j does it: the BLAS never starts a pool
    prefer_workqueue()  # kernels from this thread only; OpenMP's idle workers spun between them (core.threads)
    check_budget(opts["budget"], opts["budget_frac"])
    cost = spec(opts)
    run.refuse_existing_output()
    data = load(run, parse(run, run.input_bytes(input)), cost, opts)
    if not opts["threads"]:  # no -j: all cores only where the fit has the work for them
        from methodkit.core.backend import set_threads
        from methodkit.tools.cuvet.parallel import default_threads

        set_threads(default_threads(data.n, honest=not opts["no_honest"]))
    return data


def evaluation_inputs(run: Run, input, assignment, opts):
    """`evaluate`'s RCT frame, the assignment table and the RCT under the flags."""
    from methodkit.core import io
    from methodkit.core.errors import UsageError

    io.require_input(input)
    if assignment is None:
        raise UsageError("missing ASSIGNMENT (the output of 'cuvet-assign assign')")
    cost = spec(opts)
    frame = parse(run, run.input_bytes(input))
    table = io.read_table(run.input_bytes(assignment))
    return frame, table, load(run, frame, cost, opts, strata=opts["strata"], columns=False)


def bench_inputs(run: Run, input, opts):
    """`bench`'s methods, budget fractions and train/test splits, every flag checked before INPUT is read."""
    from methodkit.core import io
    from methodkit.tools.cuvet.commands import bench_choices, bench_splits

    io.require_input(input)
    chosen, fracs = bench_choices(opts["methods"], opts["budgets"])
    cost = spec(opts)
    run.refuse_existing_output()
    frame = parse(run, run.input_bytes(input))
    data = load(run, frame, cost, opts, opts["strata"])

    def load_test():
        tframe = io.read_table(run.input_bytes(opts["test_path"]))
        return load(run, tframe, cost, opts, opts["strata"], levels=data.levels), tframe

    test = load_test if opts["test_path"] is not None else None
    return chosen, fracs, bench_splits(data, frame, opts["seeds"], run.seed, opts["folds"], test)
