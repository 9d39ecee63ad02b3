"""What pls-test's verbs do between parsing and writing: check the flags, build the options, run the tests
and write every file (no click, no printing: warnings go through the `warn` callback)."""

from __future__ import annotations

import sys
from collections.abc import Callable


def test(run, p: dict, warn: Callable[[str], None], print_frame: Callable) -> None:
    """`pls-test test`: every flag and output path is checked before any computation; `print_frame` shows
    the human table on a terminal."""
    from methodkit.core import io
    from methodkit.core.errors import CheckFailed, UsageError
    from methodkit.core.threads import prefer_workqueue, single_blas
    from methodkit.tools.pls import api, methods, runs

    outputs = [run.output, p["per_split_path"], p["null_path"], p["loadings_path"], p["coef_path"]]
    run.refuse_existing_output(*outputs, run.params.get("meta"))
    if p["null_path"] and io.format_from_path(p["null_path"], None, "npy") not in ("npy", "npz"):
        raise UsageError(f"--null {p['null_path']}: expected a .npy or .npz path")
    if p["select_k"] is not None and p["ks"] is not None:
        raise UsageError("pass either -k/--components or --select-k, not both")
    method, perms = p["method"], p["perms"]
    k_list = runs.parse_ks(p["ks"]) if p["ks"] is not None else None
    run.threads()
    prefer_workqueue()
    with single_blas():
        design = runs.load_design(
            run, p["input"], p["target"], p["x_glob"], p["x_range"], p["y_path"], p["drop_nonnumeric"], p["dropna"],
            p["weights"],
        )  # fmt: skip
        for message in design.warnings:
            warn(message)
        k_list = k_list or ([] if p["select_k"] is not None else runs.parse_ks(p["ks"]))
        kind, W = runs.directions(p["directions"], run)
        if perms < 99 and method in ("nb-perm", "all", "cvq2-perm"):
            warn(f"--perms {perms} < 99: the p-value floor 1/(B+1) = {1 / (perms + 1):.3g} is too coarse")
        options = api.Options(
            method=method,
            splits=p["splits"],
            perms=perms,
            folds=p["folds"],
            seed=run.seed,
            directions=methods.Directions(kind, p["spca_keep"], W),
            rotate=p["rotate"],
            kaiser=p["kaiser"],
            force_nb=p["force_nb"],
            alpha=p["alpha"],
            segments=p["segments"],
            jack_center=p["jack_center"],
            # auto stays on the CPU: the CuPy twins have not been validated on a device yet
            device="cpu" if run.params.get("device") == "auto" else run.device(),
            select_k=p["select_k"],
            q2_center=p["q2_center"],
        )
        for K in k_list:
            api.check_k(design, K, options)
        if kind == "fixed":
            warn(
                "fixed directions must come from independent data; directions learned on these rows invalidate the test"
            )
        gate_state = api.gate.check(design.X, design.w)
        if gate_state.fired and method in ("auto", "nb", "all") and not p["force_nb"]:
            warn(f"gate fired ({gate_state.reason}): NB-asymptotic rerouted to NB-permutation; --force-nb overrides")
        with run.progress() as progress:
            results = api.run(design, k_list, options, progress)
        if p["select_k"] is not None:
            chosen = results[0].selection
            warn(f"--select-k chose K = {chosen['chosen']} of 1..{chosen['k_max']} (CV one-sigma). {chosen['warning']}")
            k_list = [chosen["chosen"]]
        loadings = {K: api.loadings(design, K, options) for K in k_list} if p["loadings_path"] else None
    _write_files(run, design, results, p, loadings)
    _emit_rows(run, [r.to_dict() for r in results], print_frame)
    if p["fail_if_reject"] and any(r.reject for r in results):
        hits = ", ".join(f"{r.method} k={r.k} p={r.pvalue:.3g}" for r in results if r.reject)
        raise CheckFailed(f"--fail-if-reject: rejected at alpha = {p['alpha']}: {hits}")


