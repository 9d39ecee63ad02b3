"""concord-plan: plan hybrid-parallel training strategies and re-plan warm after model edits (CONCORD)."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, Run, common_options, err_console, tool_group, warn

PROG = "concord-plan"

DEMO = [
    DemoStep(
        "concord-plan fixtures fx -q && concord-plan plan fx/models/llama-70b-32k.yaml "
        "fx/clusters/h100-80gb-1024.yaml --space fx/spaces/long-context.yaml -q",
        "llama-70b-32k on 1024 H100",
        "step_s",
        "predicted step seconds",
    ),
    DemoStep(
        "concord-plan fixtures fx -q && concord-plan verify fx/models/mixtral-8x7b.yaml "
        "fx/models/mixtral-8x7b.seq_x2.yaml fx/clusters/h100-80gb-256.yaml --space fx/spaces/sweep.yaml "
        "--trials 1 -q",
        "mixtral-8x7b, seq x2",
        "median_speedup",
        "warm re-plan speedup (equivalent)",
    ),
]


def _one_caller_threads() -> None:
    """Numba's workqueue layer: the kernels are launched from this thread only, and OpenMP's idle workers
    spun between the many small ones (-j 0 was 1.2x -j 1; core.threads)."""
    from methodkit.core.threads import prefer_workqueue

    prefer_workqueue()


@tool_group(name=PROG)
def main():
    """Plan hybrid-parallel training strategies; re-plan warm after a model edit (CONCORD).

    CONCORD writes per-layer closed-form primitives (compute, communication,
    memory) in a small symbolic language, so each primitive knows exactly which
    model, hardware and strategy symbols it reads. Evaluations are cached under a
    BLAKE2b signature of those symbols; after a model edit a warm re-plan reuses
    only what the edit did not touch, over the same candidate set and feasibility
    predicate as a cache-disabled full search. Step times are cost-model
    predictions: nothing here runs on a GPU. `reference` checks those
    predictions against published throughput (Narayanan et al. 2021, Table 1:
    GPT 1.7B-1T on up to 3,072 A100s). With --device cuda the per-stage sums
    over candidates x layers run on CuPy (the partition search stays on the CPU).

    \b
    EXAMPLES
      concord-plan fixtures fx
      concord-plan plan fx/models/llama2-70b.yaml fx/clusters/a100-80gb-512.yaml --space fx/spaces/sweep.yaml
      concord-plan plan model.yaml cluster.yaml --cache ~/.cache/concord -o plan.json
      concord-plan explain plan.json --reuse
      concord-plan verify old.yaml new.yaml cluster.yaml --trials 3
      concord-plan sweep fx fx/edits.yaml --trials 3 -o sweep.csv
      concord-plan baseline model.yaml cluster.yaml | jq .step_s
      concord-plan reference --check -o narayanan-check.csv

    \b
    OUR READING
      Where the issue text is open, these are our decisions:
      - A partition unit is a transformer block (attention + MLP sublayers); the
        embedding and the LM head are units at the two ends.
      - MoE tokens are sequence-parallel over tp: expert FLOPs and activations are
        divided by tp; expert-TP (etp) splits weights, not tokens.
      - The partition is exact for vpp = 1 (a maximal-suffix greedy, checked against
        brute force); for vpp > 1 each chunk gets 1/vpp of its stage's memory budget.
      - The uniform split is scored too, so a plan never loses to Megatron's default.
      - Selective recompute uses Megatron's (18 + 4f/h) sbh/t; no recompute counts
        SwiGLU tensors one by one (2sbh + 8sbf).
      - The DP gradient sync (raw template) picks ring or recursive halving-doubling
        all-reduce, whichever the alpha-beta model says is cheaper; grads in bf16.
      - Full recompute's transient is the largest unit's whole working set.
      - An invalid spec exits 2 (CONVENTIONS), not 1 as the issue says.
      - The long-context fixture space allows vpp up to 8 (the sweep space 2): with
        B = 128 at 32k there are few microbatches per pipeline, so deeper
        interleaving is what a planner must explore there.
      - One batched SELECT ... WHERE sig IN (...) serves every template of a run
        (sig is the primary key); a cached value is a msgpack bin of float64.
      - reference: the published rows fix tp, pp, GPUs, full recompute and no ZeRO;
        the microbatch size and vpp (not published) are searched; the metric is
        the paper's Eq. 3 (recompute FLOPs counted). The Selene cluster keeps the
        default efficiency (eta_max 0.6, x0 128): nothing is fitted to the table.
      - --device cuda: CuPy may fuse a*b+c into an FMA, so GPU stage sums agree with
        the CPU's to rounding; warm and cold runs on one device still agree bitwise.

    \b
    EXIT STATUS
      0  success
      1  no admitted or no feasible candidate (the closest miss is named), or a failure while running
      2  bad usage or an invalid spec (the key path is named)
      3  verify found a mismatch, plan --fail-below was not met, or reference --check missed a row
      130  interrupted
    """


def _space_option(f):
    return click.option("--space", "space_path", metavar="SPACE.yaml", default=None, help="Strategy-space limits.")(f)


def _read_specs(run: Run, model_path: str, cluster_path: str, space_path: str | None, max_candidates=None):
    from methodkit.tools.concord import spec

    data = run.input_bytes(model_path)
    model = spec.load_model(spec.parse_document(data.data, data.name), data.name)
    data = run.input_bytes(cluster_path)
    cluster = spec.load_cluster(spec.parse_document(data.data, data.name), data.name)
    space = spec.Space()
    if space_path is not None:
        data = run.input_bytes(space_path)
        space = spec.load_space(spec.parse_document(data.data, data.name), data.name)
    if max_candidates is not None:
        space.max_candidates = max_candidates
    spec.check_model_fits_space(model, space, model_path if model_path != "-" else "<stdin>")
    return model, cluster, space


def _topk_table(run: Run, top: list, title: str) -> None:
    if run.quiet:
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title))
    for column in ("rank", "tp", "cp", "pp", "dp", "ep", "vpp", "mbs", "zero", "recompute", "step s", "peak GiB"):
        table.add_column(column)
    for row in top:
        s = row["sigma"]
        table.add_row(
            str(row["rank"]),
            *[str(s[k]) for k in ("tp", "cp", "pp", "dp", "ep", "vpp", "mbs", "zero", "recompute")],
            f"{row['step_s']:.4g}",
            f"{row['peak_gib']:.1f}",
        )
    err_console().print(table)


@main.command("plan")
@click.argument("model_path", metavar="MODEL")
@click.argument("cluster_path", metavar="CLUSTER")
@_space_option
@click.option(
    "--cache",
    "cache_dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    default=None,
    help="Persistent primitive cache (SQLite, WAL).",
)
@click.option(
    "--no-cache", is_flag=True, help="Cache-disabled full search: evaluate every (template, layer, candidate)."
)
@click.option("--top-k", type=click.IntRange(min=1), default=10, show_default=True, help="Plans to report.")
@click.option("--force-strategy", metavar="SIGMA", default=None, help="Evaluate one strategy: tp=8,pp=16,mbs=1,...")
@click.option(
    "--partition",
    type=click.Choice(["searched", "uniform"]),
    default="searched",
    show_default=True,
    help="Layer partition: min-bottleneck search (never worse than uniform) or Megatron's uniform split.",
)
@click.option("--max-candidates", type=click.IntRange(min=1), default=None, help="Refuse larger candidate sets.")
@click.option("--timings", is_flag=True, help="Add wall-clock seconds per phase (the output then varies run to run).")
@click.option(
    "--fail-below",
    type=float,
    default=None,
    metavar="TFLOPS",
    help="Exit 3 if the best plan's TFLOP/s per device is lower.",
)
@click.option(
    "--no-dependency-check",
    "lax_deps",
    is_flag=True,
    help="Diagnostic: let raw templates read symbols they did not declare (stale hits become possible).",
)
@common_options("output", "force", "meta", "threads", "device", "quiet", "verbose")
def plan_cmd(model_path, cluster_path, space_path, cache_dir, no_cache, top_k, force_strategy, partition,
             max_candidates, timings, fail_below, lax_deps, **_):  # fmt: skip
    """Search the strategy space of MODEL on CLUSTER and emit the best plans as one JSON line."""
    from methodkit.core.errors import CheckFailed, UsageError
    from methodkit.tools.concord.cache import Cache
    from methodkit.tools.concord.candidates import parse_forced
    from methodkit.tools.concord.search import plan

    run = Run.from_context()
    run.threads()
    _one_caller_threads()
    if no_cache and cache_dir:
        raise UsageError("--cache and --no-cache exclude each other")
    model, cluster, space = _read_specs(run, model_path, cluster_path, space_path, max_candidates)
    forced = parse_forced(force_strategy, cluster) if force_strategy else None
    cache = Cache(cache_dir) if cache_dir else None
    try:
        for message in getattr(cache, "warnings", []):
            warn(PROG, message)
        with run.progress() as cb:
            result = plan(
                model, cluster, space, cache=cache, mode="cold" if no_cache else "warm", top_k=top_k,
                forced=forced, partition=partition, progress=cb, device=run.device(), strict=not lax_deps,
            )  # fmt: skip
    finally:
        if cache is not None:
            cache.close()
    _topk_table(run, result.top, f"{model.name} on {cluster.name}: {result.feasible}/{result.candidates} feasible")
    run.emit_result(result.to_dict(timings=timings))
    best = result.best["tflops_per_device"]
    if fail_below is not None and best < fail_below:
        raise CheckFailed(f"best plan reaches {best:.1f} TFLOP/s per device, below --fail-below {fail_below}")


@main.command("baseline")
@click.argument("model_path", metavar="MODEL")
@click.argument("cluster_path", metavar="CLUSTER")
@_space_option
@common_options("output", "force", "meta", "quiet", "verbose")
def baseline_cmd(model_path, cluster_path, space_path, **_):
    """Emit the Megatron-style heuristic plan (uniform partition) in the plan JSON format."""
    from methodkit.tools.concord.baseline import baseline

    run = Run.from_context()
    model, cluster, space = _read_specs(run, model_path, cluster_path, space_path)
    result, why = baseline(model, cluster, space)
    out = result.to_dict()
    out["mode"] = "baseline"
    out["rule"] = why
    run.emit_result(out)


@main.command("verify")
@click.argument("old_path", metavar="MODEL_OLD")
@click.argument("new_path", metavar="MODEL_NEW")
@click.argument("cluster_path", metavar="CLUSTER")
@_space_option
@click.option("--cluster-new", metavar="CLUSTER_NEW", default=None, help="Cluster after the edit (default: CLUSTER).")
@click.option("--trials", type=click.IntRange(min=1), default=3, show_default=True, help="Paired trials, fresh caches.")
@click.option("--audit", default="all", show_default=True, help="Hits to recompute cold: 'all' or a number.")
@click.option("--top-k", type=click.IntRange(min=1), default=10, show_default=True, help="Length of the compared list.")
@click.option(
    "--no-dependency-check",
    "lax_deps",
    is_flag=True,
    help="Diagnostic: let raw templates read symbols they did not declare (stale hits become possible).",
)
@common_options("output", "force", "meta", "threads", "device", "quiet", "verbose")
def verify_cmd(old_path, new_path, cluster_path, space_path, cluster_new, trials, audit, top_k, lax_deps, **_):
    """Warm re-plan of MODEL_NEW (cache filled by MODEL_OLD) against a cold full search; exit 3 on a mismatch."""
    from methodkit.core.errors import CheckFailed, UsageError
    from methodkit.tools.concord import spec
    from methodkit.tools.concord.verify import verify

    run = Run.from_context()
    run.threads()
    _one_caller_threads()
    if audit == "all":
        limit = None
    else:
        try:
            limit = int(audit)
        except ValueError:
            raise UsageError(f"--audit must be 'all' or a number, got {audit!r}") from None
    old, cluster, space = _read_specs(run, old_path, cluster_path, space_path)
    data = run.input_bytes(new_path)
    new = spec.load_model(spec.parse_document(data.data, data.name), data.name)
    spec.check_model_fits_space(new, space, new_path)
    cluster2 = None
    if cluster_new:
        data = run.input_bytes(cluster_new)
        cluster2 = spec.load_cluster(spec.parse_document(data.data, data.name), data.name)
    with run.progress() as cb:
        report = verify(old, new, cluster, space, trials=trials, audit_limit=limit, top_k=top_k, progress=cb,
                        new_cluster=cluster2, device=run.device(), strict=not lax_deps)  # fmt: skip
    run.emit_result(report.to_dict())
    if not report.ok:
        raise CheckFailed("warm re-plan and cold full search disagree; see the report's trials")


@main.command("sweep")
@click.argument("fixtures_dir", metavar="FIXTURES_DIR")
@click.argument("edits_path", metavar="EDITS.yaml")
@click.option("--trials", type=click.IntRange(min=1), default=3, show_default=True, help="Paired trials per cell.")
@click.option("--only", default=None, metavar="NAMES", help="Comma-separated fixture names to run (default: all).")
@click.option("--audit", default="all", show_default=True, help="Hits to recompute cold per trial: 'all' or a number.")
@common_options("output", "format", "force", "meta", "threads", "quiet", "verbose")
def sweep_cmd(fixtures_dir, edits_path, trials, only, audit, **_):
    """One row per (fixture, edit, trial): counts, top-1 match, cold/warm seconds, hits, stale mismatches."""
    from pathlib import Path

    import pandas as pd

    from methodkit.core.errors import DataError, UsageError
    from methodkit.tools.concord import spec
    from methodkit.tools.concord.verify import sweep

    run = Run.from_context()
    run.threads()
    _one_caller_threads()
    limit = None if audit == "all" else int(audit) if audit.isdigit() else None
    if audit != "all" and limit is None:
        raise UsageError(f"--audit must be 'all' or a number, got {audit!r}")
    folder = Path(fixtures_dir)
    index_path = folder / "fixtures.yaml"
    if not index_path.is_file():
        raise DataError(f"{index_path}: no such file; create it with 'concord-plan fixtures {fixtures_dir}'")
    data = run.input_bytes(str(index_path))
    index = spec.parse_document(data.data, data.name)
    if not isinstance(index, list):
        raise DataError(f"{index_path}: expected a list of {{name, model, cluster, space}}")
    wanted = set(only.split(",")) if only else None
    fixtures = []
    for i, entry in enumerate(index):
        if not isinstance(entry, dict) or not {"name", "model", "cluster"} <= set(entry):
            raise DataError(f"{index_path}: [{i}]: expected keys name, model, cluster (and optional space)")
        if wanted and entry["name"] not in wanted:
            continue
        docs = []
        for key in ("model", "cluster", "space"):
            if entry.get(key) is None:
                docs.append(None)
                continue
            d = run.input_bytes(str(folder / entry[key]))
            docs.append(spec.parse_document(d.data, d.name))
        fixtures.append((entry["name"], *docs))
    if wanted and len(fixtures) != len(wanted):
        raise UsageError(f"--only: unknown fixture(s) {', '.join(sorted(wanted - {f[0] for f in fixtures}))}")
    data = run.input_bytes(edits_path)
    edits = spec.parse_document(data.data, data.name)
    if not isinstance(edits, list) or not all(isinstance(e, dict) and "op" in e for e in edits):
        raise DataError(f"{data.name}: expected a list of edits with an 'op' key")
    with run.progress() as cb:
        rows = sweep(fixtures, edits, trials=trials, audit_limit=limit, progress=cb)
    run.emit_table(pd.DataFrame(rows))


@main.command("reference")
@click.argument("table_path", metavar="[TABLE.yaml]", required=False, default=None)
@click.option("--tolerance", type=click.FloatRange(min=0), default=0.2, show_default=True,
              help="Allowed |predicted/published - 1|.")  # fmt: skip
@click.option("--mbs", "mbs_list", default="1,2,4,8", show_default=True, help="Microbatch sizes to search per row.")
@click.option("--vpp", "vpp_list", default="1,2,4", show_default=True, help="Interleaved stages to search per row.")
@click.option(
    "--partition",
    type=click.Choice(["uniform", "searched"]),
    default="uniform",
    show_default=True,
    help="Layer split: Megatron's uniform one (as the published runs) or the min-bottleneck search.",
)
@click.option("--check", "strict", is_flag=True, help="Exit 3 if any row misses the tolerance.")
@common_options("output", "format", "force", "meta", "threads", "quiet", "verbose")
def reference_cmd(table_path, tolerance, mbs_list, vpp_list, partition, strict, **_):
    """Predicted vs published per-GPU TFLOP/s (Narayanan et al. 2021, Table 1 by default), one row each.

    Each row fixes the published tp, pp and GPU count with full recompute and no
    ZeRO, searches the microbatch size and interleaved stages the table leaves
    open, and reports the cost model's best prediction in the paper's metric
    (Eq. 3 FLOPs, recomputation included) with the ratio to the published figure.
    TABLE.yaml has the layout 'concord-plan fixtures DIR' writes to
    DIR/reference/narayanan2021-table1.yaml.
    """
    import pandas as pd

    from methodkit.core.errors import CheckFailed, UsageError
    from methodkit.tools.concord import reference, spec

    run = Run.from_context()
    run.threads()
    _one_caller_threads()

    def ints(text, flag):
        try:
            values = tuple(int(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise UsageError(f"{flag}: expected comma-separated integers, got {text!r}") from None
        if not values or min(values) < 1:
            raise UsageError(f"{flag}: expected positive integers, got {text!r}")
        return values

    mbs, vpp = ints(mbs_list, "--mbs"), ints(vpp_list, "--vpp")
    if table_path is None:
        table = reference.load_table(reference.builtin_table(), "narayanan2021-table1")
    else:
        data = run.input_bytes(table_path)
        table = reference.load_table(spec.parse_document(data.data, data.name), data.name)
    with run.progress() as cb:
        result = reference.check(table, tolerance=tolerance, mbs=mbs, vpp=vpp, partition=partition, progress=cb)
    summary = result.summary()
    if not run.quiet:
        err_console().print(
            f"{summary['within']}/{summary['rows']} rows within +-{tolerance:.0%} of {table.source}; "
            f"predicted/published {summary['ratio_min']:.2f}..{summary['ratio_max']:.2f} "
            f"(median {summary['ratio_median']:.2f})"
        )
    run.emit_table(pd.DataFrame(result.rows))
    if strict and summary["within"] < summary["rows"]:
        missed = ", ".join(f"{r['params_b']}B ({r['ratio']:.2f})" for r in result.rows if not r["within"])
        raise CheckFailed(f"{summary['rows'] - summary['within']} row(s) outside +-{tolerance:.0%}: {missed}")


@main.command("explain")
@click.argument("plan_path", metavar="PLAN.json")
@click.option("--reuse", is_flag=True, help="List cache misses and the dependency key that changed instead.")
@common_options("output", "format", "force", "quiet", "verbose")
def explain_cmd(plan_path, reuse, **_):
    """Per-layer time, memory and communication of a plan's best strategy (or, with --reuse, why misses happened)."""
    import pandas as pd

    from methodkit.core.errors import DataError
    from methodkit.tools.concord.explain import layer_rows, reuse_rows

    run = Run.from_context()
    document = run.read_json(plan_path)
    name = plan_path if plan_path != "-" else "<stdin>"
    if not isinstance(document, dict) or "layers" not in document or "best" not in document:
        raise DataError(f"{name}: not a concord-plan plan (no 'best' and 'layers'); make one with 'concord-plan plan'")
    rows = reuse_rows(document) if reuse else layer_rows(document)
    run.emit_table(pd.DataFrame(rows))


