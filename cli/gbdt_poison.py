"""gbdt-poison: clean-label poisoning of LightGBM gradient-boosted trees (influence, attack, sweep, eval)."""

from __future__ import annotations

import functools

import click

from methodkit.cli._common import DemoStep, Run, common_options, input_argument, tool_group, warn
from methodkit.cli._gbdt_options import attack_options, attack_outputs, data_options, sweep_options

PROG = "gbdt-poison"
DEMO = [
    DemoStep(
        "gbdt-poison attack --dataset credit-g --budget 0.1 --eps 4 --iters 6 -o poisoned.csv",
        "credit-g",
        "drop.test_f1",
        "test F1 drop (Credit-g, 10% rows, eps 4)",
    ),
]


@tool_group(name=PROG)
def main():
    """Clean-label poisoning of LightGBM gradient-boosted trees.

    The attacker changes a few numeric cells of at most budget × n train rows,
    never their labels, so that the victim LightGBM retrained on the data does
    worse on unseen test data. Rows are chosen by BoostIn influence on the
    attacker's validation loss, columns by split gain, and the rows move inside
    class-shaped Mahalanobis ellipsoids of radius eps, clipped to the data's
    range and integer lattice, so that every poisoned row stays plausible.
    The default search (--search threshold) moves each row along its columns
    across the victim's own split thresholds: one projected probe per threshold
    interval within reach, scored by the first-order change of the validation
    loss through the trees' leaf values, then a line search over how many rows
    take their best move, judged by retraining. --search zo is the issue's
    ZO-PSGD with Gaussian finite-difference probes. Probes and iterates are
    both projected; the best visited point is kept because the objective is
    piecewise constant.

    \b
    VERBS
      influence  BoostIn score of every train row (CSV row,influence,label,rank)
      attack     poison the train rows, write the poisoned table + a manifest
      sweep      the attack over an eps grid × seeds, with baselines (CSV)
      eval       train the victim on a table and score it on the test table

    \b
    EXAMPLES
      gbdt-poison attack --dataset credit-g --budget 0.1 --eps 4 -o poisoned.csv
      gbdt-poison eval poisoned.csv --dataset credit-g | jq .test_f1
      gbdt-poison influence train.csv --label y | head -5
      gbdt-poison attack train.csv --test test.csv --label y -o p.parquet --manifest p.json
      gbdt-poison sweep --dataset credit-g --seeds 0,1,2,3,4 --budget 0.1 -o curve.csv

    \b
    NOTES
      Our reading where the paper is vague:
      - --search threshold (default, ours): a GBDT only sees a value cross a
        split threshold, so Gaussian probes (2q = 8 in B x k dims) mostly
        measure nothing; --search zo keeps the issue's ZO-PSGD (the two
        compared: docs/gbdt.md).
      - Accept-best keeps the best of the iterates AND of the projected probes:
        both are feasible points whose victim was already trained.
      - --transform log1p acts on non-negative columns with skewness >= 1.
      - The poisoned table keeps every row of INPUT (the attacker's validation
        rows untouched; --drop-validation leaves them out), and the reported
        victim is trained on exactly that file, so 'eval' on it reproduces them.
      - BoostIn's lambda is max(lambda_l2, 1e-3), as tree_influence does.
      - -j defaults to 1: on a busy machine LightGBM's OpenMP spin-waits make
        2 threads far slower than 1 (docs/gbdt.md); results can differ by -j.
      - Bad input data exit 2 (methodkit's convention), not 1.

    \b
    EXIT STATUS
      0  success
      1  failure while running (LightGBM error; a *.partial.json trace is kept)
      2  bad usage or bad input data (missing column, non-binary label, ...)
      3  --fail-above-f1: the F1 after poisoning is above the gate
      130  interrupted
    """


def _threads(params: dict) -> int:
    """Apply -j before anything imports numba: core.backend.set_threads sets NUMBA_NUM_THREADS, and a
    change after numba's import makes its next compilation raise (config reload)."""
    from methodkit.core.backend import set_threads

    return set_threads(params["threads"])


def _warn_all(messages: list[str], quiet: bool) -> None:
    if not quiet:
        for message in messages:
            warn(PROG, message)


# ---------------------------------------------------------------- verbs


