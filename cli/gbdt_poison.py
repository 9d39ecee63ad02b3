"""gbdt-poison: clean-label poisoning of LightGBM gradient-boosted trees (influence, attack, sweep, eval)."""

from __future__ import annotations

import functools

import click

from methodkit.cli import _gbdt_options as verb
from methodkit.cli._common import Run, common_options, input_argument, tool_group, warn
from methodkit.cli._gbdt_options import DEMO, PROG  # noqa: F401  (make demo reads cli modules' DEMO)


@tool_group(name=PROG)
def main():
    """Clean-label poisoning of LightGBM gradient-boosted trees.

    The attacker changes a few numeric cells of at most budget × n train rows,
    never their labels, so that the victim LightGBM retrained on the data does
    worse on unseen test data. Rows are chosen by BoostIn influence on the
    attacker's validation loss, columns by split gain, and each row moves inside
    a class-shaped Mahalanobis ellipsoid of radius eps, clipped to the data's
    range and integer lattice, so that every poisoned row stays plausible.
    The two searches (--search threshold, the default, and the issue's ZO-PSGD,
    --search zo) and our readings of the paper are in docs/gbdt.md.

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
      -j defaults to 1: on a busy machine LightGBM's OpenMP spin-waits make
      2 threads far slower than 1 (docs/gbdt.md); results can differ by -j.
      Bad input data exit 2 (methodkit's convention), not 1.

    \b
    EXIT STATUS
      0  success
      1  failure while running (LightGBM error; a *.partial.json trace is kept)
      2  bad usage or bad input data (missing column, non-binary label, ...)
      3  --fail-above-f1: the F1 after poisoning is above the gate
      130  interrupted
    """


@main.command("influence")
@input_argument()
@verb.data_options
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
    verb.apply_threads(params)
    from methodkit.tools.gbdt import runs

    run = Run.from_context()
    runs.refuse_inputs([run.output], [input, params.get("test_path")])
    problem = runs.prepare(run.read_table, input, params, run.seed)
    with run.progress() as progress:
        frame = runs.influence_table(problem, runs.victim(params, run.seed), progress)
    verb.warn_all(problem.warnings, run.quiet)
    run.emit_table(frame)


@main.command("attack")
@input_argument()
@verb.data_options
@verb.attack_options
@verb.attack_outputs
@common_options("output", "in_format", "seed", "force", "meta", "quiet", "verbose")
def attack_cmd(input, **params):
    """Poison the train rows and write the poisoned table and its manifest.

    OUTPUT (-o, required: CSV or Parquet by extension) is INPUT's train table,
    every row in file order, labels byte-identical, with only the moved cells
    changed; the attacker's validation rows are kept untouched, or left out
    with --drop-validation. "clean" and "poisoned" are the victim trained on
    the same rows as read and on exactly OUTPUT; "attacker" is the search's
    view. The manifest (docs/gbdt.md) records the data hash, the poisoned rows
    with old and new values, the metrics, the objective trace and the
    plausibility report; one JSON summary line goes to stdout.

    The search state is kept in OUTPUT.partial.json after every iteration:
    rerunning the same command continues it to the same result as an
    uninterrupted run; it is removed on success, and one of other settings or
    data is refused (remove it, or --force). --fast-bins reuses the clean
    data's bin boundaries in attack-time retrains; --workers N trains an
    iteration's probes or line-search points N at a time.

    --search threshold (default) cuts each row's coordinate lines at the
    victim's split thresholds, scores one projected probe per interval through
    the leaf values and retrains the best moves of all, 1/2, 1/4, 1/8 of the
    rows (4 retrains per iteration); --search zo is ZO-PSGD with Gaussian
    probes (docs/gbdt.md, "What it does").
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
    verb.apply_threads(params)
    from methodkit.tools.gbdt import runs

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
    with run.progress() as progress:
        result = partial.run_attack(problem, victim, config, progress)
    runs.write_attack(result, output, kind, manifest, run.force, run.input_digests)
    verb.warn_all(result.warnings, run.quiet)
    run.emit_result({**result.summary(), "output": output, "manifest": manifest}, output="-")
    partial.remove()
    runs.gate(result.gate_f1(), params.get("fail_above_f1"), "poisoned")


@main.command("sweep")
@input_argument()
@verb.data_options
@functools.partial(verb.attack_options, with_eps=False)
@verb.sweep_options
@common_options("output", "format", "in_format", "force", "meta", "quiet", "verbose")
def sweep_cmd(input, **params):
    """Run the attack over an eps grid × seeds, with baselines; one CSV row per run.

    Columns: eps, seed, method, val_f1, test_f1, test_acc, n_poison, mean_maha,
    runtime_s, clean_val_f1, clean_test_f1, thresholds_crossed (clean-model
    split thresholds the poisoned rows cross), feasible_fraction. With
    --dataset credit-g each seed draws its own 70/30 split. --summary writes
    the mean F1 drop per method and eps and whether it is monotone in eps.

    --scheduler local runs --dask-workers runs at once on an in-process Dask
    cluster, an address sends them to a Dask cluster; rows come back in the
    serial order. With -o FILE finished runs are kept in FILE.partial.json, so
    rerunning the command after an interruption reruns only the missing ones
    (one of other settings or data is refused: remove it, or --force).

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
    verb.apply_threads(params)
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
    verb.warn_all(result.warnings, run.quiet)
    if params.get("summary"):
        io.write_json(result.curve(), params["summary"], force=run.force)
    if run.verbose:
        for method, info in result.curve()["methods"].items():
            warn(PROG, f"{method}: mean drop by eps {info['mean_drop']}; monotone in eps: {info['monotone']}")
    run.emit_table(result.frame())
    job.partial.remove()


@main.command("eval")
@input_argument()
@verb.data_options
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
    verb.apply_threads(params)
    import time

    from methodkit.tools.gbdt import runs

    run = Run.from_context()
    started = time.monotonic()
    runs.refuse_inputs([run.output], [input, params.get("test_path")])
    train, test, label, positive, _ = runs.tables(run.read_table, input, params, run.seed)
    result, warnings = runs.eval_victim(train, test, label, positive, params, run.seed)
    verb.warn_all(warnings, run.quiet)
    run.emit_result({**result, "seconds": round(time.monotonic() - started, 3)})
    runs.gate(result["test_f1"], params.get("fail_above_f1"), "test")
