"""cbf-fit: fit the Categorical Bayes Filter (or a particle-filter / Kalman baseline) per subject, read out
trial-wise signals, and run the learning-rate, phenotype and response-time analyses."""

from __future__ import annotations

from methodkit.cli._cbf_options import analyze_options, data_options, fit_options, learner_options, signals_options
from methodkit.cli._common import DemoStep, Run, common_options, input_argument, tool_group
from methodkit.tools.cbf.commands import learner_settings, parse_pair

FIT_COMMON = ("in_format", "output", "format", "force", "seed", "threads", "device", "meta", "quiet", "verbose")
# The filters' results do not depend on the thread count (tools/cbf/threads.py), so the default may follow
# the load: all cores on an idle machine, one on a busy one (all cores there: 1.2-1.4x slower than -j 1).
IDLE_CORES = "the cores idle now"

DEMO = [
    DemoStep(
        "cbf-sim task --seed 1 | cbf-sim agents --agent pf-beta --population healthy:5,vol-blind:5,sto-blind:5 --seed 2 -o a.csv"
        " && cbf-fit fit a.csv --restarts 3 -o p.csv && cbf-fit analyze a.csv --params p.csv",
        "15 pf-beta agents (5 per group)",
        "auc.vol-blind_vs_sto-blind",
        "CBF phenotype AUC",
    ),
]


def read_cohort(run: Run, path: str, importer: str, clip: str):
    """How INPUT is read (fit, signals, analyze)."""
    from methodkit.cli._common import warn
    from methodkit.tools.cbf import data

    if importer == "stovol-mat":
        raw = run.input_bytes(path)
        return data.import_stovol_mat(raw.data, raw.name)
    prog = run.tool.split()[0]
    return data.from_frame(run.read_table(path), clip=parse_pair(clip, "--clip"), warn=lambda m: warn(prog, m))


@tool_group(name="cbf-fit")
def main():
    """Fit the Categorical Bayes Filter and its baselines to prediction-task data, per subject.

    The CBF (Piray & Daw's conditional Kalman learner with the particle layer over
    volatility v and stochasticity s replaced by a K x K categorical grid of Beta-quantile
    nodes) gives an exact, deterministic likelihood, so each subject's location (mu) and
    dispersion (omega = 1/kappa) per noise source and response noise sigma_r are fitted by
    gradient (batched, box-projected L-BFGS over every subject x start point, exact
    reverse-mode gradients, Laplace evidence from the Hessian). `--model pf-hpl|pf-beta` fits the
    particle-filter baselines by the derivative-free SSE protocol; `kf` a fixed-(v, s) Kalman
    filter. `signals` writes trial-wise predictions, learning rates, posterior means of v and
    s, ambiguity Var[log v - log s] and grid entropy. `analyze` runs the model-neutral
    learning-rate GLM, the phenotype cross-over (terciles of D = log kappa_v - log kappa_s)
    and the regression of log RT on ambiguity.

    \b
    OUR READINGS (where the issue left a choice; why, measured: docs/cbf.md)
      - One L-BFGS per row (subject x start), all rows evaluated together, in Beta-shape
        coordinates where the shape clamp [0.05, 1e4] is a box kept by projection; the
        prior stays on (logit mu, log kappa). grad_norm is the projected gradient.
      - Start points: the --restarts fixed design plus --screen more, the best of an
        81-point shape grid (the likelihood is multimodal).
      - Exact gradients: a numba forward pass and a reverse-mode (adjoint) sweep;
        --gradient torch runs the same fit on autograd (the reference). The Laplace
        Hessian is central differences of that gradient.
      - params.csv has no wall-time column unless --timing (reruns are byte-identical);
        with -o FILE, stdout is one JSON summary line.
      - pf-hpl has one jump sd for both noise sources. --optimizer bo: a GP (Matern 5/2 +
        learned noise) with expected improvement, 5 Latin-hypercube seed points.
      - Particle filters draw from their own seeded generators; --device cuda (particle
        filters only) agrees with the CPU kernel in distribution, not draw for draw.
      - Responses at the --clip bounds are Gaussian observations unless --censor; use it
        where many responses sit at a bound.
      - .mat import: randomization_order[k] is the condition at block position k.
      - RT: control for PE autocovariance |delta_(t-1) * delta_(t-2)|; group test a
        one-sample t on the per-subject beta_A, with an exact sign test beside it.

    \b
    EXAMPLES
      cbf-fit fit agents.csv -o params.csv
      cbf-fit fit experiment1/data.mat --import stovol-mat -o params.csv
      cbf-fit fit agents.csv --model pf-hpl --particles 1000 --runs 4 --evaluations 60 -o pf.csv
      cbf-fit fit agents.csv --model pf-hpl --optimizer bo --particles 10000 --runs 10 --evaluations 200
      cbf-fit signals agents.csv --params params.csv -o signals.parquet
      cbf-fit analyze agents.csv --params params.csv --compare pf.csv --out subjects.csv | jq .phenotype

    \b
    EXIT STATUS
      0  success
      1  failure while running (the fit failed for more than 5% of subjects; the others are written)
      2  bad usage or bad input data
      130  interrupted
    """