@main.command("influence")
@input_argument()
@data_options
@common_options("output", "format", "in_format", "seed", "force", "meta", "quiet", "verbose")
def influence_cmd(input, **params):
    """BoostIn influence of every train row on the attacker's validation loss.

    Trains the clean victim on the train part, then scores each row: positive =
    the row lowers the validation logloss (helpful), the attack's candidates.
    Writes CSV row,influence,label,rank (row = 0-based position in INPUT).

    \b
    EXAMPLES
      gbdt-poison influence train.csv --label y | head -5
      gbdt-poison influence --dataset credit-g -o credit-influence.csv

    \b
    EXIT STATUS
      0  success
      1  failure while running
      2  bad usage or bad input data
      130  interrupted
    """
    _threads(params)
    from methodkit.tools.gbdt import runs

    run = Run.from_context()
    runs.refuse_inputs([run.output], [input, params.get("test_path")])
    problem = runs.prepare(run.read_table, input, params, run.seed)
    with run.progress() as progress:
        frame = runs.influence_table(problem, runs.victim(params, run.seed), progress)
    _warn_all(problem.warnings, run.quiet)
    run.emit_table(frame)


@main.command("attack")
@input_argument()
@data_options
@attack_options
@attack_outputs
@common_options("output", "in_format", "seed", "force", "meta", "quiet", "verbose")
def attack_cmd(input, **params):
    """Poison the train rows and write the poisoned table and its manifest.

    OUTPUT (-o, required: CSV or Parquet by extension) is INPUT's train table,
    every row in file order, labels byte-identical, with only the moved cells
    changed; the attacker's validation rows (positions in the manifest) are kept
    untouched, or left out with --drop-validation. "clean" and "poisoned" are the
    victim trained on the same rows as read and on exactly OUTPUT; "attacker" is
    the search's view (trained on the train part, scored on the validation
    rows). The manifest records the data hash, poisoned rows with old and new
    values, radii, chosen columns and their gain, influence scores, eps, seed,
    victim parameters, LightGBM version, clean and poisoned metrics, the
    objective trace and the plausibility report. One JSON summary line goes to
    stdout. The reported metrics come from a true retrain on the written data.

    After every iteration the search state (iterate, best point, step, RNG) is
    kept in OUTPUT.partial.json; rerunning the same command after an interruption
    or a LightGBM failure continues from it and ends with the same result as an
    uninterrupted run. The file is removed on success; a checkpoint of other
    settings or data is refused (remove it, or --force to start over).
    --fast-bins lets the attack-time retrains reuse the clean data's bin
    boundaries; --workers N trains the probes (zo) or line-search points
    (threshold) of an iteration N at a time.

    --search threshold, per iteration: the victim retrained on the current
    point is the anchor; each row's coordinate line inside its ellipsoid ∩ box
    is cut by the anchor's split thresholds; one point per interval (midpoint,
    or an integer for integer columns; the 24 nearest) is projected and scored
    by the first-order change of the validation logloss through the leaf
    values it changes; each row keeps its best improving probe, and the moves
    of all, 1/2, 1/4, 1/8 of those rows (best first) are retrained (--oracle
    refit: leaf-refit, then only the chosen one retrained); the best becomes
    the next iterate. 4 retrains per iteration, 81 in all by default.
    A one-hot group (detected, or --one-hot) moves only as one categorical: a
    row may switch to a level held by >= 1% of its class (one group per row,
    --search threshold), never leaving zero or two levels set.

    \b
    EXAMPLES
      gbdt-poison attack --dataset credit-g --budget 0.1 --eps 4 -o poisoned.csv
      gbdt-poison attack train.csv --test test.csv --label y --dims-list a,b -o p.parquet
      gbdt-poison attack --dataset adult --budget 0.05 --transform log1p -o adult-p.csv | jq .drop

    \b
    EXIT STATUS
      0  success
      1  failure while running (OUTPUT.partial.json keeps the trace and the last state)
      2  bad usage or bad input data
      3  --fail-above-f1: the poisoned F1 is above the gate
      130  interrupted
    """
    _threads(params)
    from methodkit.tools.gbdt import attack, runs

    run = Run.from_context()
    problem = runs.prepare(run.read_table, input, params, run.seed)
    output = run.output
    kind, manifest = runs.attack_outputs(output, params.get("manifest"), [input, params.get("test_path")])
    run.refuse_existing_output(output, manifest)
    victim = runs.victim(params, run.seed)
    config = runs.attack_config(params, run.seed)
    partial = runs.AttackCheckpoint(output, config, victim, problem, run.force)
    if partial.resume is not None and not run.quiet:
        warn(PROG, f"resuming from {partial.path} after iteration {partial.resume['iter']}")
    try:
        with run.progress() as progress:
            result = attack.run(problem, victim, config, progress, checkpoint=partial.save, resume=partial.resume)
    except attack.AttackFailed as exc:
        partial.save_failure(exc.trace)
        raise
    runs.write_attack(result, output, kind, manifest, run.force, run.input_digests)
    _warn_all(result.warnings, run.quiet)
    run.emit_result({**result.summary(), "output": output, "manifest": manifest}, output="-")
    partial.remove()
    runs.gate(result.gate_f1(), params.get("fail_above_f1"), "poisoned")


