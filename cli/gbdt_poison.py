"""gbdt-poison: clean-label poisoning of LightGBM gradient-boosted trees (influence, attack, sweep, eval)."""

from __future__ import annotations

import functools
import json
import os

import click

from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, input_argument, tool_group, warn

PROG = "gbdt-poison"
DEMO = [
    DemoStep(
        "gbdt-poison attack --dataset credit-g --budget 0.1 --eps 4 --iters 6 -o poisoned.csv",
        "credit-g",
        "drop.test_f1",
        "test F1 drop (Credit-g, 10% rows, eps 4)",
    ),
]


def _csv_list(value: str | None) -> list[str] | None:
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


def data_options(f):
    """Where the data come from and the roles of its columns (shared by every verb)."""
    options = [
        click.option(
            "--dataset",
            type=click.Choice(["adult", "credit-g", "synth"]),
            default=None,
            help="Built-in split instead of INPUT: adult (official train/test), credit-g (70/30 by --seed), "
            "synth (generated). A non-'-' INPUT then replaces the built-in train part.",
        ),
        click.option(
            "--test", "test_path", metavar="FILE", default=None, help="Test table (never seen by the attack)."
        ),
        click.option("--label", default=None, help="Label column [default: 'label', else the last column]."),
        click.option("--positive", default=None, help="Class whose F1 is reported [default: the minority class]."),
        click.option("--categorical", default=None, metavar="COLS", help="Categorical columns [default: non-numeric]."),
        click.option("--immutable", default=None, metavar="COLS", help="Columns never perturbed (comma-separated)."),
        click.option("--integer", default=None, metavar="COLS", help="Integer columns [default: all-integral ones]."),
        click.option(
            "--val-frac",
            type=float,
            default=None,
            help="Attacker's validation share of the train rows, stratified [default: 0.2; credit-g 0.3].",
        ),
        click.option(
            "--lgb-params",
            default=None,
            metavar="JSON",
            help="Victim LightGBM parameters over the defaults (100 trees, 31 leaves, lr 0.1, deterministic).",
        ),
        click.option(
            "-j",
            "--threads",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="LightGBM/Numba threads (results may differ by thread count; 1 avoids OpenMP spin-waits on "
            "a busy machine).",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def attack_options(f, with_eps: bool = True):
    options = [
        click.option("--budget", type=float, default=0.05, show_default=True, help="Poisoned share of train rows."),
        click.option("--dims", type=int, default=3, show_default=True, help="Columns moved per row (top-k by gain)."),
        click.option("--dims-list", default=None, metavar="A,B", help="Move exactly these columns instead."),
        click.option(
            "--one-hot",
            default=None,
            metavar="PREFIX,...",
            help="One-hot groups (PREFIX_LEVEL columns), never moved; default: detected from the data.",
        ),
        click.option(
            "--influence",
            type=click.Choice(["boostin", "loss", "random"]),
            default="boostin",
            show_default=True,
            help="How rows are chosen.",
        ),
        click.option(
            "--dim-rank",
            type=click.Choice(["gain", "random", "local"]),
            default="gain",
            show_default=True,
            help="How columns are chosen.",
        ),
        click.option(
            "--cov",
            type=click.Choice(["class", "pooled"]),
            default="class",
            show_default=True,
            help="Ellipsoid shape: class-conditional or pooled covariance.",
        ),
        click.option(
            "--transform",
            type=click.Choice(["none", "log1p"]),
            default="none",
            show_default=True,
            help="log1p heavy-tailed non-negative columns before the ellipsoid.",
        ),
        click.option(
            "--search",
            type=click.Choice(["threshold", "zo"]),
            default="threshold",
            show_default=True,
            help="threshold: coordinate moves across the victim's split thresholds + line search; "
            "zo: ZO-PSGD with Gaussian probes (--q, --mu, --eta).",
        ),
        click.option("--iters", type=int, default=20, show_default=True, help="Search iterations."),
        click.option("--q", type=int, default=4, show_default=True, help="(zo) Random directions per iteration."),
        click.option("--mu", type=float, default=0.5, show_default=True, help="(zo) Probe radius, × eps."),
        click.option("--eta", type=float, default=0.5, show_default=True, help="(zo) Step size, × eps (decays 0.9)."),
        click.option(
            "--objective",
            type=click.Choice(["logloss", "f1"]),
            default="logloss",
            show_default=True,
            help="Maximise validation logloss, or minimise validation F1.",
        ),
        click.option(
            "--probe-projection",
            type=click.Choice(["on", "off"]),
            default="on",
            show_default=True,
            help="(zo) Project the finite-difference probes (off = ablation).",
        ),
        click.option(
            "--oracle",
            type=click.Choice(["retrain", "refit"]),
            default="retrain",
            show_default=True,
            help="Evaluate J by retraining, or by refitting leaf values of an anchor model.",
        ),
        click.option(
            "--refit-every",
            type=int,
            default=5,
            show_default=True,
            help="(zo) Re-anchor every N iterations (refit oracle).",
        ),
        click.option(
            "--fast-bins",
            is_flag=True,
            help="Attack-time retrains reuse the clean data's LightGBM bin boundaries (faster; the reported "
            "victim is still a true retrain).",
        ),
        click.option(
            "--workers",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Probe retrains run at once (threads, each on -j threads); same results for any value.",
        ),
    ]
    if with_eps:
        options.insert(1, click.option("--eps", type=float, default=1.0, show_default=True, help="Radius ε."))
    for option in reversed(options):
        f = option(f)
    return f


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
      - The poisoned table is the train part only (the attacker's validation
        rows are left out), so 'eval' on it reproduces the reported metrics.
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


# ---------------------------------------------------------------- shared plumbing


def _tables(run: Run, input_path: str, params: dict, seed: int, cache: dict | None = None):
    """(train, test, label, positive, val_frac): files are read once (cache), built-in splits per seed."""
    from methodkit.tools.gbdt import datasets

    cache = {} if cache is None else cache

    def read(path):
        if path not in cache:
            cache[path] = run.read_table(path)
        return cache[path]

    label, positive, val_frac = params.get("label"), params.get("positive"), params.get("val_frac")
    test = None
    if params.get("dataset") is not None:
        train, test, d_label, d_positive, d_frac = datasets.builtin(params["dataset"], seed)
        label, positive = label or d_label, positive or d_positive
        val_frac = val_frac if val_frac is not None else d_frac
        if input_path != "-":
            train = read(input_path)
    else:
        train = read(input_path)
    if params.get("test_path"):
        test = read(params["test_path"])
    return train, test, label, positive, 0.2 if val_frac is None else val_frac


def _prepare(run: Run, input_path: str, params: dict, seed: int, cache: dict | None = None):
    """Read the tables and build the Problem (D, V, T) for `seed`."""
    from methodkit.tools.gbdt import data

    train, test, label, positive, val_frac = _tables(run, input_path, params, seed, cache)
    return data.prepare(
        train,
        test,
        label=label,
        positive=positive,
        categorical=_csv_list(params.get("categorical")),
        immutable=_csv_list(params.get("immutable")),
        integer=_csv_list(params.get("integer")),
        val_frac=val_frac,
        seed=seed,
    )


def _threads(params: dict) -> int:
    """Apply -j before anything imports numba: core.backend.set_threads sets NUMBA_NUM_THREADS, and a
    change after numba's import makes its next compilation raise (config reload)."""
    from methodkit.core.backend import set_threads

    return set_threads(params["threads"])


def _victim(params: dict, seed: int):
    from methodkit.tools.gbdt.victim import Victim

    return Victim.from_json(params.get("lgb_params"), threads=params["threads"], seed=seed)


def _same_file(a: str, b: str | None) -> bool:
    if not b or a == "-" or b == "-":
        return False
    return os.path.abspath(a) == os.path.abspath(b)


def _refuse_inputs(outputs: list[str | None], inputs: list[str | None]) -> None:
    from methodkit.core.errors import UsageError

    for out in outputs:
        for src in inputs:
            if out and _same_file(out, src):
                raise UsageError(f"{out}: is also an input; write the output elsewhere")


def _warn_all(messages: list[str], quiet: bool) -> None:
    if not quiet:
        for message in messages:
            warn(PROG, message)


def _attack_config(params: dict, seed: int, eps: float | None = None):
    from methodkit.tools.gbdt.attack import AttackConfig

    return AttackConfig(
        budget=params["budget"],
        eps=params["eps"] if eps is None else eps,
        dims=params["dims"],
        dims_list=_csv_list(params.get("dims_list")),
        influence=params["influence"],
        dim_rank=params["dim_rank"],
        cov=params["cov"],
        transform=params["transform"],
        iters=params["iters"],
        q=params["q"],
        mu=params["mu"],
        eta=params["eta"],
        objective=params["objective"],
        search=params["search"],
        probe_projection=params["probe_projection"] == "on",
        oracle=params["oracle"],
        refit_every=params["refit_every"],
        fast_bins=params["fast_bins"],
        workers=params["workers"],
        one_hot=_csv_list(params.get("one_hot")),
        seed=seed,
    )


def _gate(f1, limit, what: str) -> None:
    from methodkit.core.errors import CheckFailed

    if limit is not None and f1 is not None and f1 > limit:
        raise CheckFailed(f"{what} F1 {f1:.4f} is above --fail-above-f1 {limit}")


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
    run = Run.from_context()
    _refuse_inputs([run.output], [input, params.get("test_path")])
    problem = _prepare(run, input, params, run.seed)
    import numpy as np
    import pandas as pd

    from methodkit.tools.gbdt import influence as infl
    from methodkit.tools.gbdt.victim import leaf_indices, parse_trees

    victim = _victim(params, run.seed)
    with run.progress() as progress:
        progress("victim fit", 0, 1)
        booster = victim.fit(problem.X_tr, problem.y_tr, problem.cat_idx)
        progress("victim fit", 1, 1)
    trees = parse_trees(booster, problem.y_tr, victim.full_params())
    scores = infl.boostin(
        leaf_indices(booster, problem.X_tr),
        leaf_indices(booster, problem.X_v),
        trees,
        problem.y_tr,
        problem.y_v,
        victim.lambda_l2,
    )
    order = np.lexsort((np.arange(len(scores)), -scores))
    rank = np.empty(len(scores), dtype=np.int64)
    rank[order] = np.arange(1, len(scores) + 1)
    labels = problem.frame[problem.label].iloc[problem.tr_rows].to_numpy()
    frame = pd.DataFrame({"row": problem.tr_rows, "influence": scores, "label": labels, "rank": rank})
    _warn_all(problem.warnings, run.quiet)
    run.emit_table(frame)


@main.command("attack")
@input_argument()
@data_options
@attack_options
@click.option(
    "--manifest",
    type=OutputPath(),
    metavar="PATH",
    default=None,
    help="Manifest JSON [default: OUTPUT stem + .manifest.json].",
)
@click.option("--fail-above-f1", type=float, default=None, help="Exit 3 if the poisoned test (else val) F1 is above.")
@common_options("output", "in_format", "seed", "force", "meta", "quiet", "verbose")
def attack_cmd(input, **params):
    """Poison the train rows and write the poisoned table and its manifest.

    OUTPUT (-o, required: CSV or Parquet by extension) is the train part of INPUT,
    rows in file order, labels byte-identical, with only the moved cells changed;
    the attacker's validation rows are left out (their positions are in the
    manifest). The manifest records the data hash, poisoned rows with old and new
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
    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.tools.gbdt import attack
    from methodkit.tools.gbdt.data import frame_sha256

    run = Run.from_context()
    problem = _prepare(run, input, params, run.seed)
    output = run.output
    if output == "-":
        raise UsageError("attack writes a table and a manifest: pass -o FILE (.csv or .parquet)")
    kind = io.format_from_path(output, None, None)
    if kind not in ("csv", "tsv", "parquet"):
        raise UsageError(f"{output}: the poisoned table must be .csv, .tsv or .parquet")
    manifest = params.get("manifest") or _manifest_path(output)
    _refuse_inputs([output, manifest], [input, params.get("test_path")])
    run.refuse_existing_output(output, manifest)
    victim = _victim(params, run.seed)
    config = _attack_config(params, run.seed)
    partial = f"{output}.partial.json"
    fingerprint = _attack_fingerprint(config, victim, problem)
    resume = _attack_resume(partial, fingerprint, run)
    last = {"fingerprint": fingerprint, "state": resume}

    def checkpoint(state):
        last["state"] = state
        io.write_json(last, partial, force=True)

    try:
        with run.progress() as progress:
            result = attack.run(problem, victim, config, progress, checkpoint=checkpoint, resume=resume)
    except attack.AttackFailed as exc:
        io.write_json({**last, **exc.trace}, partial, force=True)
        raise
    io.write_table(result.poisoned_frame(), output, kind, force=run.force)
    record = result.to_dict()
    record["data_sha256"] = run.input_digests or {"train": frame_sha256(problem.frame)}
    io.write_json(record, manifest, force=run.force)
    _warn_all(result.warnings, run.quiet)
    summary = {**result.summary(), "output": output, "manifest": manifest}
    run.emit_result(summary, output="-")
    if os.path.exists(partial):
        os.remove(partial)
    after = result.after
    _gate(after.get("test_f1", after.get("val_f1")), params.get("fail_above_f1"), "poisoned")


def _attack_fingerprint(config, victim, problem) -> str:
    """What a checkpoint must share with the run that resumes it: settings, victim and data."""
    import hashlib
    from dataclasses import asdict

    from methodkit.tools.gbdt.data import frame_sha256

    doc = {
        "config": {k: v for k, v in asdict(config).items() if k != "workers"},
        "victim": {"params": victim.full_params(), "rounds": victim.rounds},
        "train": frame_sha256(problem.frame),
        "val": problem.v_rows.tolist(),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _attack_resume(path: str, fingerprint: str, run: Run):
    """The search state of OUTPUT.partial.json when it belongs to this very attack (else refuse)."""
    saved = _read_checkpoint(path, fingerprint, "attack", run.force)
    state = saved.get("state") if saved else None
    if state is not None and not run.quiet:
        warn(PROG, f"resuming from {path} after iteration {state['iter']}")
    return state


def _read_checkpoint(path: str, fingerprint: str, what: str, force: bool) -> dict | None:
    """The *.partial.json of the same attack or sweep (same fingerprint); None when absent or --force."""
    from methodkit.core import io
    from methodkit.core.errors import UsageError

    if force or not os.path.exists(path):
        return None
    try:
        saved = io.read_json(path)
    except Exception:
        raise UsageError(f"{path}: unreadable checkpoint; remove it or pass --force") from None
    if not isinstance(saved, dict) or saved.get("fingerprint") != fingerprint:
        raise UsageError(f"{path}: checkpoint of a different {what} (settings or data); remove it or pass --force")
    return saved


def _manifest_path(output: str) -> str:
    base = output
    for suffix in (".gz", ".xz", ".bz2", ".csv", ".tsv", ".parquet", ".pq"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base + ".manifest.json"


@main.command("sweep")
@input_argument()
@data_options
@functools.partial(attack_options, with_eps=False)
@click.option("--eps-grid", default="0.25,0.5,1,2,4,8", show_default=True, metavar="E1,E2,..", help="Radii to sweep.")
@click.option("--seeds", default="0,1,2,3,4", show_default=True, metavar="S1,S2,..", help="Seeds (split + attack).")
@click.option(
    "--baselines",
    default="random",
    show_default=True,
    metavar="NAMES",
    help="Also run: random (rows+dims), random-rows, loss; '' for none.",
)
@click.option(
    "--summary",
    type=OutputPath(),
    metavar="PATH",
    default=None,
    help="Write the mean-drop curve per method and eps (JSON).",
)
@click.option(
    "--scheduler",
    default="sync",
    show_default=True,
    metavar="ADDRESS",
    help="'sync' (plain loop), 'local' (in-process Dask cluster of --dask-workers threads) or a Dask "
    "scheduler address; the table is the same for every choice.",
)
@click.option(
    "--dask-workers",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Attacks at once under --scheduler local.",
)
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
    from methodkit.core.errors import UsageError
    from methodkit.tools.gbdt import sweep

    run = Run.from_context()
    try:
        grid = [float(e) for e in _csv_list(params["eps_grid"])]
        seeds = [int(s) for s in _csv_list(params["seeds"])]
    except ValueError:
        raise UsageError("--eps-grid and --seeds take comma-separated numbers") from None
    if not seeds:
        raise UsageError("--seeds is empty")
    _refuse_inputs([run.output, params.get("summary")], [input, params.get("test_path")])
    run.refuse_existing_output(run.output, params.get("summary"))
    cache: dict = {}
    first = _prepare(run, input, params, seeds[0], cache)  # reads and validates the input before the long run

    def problem_for_seed(seed):
        return first if seed == seeds[0] else _prepare(run, input, params, seed, cache)

    baselines = _csv_list(params["baselines"]) or []
    config = _attack_config({**params, "eps": 1.0}, seeds[0])
    sweep.tasks(config, grid, seeds, baselines)  # unknown baselines fail before any work
    partial, done, on_row = _sweep_partial(run, params, config, grid, seeds, baselines, first)
    with run.progress() as progress:
        result = sweep.run(
            problem_for_seed,
            lambda s: _victim(params, s),
            config,
            grid,
            seeds,
            baselines,
            progress,
            scheduler=params["scheduler"],
            dask_workers=params["dask_workers"],
            done=done,
            on_row=on_row,
        )
    _warn_all(result.warnings, run.quiet)
    if params.get("summary"):
        io.write_json(result.curve(), params["summary"], force=run.force)
    if run.verbose:
        for method, info in result.curve()["methods"].items():
            warn(PROG, f"{method}: mean drop by eps {info['mean_drop']}; monotone in eps: {info['monotone']}")
    run.emit_table(result.frame())
    if partial is not None and os.path.exists(partial):
        os.remove(partial)


def _sweep_partial(run: Run, params: dict, config, grid, seeds, baselines, problem):
    """(path, rows done, on_row) of OUTPUT.partial.json: the checkpoint an interrupted sweep resumes from."""
    from methodkit.core import io
    from methodkit.tools.gbdt import sweep
    from methodkit.tools.gbdt.data import frame_sha256

    if run.output == "-":
        return None, {}, None
    path = run.output + ".partial.json"
    data_key = json.dumps({"dataset": params.get("dataset"), "train": frame_sha256(problem.frame)})
    grid_sorted, _ = sweep.check_grid(grid)
    fingerprint = sweep.fingerprint(config, grid_sorted, seeds, baselines, data_key)
    saved = _read_checkpoint(path, fingerprint, "sweep", run.force)
    done = dict(saved.get("rows") or {}) if saved else {}
    if saved and not run.quiet:
        warn(PROG, f"resuming from {path}: {len(done)} run(s) already done")
    state = {"fingerprint": fingerprint, "rows": dict(done)}

    def on_row(key, row):
        state["rows"][key] = row
        io.write_json(state, path, force=True)

    return path, done, on_row


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

    from methodkit.core.errors import UsageError
    from methodkit.tools.gbdt import data
    from methodkit.tools.gbdt.victim import metrics

    run = Run.from_context()
    started = time.monotonic()
    _refuse_inputs([run.output], [input, params.get("test_path")])
    train, test, label, positive, _ = _tables(run, input, params, run.seed)
    if test is None:
        raise UsageError("eval needs a test table: pass --test FILE or --dataset")
    problem = data.whole(train, test, label=label, positive=positive, categorical=_csv_list(params.get("categorical")))
    y, X_te, y_te = problem.y_tr, problem.X_te, problem.y_te
    victim = _victim(params, run.seed)
    booster = victim.fit(problem.X_tr, y, problem.cat_idx)
    tr, te = metrics(booster, problem.X_tr, y), metrics(booster, X_te, y_te)
    _warn_all(problem.warnings, run.quiet)
    result = {
        "verb": "eval",
        "label": problem.label,
        "positive": problem.positive,
        "n_train": len(y),
        "n_test": len(y_te),
        "train_f1": tr["f1"],
        "test_f1": te["f1"],
        "test_acc": te["acc"],
        "test_logloss": te["logloss"],
        "seconds": round(time.monotonic() - started, 3),
    }
    run.emit_result(result)
    _gate(te["f1"], params.get("fail_above_f1"), "test")