def _write_files(run, design, results, p: dict, loadings) -> None:
    from methodkit.core import io
    from methodkit.tools.pls import runs

    if p["per_split_path"]:
        io.write_table(runs.per_split_table(results), p["per_split_path"], force=run.force)
    if p["null_path"]:
        io.write_arrays(p["null_path"], runs.null_arrays(results, p["null_path"]), force=run.force)
    if p["loadings_path"]:
        io.write_table(runs.loadings_table(design, loadings), p["loadings_path"], force=run.force)
    if p["coef_path"]:
        io.write_table(runs.coef_table(design, results), p["coef_path"], force=run.force)


def _emit_rows(run, rows: list[dict], print_frame: Callable) -> None:
    """JSON lines, or the human table on a terminal / with --format table."""
    from methodkit.core import io
    from methodkit.tools.pls import runs

    record = run.write_meta()
    if record is not None:
        rows = [{**row, "meta": record} for row in rows]
    if run.fmt == "table" or (run.fmt is None and run.output == "-" and sys.stdout.isatty()):
        frame = runs.summary_rows(rows)
        if run.output == "-":
            print_frame(frame)  # the human table, also when piped with --format table
        else:
            io.write_table(frame, run.output, "csv", force=run.force)
        return
    with io.atomic_write(run.output, force=run.force) as handle:
        for row in rows:
            handle.write((io.dumps_json(row) + "\n").encode("utf-8"))


def power(run, p: dict) -> None:
    """`pls-test power`: curves as CSV rows, and n for 80% power in --summary."""
    import pandas as pd

    from methodkit.core import io
    from methodkit.core.errors import UsageError
    from methodkit.core.threads import single_blas
    from methodkit.tools.pls import api, runs
    from methodkit.tools.pls import power as power_mod

    run.refuse_existing_output(run.output, p["summary_path"])
    ns = runs.parse_sizes(p["sizes"])
    chosen = runs.parse_methods(p["method_list"])
    if p["workers"] < 1:
        raise UsageError(f"--workers must be >= 1, got {p['workers']}")
    run.threads()
    with single_blas():
        design = None
        if p["data_source"]:
            design = runs.load_design(run, p["data_source"], p["target"], p["x_glob"], None, None, False, False)
        scenario = power_mod.Scenario(p["geometry"], p["p"], p["active"], p["snr"], design, p["null"])
        options = api.Options(
            splits=p["splits"], perms=p["perms"], folds=p["folds"], seed=run.seed, alpha=p["alpha"],
            force_nb=p["force_nb"], q2_center=p["q2_center"],
        )  # fmt: skip
        with run.progress() as progress:
            points = power_mod.curves(
                scenario, ns, chosen, p["k"], p["reps"], options, progress, scheduler=p["scheduler"],
                workers=p["workers"],
            )  # fmt: skip
    frame = pd.DataFrame([vars(pt) for pt in points])
    if p["summary_path"]:
        n80 = {m: power_mod.n_for_power(points, m) for m in chosen}
        summary = {
            "alpha": p["alpha"], "k": p["k"], "reps": p["reps"], "scenario": p["data_source"] or p["geometry"],
            "null": p["null"], "n80": n80,
        }  # fmt: skip
        io.write_json(summary, p["summary_path"], force=run.force)
    run.emit_table(frame)


def bench(run, p: dict) -> None:
    """`pls-test bench`: one row per performance figure."""
    import pandas as pd

    from methodkit.core.errors import UsageError
    from methodkit.core.threads import prefer_workqueue, single_blas
    from methodkit.tools.pls import benchmark, runs

    if p["rounds"] < 1 or p["ref_perms"] < 1:
        raise UsageError(f"--rounds and --ref-perms must be >= 1, got {p['rounds']} and {p['ref_perms']}")
    run.refuse_existing_output()
    run.threads()
    prefer_workqueue()
    with single_blas():
        data_source, design = runs.bench_design(p["data_source"], run.seed)
        if design is None:
            design = runs.load_design(run, data_source, p["target"], p["x_glob"], None, None, False, False)
        with run.progress() as progress:
            rows = benchmark.run(
                design, p["k"], p["splits"], p["perms"], p["folds"], p["rounds"], p["ref_perms"], run.seed, progress
            )
    run.emit_table(pd.DataFrame(rows))
