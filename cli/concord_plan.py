"""concord-plan: plan hybrid-parallel training strategies and re-plan warm after model edits (CONCORD)."""

from __future__ import annotations

import click

from methodkit.cli import _concord_options as opt
from methodkit.cli._common import Run, common_options, err_console, tool_group, warn
from methodkit.cli._concord_options import DEMO  # noqa: F401  (make demo reads it here)

PROG = "concord-plan"


@tool_group(name=PROG)
def main():
    """Plan hybrid-parallel training strategies; re-plan warm after a model edit (CONCORD).

    Per-layer closed-form primitives (compute, communication, memory) in a small symbolic language
    know exactly which symbols they read; evaluations are cached under a signature of those symbols,
    so a warm re-plan after a model edit reuses what the edit did not touch, over the same candidates
    as a cache-disabled full search (`verify` checks that). Step times are cost-model predictions;
    `reference` checks them against published throughput. Readings and figures: docs/concord.md.

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
    EXIT STATUS
      0  success
      1  no admitted or no feasible candidate (the closest miss is named), or a failure while running
      2  bad usage or an invalid spec (the key path is named)
      3  verify found a mismatch, plan --fail-below was not met, or reference --check missed a row
      130  interrupted
    """


@main.command("plan")
@click.argument("model_path", metavar="MODEL")
@click.argument("cluster_path", metavar="CLUSTER")
@opt.plan_options
@common_options("output", "force", "meta", "threads", "device", "quiet", "verbose")
def plan_cmd(model_path, cluster_path, space_path, cache_dir, no_cache, top_k, force_strategy, partition,
             max_candidates, timings, fail_below, lax_deps, **_):  # fmt: skip
    """Search the strategy space of MODEL on CLUSTER and emit the best plans as one JSON line."""
    from methodkit.core.errors import CheckFailed, UsageError
    from methodkit.tools.concord.cache import Cache
    from methodkit.tools.concord.candidates import parse_forced
    from methodkit.tools.concord.commands import read_specs
    from methodkit.tools.concord.search import plan

    run = Run.from_context()
    run.threads()
    opt.one_caller_threads()
    if no_cache and cache_dir:
        raise UsageError("--cache and --no-cache exclude each other")
    model, cluster, space = read_specs(run.input_bytes, model_path, cluster_path, space_path, max_candidates)
    forced = parse_forced(force_strategy, cluster) if force_strategy else None
    cache = Cache(cache_dir) if cache_dir else None
    try:
        for message in getattr(cache, "warnings", []):
            warn(PROG, message)
        with run.progress() as cb:
            result = plan(model, cluster, space, cache=cache, mode="cold" if no_cache else "warm", top_k=top_k,
                          forced=forced, partition=partition, progress=cb, device=run.device(),
                          strict=not lax_deps)  # fmt: skip
    finally:
        if cache is not None:
            cache.close()
    opt.topk_table(run, result.top, f"{model.name} on {cluster.name}: {result.feasible}/{result.candidates} feasible")
    run.emit_result(result.to_dict(timings=timings))
    best = result.best["tflops_per_device"]
    if fail_below is not None and best < fail_below:
        raise CheckFailed(f"best plan reaches {best:.1f} TFLOP/s per device, below --fail-below {fail_below}")


@main.command("baseline")
@click.argument("model_path", metavar="MODEL")
@click.argument("cluster_path", metavar="CLUSTER")
@opt.space_option
@common_options("output", "force", "meta", "quiet", "verbose")
def baseline_cmd(model_path, cluster_path, space_path, **_):
    """Emit the Megatron-style heuristic plan (uniform partition) in the plan JSON format."""
    from methodkit.tools.concord.baseline import baseline
    from methodkit.tools.concord.commands import read_specs

    run = Run.from_context()
    model, cluster, space = read_specs(run.input_bytes, model_path, cluster_path, space_path)
    result, why = baseline(model, cluster, space)
    run.emit_result({**result.to_dict(), "mode": "baseline", "rule": why})


@main.command("verify")
@opt.verify_options
@common_options("output", "force", "meta", "threads", "device", "quiet", "verbose")
def verify_cmd(old_path, new_path, cluster_path, space_path, cluster_new, trials, audit, top_k, lax_deps, **_):
    """Warm re-plan of MODEL_NEW (cache filled by MODEL_OLD) against a cold full search; exit 3 on a mismatch."""
    from methodkit.core.errors import CheckFailed
    from methodkit.tools.concord import spec
    from methodkit.tools.concord.commands import read_cluster, read_model, read_specs
    from methodkit.tools.concord.verify import verify

    run = Run.from_context()
    run.threads()
    opt.one_caller_threads()
    limit = opt.audit_limit(audit)
    old, cluster, space = read_specs(run.input_bytes, old_path, cluster_path, space_path)
    new = read_model(run.input_bytes, new_path)
    spec.check_model_fits_space(new, space, new_path)
    cluster2 = read_cluster(run.input_bytes, cluster_new) if cluster_new else None
    with run.progress() as cb:
        report = verify(old, new, cluster, space, trials=trials, audit_limit=limit, top_k=top_k, progress=cb,
                        new_cluster=cluster2, device=run.device(), strict=not lax_deps)  # fmt: skip
    run.emit_result(report.to_dict())
    if not report.ok:
        raise CheckFailed("warm re-plan and cold full search disagree; see the report's trials")