@main.command("sweep")
@input_argument()
@data_options
@functools.partial(attack_options, with_eps=False)
@sweep_options
@common_options("output", "format", "in_format", "force", "meta", "quiet", "verbose")
def sweep_cmd(input, **params):
    """Run the attack over an eps grid × seeds, with baselines; one CSV row per run.

    Columns: eps, seed, method, val_f1, test_f1, test_acc, n_poison, mean_maha,
    runtime_s, clean_val_f1, clean_test_f1, thresholds_crossed (distinct split
    thresholds of the clean model the poisoned rows fall across: the discrete
    mechanism behind the non-monotone eps curve), feasible_fraction. With
    --dataset credit-g each seed also draws its own 70/30 split. --format jsonl
    gives one JSON object per run (for jq); --summary writes the mean F1 drop per
    method and eps and whether it is monotone in eps.

    Runs are independent: --scheduler local runs --dask-workers of them at once
    on an in-process Dask cluster (threads; LightGBM trains outside the GIL), an
    address sends them to a Dask cluster; rows come back in the serial order, so
    the table does not depend on the scheduler. With -o FILE every finished run
    is kept in FILE.partial.json; rerunning the same command after an
    interruption (Ctrl-C, a crash) reruns only the missing runs, and the partial
    file is removed once FILE is written. A partial file from different settings
    or data is refused (remove it, or --force to start over).

    \b
    EXAMPLES
      gbdt-poison sweep --dataset credit-g --budget 0.1 -o curve.csv --summary curve.json
      gbdt-poison sweep --dataset credit-g --scheduler local --dask-workers 4 -o curve.csv
      gbdt-poison sweep train.csv --test test.csv --eps-grid 0.5,1,2 --seeds 0,1 --format jsonl | jq .test_f1

    \b
    EXIT STATUS
      0  success
      1  failure while running
      2  bad usage or bad input data
      130  interrupted
    """
    _threads(params)
    from methodkit.core import io
    from methodkit.tools.gbdt import runs

    run = Run.from_context()
    grid, seeds = runs.parse_sweep_lists(params["eps_grid"], params["seeds"])
    runs.refuse_inputs([run.output, params.get("summary")], [input, params.get("test_path")])
    run.refuse_existing_output(run.output, params.get("summary"))
    job = runs.SweepJob(run.read_table, input, params, grid, seeds, run.output, run.force)
    if job.partial.resumed and not run.quiet:
        warn(PROG, f"resuming from {job.partial.path}: {len(job.partial.done)} run(s) already done")
    with run.progress() as progress:
        result = job.run(progress)
    _warn_all(result.warnings, run.quiet)
    if params.get("summary"):
        io.write_json(result.curve(), params["summary"], force=run.force)
    if run.verbose:
        for method, info in result.curve()["methods"].items():
            warn(PROG, f"{method}: mean drop by eps {info['mean_drop']}; monotone in eps: {info['monotone']}")
    run.emit_table(result.frame())
    job.partial.remove()


@main.command("eval")
@input_argument()
@data_options
@click.option("--fail-above-f1", type=float, default=None, help="Exit 3 if the test F1 is above this value.")
@common_options("output", "in_format", "seed", "force", "meta", "quiet", "verbose")
def eval_cmd(input, **params):
    """Train the victim on INPUT (all rows) and score it on the test table (JSON metrics).

    With --dataset, the test table is the built-in split's (INPUT, if given,
    replaces its train part); otherwise pass --test. The label, positive class and
    LightGBM parameters must match the attack's for the same victim.

    \b
    EXAMPLES
      gbdt-poison eval poisoned.csv --dataset credit-g
      gbdt-poison eval train.csv --test test.csv --label y --fail-above-f1 0.6

    \b
    EXIT STATUS
      0  success
      1  failure while running
      2  bad usage or bad input data (no test table, mismatched columns, ...)
      3  --fail-above-f1: the test F1 is above the gate
      130  interrupted
    """
    _threads(params)
    import time

    from methodkit.tools.gbdt import runs

    run = Run.from_context()
    started = time.monotonic()
    runs.refuse_inputs([run.output], [input, params.get("test_path")])
    train, test, label, positive, _ = runs.tables(run.read_table, input, params, run.seed)
    result, warnings = runs.eval_victim(train, test, label, positive, params, run.seed)
    _warn_all(warnings, run.quiet)
    run.emit_result({**result, "seconds": round(time.monotonic() - started, 3)})
    runs.gate(result["test_f1"], params.get("fail_above_f1"), "test")