@main.command("fit")
@input_argument()
@data_options
@fit_options
@learner_options
@common_options(*FIT_COMMON, threads_default=IDLE_CORES)
def fit(
    input,
    importer,
    clip,
    model,
    objective,
    restarts,
    screen,
    gradient,
    max_iter,
    censor,
    lapse,
    runs,
    evaluations,
    optimizer,
    timing,
    **params,
):
    """Fit one model per subject; write the params table (-o) and a one-line JSON summary."""
    import time

    from methodkit.cli._common import warn
    from methodkit.core import io
    from methodkit.tools.cbf import fit as fitmod
    from methodkit.tools.cbf.forward import ResponseModel
    from methodkit.tools.cbf.runs import clip_warning, edge_warning, fit_summary

    run = Run.from_context()
    run.threads(default="idle")
    grid, fopts = learner_settings(params)
    cohort = read_cohort(run, input, importer, clip)
    clipped = clip_warning(cohort, parse_pair(clip, "--clip"), censor)
    if clipped:
        warn(run.tool.split()[0], clipped)
    opts = fitmod.FitOptions(
        model=model,
        grid=grid,
        filter=fopts,
        response=ResponseModel(parse_pair(clip, "--clip"), censor, lapse),
        objective=objective,
        restarts=restarts,
        screen=screen,
        gradient=gradient,
        max_iter=max_iter,
        particles=params["particles"],
        runs=runs,
        evaluations=evaluations,
        optimizer=optimizer,
        device=run.device() if model in ("pf-beta", "pf-hpl") else "cpu",
    )
    started = time.perf_counter()
    with run.progress() as cb:
        result = fitmod.run(cohort, opts, seed=run.seed, progress=cb)
    # wall time breaks byte-identical reruns, so it is a column only on request
    table = result.table if timing else result.table.drop(columns=["seconds"])
    if model == "cbf":
        edge = edge_warning(cohort, table, grid, fopts)
        if edge:
            warn(run.tool.split()[0], edge)
    if run.output == "-":
        run.emit_table(table)
    else:
        io.write_table(table, run.output, run.fmt, force=run.force)
        summary = fit_summary(model, table, result.failed, time.perf_counter() - started)
        run.emit_result(summary, output="-")
    fitmod.check_failures(result)


def _read_params(run: Run, path: str | None):
    """The --params table and its model; read after INPUT so that a missing input is reported first."""
    from methodkit.tools.cbf.runs import params_model, require_params_path

    table = run.read_table(require_params_path(path))
    return table, params_model(table, path)


@main.command("signals")
@input_argument()
@data_options
@signals_options
@learner_options
@common_options(*FIT_COMMON, threads_default=IDLE_CORES)
def signals(input, importer, clip, params_path, runs, **params):
    """Write trial-wise latent signals of the fitted model (pred_mean, pred_var, lr, vol_mean, sto_mean, ambiguity, entropy)."""
    from methodkit.tools.cbf import signals as sigmod

    run = Run.from_context()
    run.threads(default="idle")
    grid, fopts = learner_settings(params)
    cohort = read_cohort(run, input, importer, clip)
    table, model = _read_params(run, params_path)
    values = sigmod.params_values(table, model, cohort.subjects, params_path)
    device = run.device() if model in ("pf-beta", "pf-hpl") else "cpu"
    sig = sigmod.model_signals(
        cohort,
        model,
        values,
        grid=grid,
        fopts=fopts,
        particles=params["particles"],
        runs=runs,
        seed=run.seed,
        device=device,
    )
    run.emit_table(sigmod.to_frame(cohort, sig))


@main.command("analyze")
@input_argument()
@data_options
@analyze_options
@learner_options
@common_options("in_format", "output", "force", "seed", "meta", "quiet", "verbose")
def analyze(input, importer, clip, params_path, signals_path, compare_path, out_path, **params):
    """Learning-rate GLM, phenotype cross-over test and ambiguity -> RT regression; JSON on stdout."""
    from methodkit.core import io
    from methodkit.tools.cbf import analyze as anmod
    from methodkit.tools.cbf import signals as sigmod
    from methodkit.tools.cbf.runs import ambiguity_from_table

    run = Run.from_context()
    grid, fopts = learner_settings(params)
    cohort = read_cohort(run, input, importer, clip)
    table, model = _read_params(run, params_path)
    if signals_path:
        amb = ambiguity_from_table(run.read_table(signals_path), cohort, signals_path)
    else:
        values = sigmod.params_values(table, model, cohort.subjects, params_path)
        amb = sigmod.model_signals(
            cohort, model, values, grid=grid, fopts=fopts, particles=params["particles"], seed=run.seed
        ).arrays["ambiguity"]
    compare = run.read_table(compare_path) if compare_path else None
    result = anmod.run(cohort, table, amb, compare=compare)
    if out_path:
        io.write_table(result.table, out_path, force=run.force)
    run.emit_result(result.to_dict())
