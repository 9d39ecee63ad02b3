"""irt-fit: fit 1PL/2PL/3PL IRT models by MML-EM, MCMC, VI or PSN; score fits against truth."""

from __future__ import annotations

from methodkit.cli._common import DemoStep, Run, common_options, input_argument, tool_group, warn
from methodkit.cli._irt_options import bench_options, eval_options, fit_options

DEMO = [
    DemoStep(
        "irt-sim draw --profile mmlu -J 200 -N 25 --seed 1 -o d.npz && irt-fit fit d.npz --method vi --steps 400 --out-dir v"
        " && irt-fit eval --truth d.npz --fit v",
        "simulated MMLU, 25 models x 200 items",
        "coverage_b",
        "VI 95% coverage of b at N=25",
    ),
]


@tool_group(name="irt-fit")
def main():
    """Fit IRT models to benchmark response matrices and score the fits.

    `fit` estimates item parameters (a, b, c) and model abilities (theta) under the
    1PL, 2PL or 3PL by one of four estimators: MML-EM (Bock-Aitkin, mirt's defaults),
    MCMC (Metropolis within Gibbs, or Polya-Gamma Gibbs for the 1PL/2PL, with R-hat and
    ESS), mean-field VI (py-irt's model: hierarchical N(mu, 1/u) priors, Gaussian q over
    theta, b, log a, Gamma q over each precision u, last-step parameters, a = exp(loc))
    or PSN (the neural pseudo-Siamese network of PSN-IRT). MML takes SQUAREM acceleration (`--accelerate squarem`) and EAP or MAP
    abilities (`--scoring`). `eval` aligns a fit with the generating truth of `irt-sim
    draw` (sign check, then mean-sigma or Stocking-Lord linking) and reports
    ranking, item-recovery, coverage and predictive metrics. `bench` times our
    estimators against girth and the python mirt package (CPU seconds).

    PSN fits an unconstrained a by default (the reference's choice) and reports the scale
    with mean a > 0, as the other estimators (fit.json: sign_reflected, n_negative_a); it
    can still end with some items at a < 0, which `--positive-a` (softplus) rules out.
    How each estimator fares on the issue's acceptance grid: docs/irt.md.

    \b
    EXAMPLES
      irt-sim draw -J 500 -N 100 -o d.npz
      irt-fit fit d.npz --out-dir fit                      # MML-EM 2PL
      irt-fit fit d.npz --method mcmc --warmup 500 --draws 500 --out-dir mc
      irt-fit fit d.npz --accelerate squarem --scoring map --out-dir sq
      irt-fit fit d.npz --method mcmc --sampler pg --out-dir pg
      irt-fit fit responses.csv --model 3pl --se louis --out-dir fit3
      irt-fit fit combine.csv --no-header --method psn --out-dir psn
      irt-fit eval --truth d.npz --fit fit | jq .kendall_tau
      irt-fit eval --truth d.npz --fit fit --linking stocking-lord
      irt-fit bench --n-models 200 --n-items 400

    \b
    EXIT STATUS
      0  success
      1  failure while running (a fit that diverged or ran past --time-limit or
         --cpu-limit: outputs kept)
      2  bad usage or bad input data (non-binary cells, duplicates, too small, over --mem-limit)
      3  --fail-if-unconverged and the fit did not converge (MML: --tol not reached;
         MCMC: R-hat >= 1.05 or bulk ESS < 100; VI: mean ELBO still moving; PSN: no early stop)
      130  interrupted
    """