@main.command("sweep")
@opt.sweep_options
@common_options("output", "format", "force", "meta", "threads", "quiet", "verbose")
def sweep_cmd(fixtures_dir, edits_path, trials, only, audit, **_):
    """One row per (fixture, edit, trial): counts, top-1 match, cold/warm seconds, hits, stale mismatches."""
    import pandas as pd

    from methodkit.tools.concord.commands import sweep_inputs
    from methodkit.tools.concord.verify import sweep

    run = Run.from_context()
    run.threads()
    opt.one_caller_threads()
    limit = opt.audit_limit(audit, digits_only=True)
    fixtures, edits = sweep_inputs(run.input_bytes, fixtures_dir, edits_path, only)
    with run.progress() as cb:
        rows = sweep(fixtures, edits, trials=trials, audit_limit=limit, progress=cb)
    run.emit_table(pd.DataFrame(rows))


@main.command("reference")
@opt.reference_options
@common_options("output", "format", "force", "meta", "threads", "quiet", "verbose")
def reference_cmd(table_path, tolerance, mbs_list, vpp_list, partition, strict, **_):
    """Predicted vs published per-GPU TFLOP/s (Narayanan et al. 2021, Table 1 by default), one row each.

    Each row keeps the published tp, pp and GPU count and searches microbatch size and interleaving.
    TABLE.yaml has the layout 'concord-plan fixtures DIR' writes to DIR/reference/narayanan2021-table1.yaml.
    """
    import pandas as pd

    from methodkit.core.errors import CheckFailed
    from methodkit.tools.concord import reference
    from methodkit.tools.concord.commands import reference_failure, reference_summary_line, reference_table

    run = Run.from_context()
    run.threads()
    opt.one_caller_threads()
    mbs, vpp = opt.int_list(mbs_list, "--mbs"), opt.int_list(vpp_list, "--vpp")
    table = reference_table(run.input_bytes, table_path)
    with run.progress() as cb:
        result = reference.check(table, tolerance=tolerance, mbs=mbs, vpp=vpp, partition=partition, progress=cb)
    summary = result.summary()
    if not run.quiet:
        err_console().print(reference_summary_line(summary, tolerance, table.source))
    run.emit_table(pd.DataFrame(result.rows))
    if strict and (message := reference_failure(result.rows, summary, tolerance)):
        raise CheckFailed(message)


@main.command("explain")
@click.argument("plan_path", metavar="PLAN.json")
@click.option("--reuse", is_flag=True, help="List cache misses and the dependency key that changed instead.")
@common_options("output", "format", "force", "quiet", "verbose")
def explain_cmd(plan_path, reuse, **_):
    """Per-layer time, memory and communication of a plan's best strategy (or, with --reuse, why misses happened)."""
    import pandas as pd

    from methodkit.tools.concord.commands import check_plan_document
    from methodkit.tools.concord.explain import layer_rows, reuse_rows

    run = Run.from_context()
    document = run.read_json(plan_path)
    check_plan_document(document, plan_path if plan_path != "-" else "<stdin>")
    run.emit_table(pd.DataFrame(reuse_rows(document) if reuse else layer_rows(document)))


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
    check_output(folder, folder=True, force=True)  # a file there: refused now
    check_target(folder)  # no parent folder: refused, not created
    export(folder, force=run.force)


@main.group("cache")
def cache_group():
    """Inspect and maintain a primitive cache directory."""


@cache_group.command("stats")
@click.argument("folder", metavar="DIR")
@common_options("output", "force", "quiet", "verbose")
def cache_stats(folder, **_):
    """Entries, bytes and per-template counts of the cache in DIR."""
    from methodkit.tools.concord.commands import cache_verb

    Run.from_context().emit_result(cache_verb(folder, "stats"))


@cache_group.command("gc")
@click.argument("folder", metavar="DIR")
@click.option("--older-than-days", type=float, default=None, help="Also drop entries older than this.")
@common_options("output", "force", "quiet", "verbose")
def cache_gc(folder, older_than_days, **_):
    """Drop entries whose template version or code hash is no longer current."""
    from methodkit.tools.concord.commands import cache_verb

    Run.from_context().emit_result(cache_verb(folder, "gc", older_than_days))


@cache_group.command("clear")
@click.argument("folder", metavar="DIR")
@common_options("output", "force", "quiet", "verbose")
def cache_clear(folder, **_):
    """Delete every entry of the cache in DIR."""
    from methodkit.tools.concord.commands import cache_verb

    Run.from_context().emit_result(cache_verb(folder, "clear"))