@main.command("fixtures")
@click.argument("folder", metavar="DIR", required=False, default=None)
@common_options("output", "format", "force", "quiet", "verbose")
def fixtures_cmd(folder, **_):
    """List the built-in fixtures, or write them (models, clusters, spaces, fixtures.yaml, edits.yaml) into DIR."""
    import pandas as pd

    from methodkit.core.outputs import check_output
    from methodkit.tools.concord.fixtures import check_target, export, listing

    run = Run.from_context()
    if folder is None:
        run.emit_table(pd.DataFrame(listing()))
        return
    check_output(folder, folder=True, force=True)  # a file there, or no parent folder: refused now
    check_target(folder)
    export(folder, force=run.force)


@main.group("cache")
def cache_group():
    """Inspect and maintain a primitive cache directory."""


@cache_group.command("stats")
@click.argument("folder", metavar="DIR")
@common_options("output", "force", "quiet", "verbose")
def cache_stats(folder, **_):
    """Entries, bytes and per-template counts of the cache in DIR."""
    from contextlib import closing

    from methodkit.tools.concord.cache import open_existing

    run = Run.from_context()
    with closing(open_existing(folder)) as cache:
        run.emit_result(cache.stats())


@cache_group.command("gc")
@click.argument("folder", metavar="DIR")
@click.option("--older-than-days", type=float, default=None, help="Also drop entries older than this.")
@common_options("output", "force", "quiet", "verbose")
def cache_gc(folder, older_than_days, **_):
    """Drop entries whose template version or code hash is no longer current."""
    from contextlib import closing

    from methodkit.tools.concord.cache import open_existing
    from methodkit.tools.concord.explain import current_templates

    run = Run.from_context()
    with closing(open_existing(folder)) as cache:
        removed = cache.gc(current_templates(), None if older_than_days is None else older_than_days * 86400)
        run.emit_result({"removed": removed, **cache.stats()})


@cache_group.command("clear")
@click.argument("folder", metavar="DIR")
@common_options("output", "force", "quiet", "verbose")
def cache_clear(folder, **_):
    """Delete every entry of the cache in DIR."""
    from contextlib import closing

    from methodkit.tools.concord.cache import open_existing

    run = Run.from_context()
    with closing(open_existing(folder)) as cache:
        run.emit_result({"removed": cache.clear(), **cache.stats()})