@main.command("fit")
@input_argument()
@fit_options
@common_options(
    "output",
    "format",
    "in_format",
    "seed",
    "device",
    "threads",
    "meta",
    "force",
    "quiet",
    "verbose",
    formats=("json", "table"),
    in_formats=("csv", "tsv", "parquet", "jsonl", "json", "npz"),
)
def fit_cmd(
    input,
    model,
    method,
    out_dir,
    c_prior,
    quadrature,
    no_header,
    drop_extreme,
    binarize,
    time_limit,
    cpu_limit,
    mem_limit,
    fail_if_unconverged,
    **opts,
):
    """Fit MODEL by METHOD to DATA (NPZ, long or wide CSV/Parquet); print a one-line JSON summary."""
    import os

    run = Run.from_context()
    run.threads()  # before Numba is imported: core.backend sets NUMBA_NUM_THREADS, which Numba reads once

    from methodkit.core.errors import RunFailure
    from methodkit.tools.irt import data as data_mod
    from methodkit.tools.irt import runs

    paths = runs.out_paths(out_dir)
    if paths:
        if os.path.isdir(out_dir):  # else the fit creates it
            run.claim_outputs(*paths.values(), defer=False)  # a timed-out fit keeps its partial results
    source = run.input_bytes(input)
    data = data_mod.read_response_data(source, run.params.get("in_format"), no_header=no_header, binarize=binarize)
    data, screen = data_mod.screen(data, source.name, model=model, method=method, drop_extreme=drop_extreme)
    for message in screen.warnings:
        warn(run.tool, message)
    # the estimators (Numba, SciPy) are imported only once the data passed the checks: bad input fails fast
    from methodkit.tools.irt import estimators
    from methodkit.tools.irt.result import TimeBudget

    device = run.device() if method in ("mml", "vi", "psn") else "cpu"
    options = runs.settings_options(method, opts, quadrature=quadrature, c_prior=c_prior, device=device)
    settings = estimators.make_settings(method, **options)
    with run.progress() as callback:
        result = estimators.run(
            data,
            model,
            method,
            settings,
            seed=run.seed,
            time_limit=TimeBudget(time_limit, cpu_limit) if cpu_limit else time_limit,
            mem_limit_mb=mem_limit,
            callback=callback,
        )
    for message in result.info["warnings"]:
        warn(run.tool, message)
    result.info["screen"] = screen.to_dict()
    result.info["input"] = source.name
    if paths:
        runs.write_fit(result, paths, run.force)
    summary = result.to_dict()
    if run.fmt == "table":
        run.params["fmt"] = None
        run.emit_result(summary, title=f"irt-fit fit ({method}, {model})")
    else:
        from methodkit.core.io import write_json

        record = run.write_meta()
        write_json({**summary, "meta": record} if record else summary, run.output, force=run.force)
    if result.info["status"] != "ok":
        raise RunFailure(
            f"the {method} fit ended with status {result.info['status']}"
            + (f"; partial results in {out_dir}" if out_dir else "")
        )
    if fail_if_unconverged and not result.info["converged"]:
        from methodkit.core.errors import CheckFailed
        from methodkit.tools.irt.estimators import unconverged_message

        raise CheckFailed(f"--fail-if-unconverged: {unconverged_message(result.info)}")


@main.command("eval")
@eval_options
@common_options("output", "format", "meta", "force", "quiet", "verbose", formats=("json",))
def eval_cmd(truth, fit_dir, model, linking, **_):
    """Compare a fit with the generating truth: one JSON line of metrics."""
    import json

    from methodkit.core import io
    from methodkit.core.errors import DataError
    from methodkit.tools.irt import data as data_mod
    from methodkit.tools.irt import evaluate, runs

    run = Run.from_context()
    truth_data = data_mod.from_arrays(io.read_arrays(run.input_bytes(truth)), truth)
    est, item_id, model_id, info = runs.read_fit(fit_dir)
    model = model or info.get("model", "2pl")
    truth_data, est = runs.align(truth_data, est, item_id, model_id, fit_dir)  # by id
    if not truth_data.has_truth():
        raise DataError(f"{truth}: no generating truth (theta, b); eval needs irt-sim draw output")
    metrics = evaluate.evaluate(est, truth_data, model, linking=linking)
    metrics = {"estimator": info.get("estimator"), "model": model, "status": info.get("status"), **metrics}
    run.emit_result(json.loads(io.dumps_json(metrics)))


@main.command("bench")
@bench_options
@common_options("output", "format", "seed", "threads", "meta", "force", "quiet", "verbose")
def bench_cmd(n_models, n_items, girth_items, only, **_):
    """Time our estimators against girth / python mirt / NumPy twins: case, size, ours_s, ref_s, ratio.

    Times are CPU seconds of the process (all threads); `-j 1` runs every library on one thread.
    """
    import os

    import pandas as pd

    run = Run.from_context()
    n_threads = run.threads()  # before Numba is imported
    if n_threads:
        os.environ.setdefault("RAYON_NUM_THREADS", str(n_threads))  # python mirt's Rust pool

    from methodkit.tools.irt import benchmark

    with run.progress() as callback:
        rows = benchmark.run(
            n_models,
            n_items,
            girth_items=girth_items,
            seed=run.seed,
            which=only or ("mml", "mcmc", "vi", "psn"),
            threads=n_threads,
            callback=callback,
        )
    run.emit_table(pd.DataFrame(rows, columns=["case", "size", "ours_s", "ref_s", "ratio", "note"]))
