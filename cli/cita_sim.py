"""cita-sim: the Bayesian tool-graph simulator (fit, synthetic tasks, Monte-Carlo candidate values)."""

from __future__ import annotations

import click

from methodkit.cli._common import DemoStep, OutputPath, Run, common_options, input_argument, tool_group

PROG = "cita-sim"

DEMO = [
    DemoStep(
        "cita-data bfcl --limit 30 --split train | cita-sim fit -o g.npz && cita-sim sample --graph g.npz -n 20"
        " | cita-sim value --graph g.npz -R 64 -j 1 | tail -1",
        "BFCL v4 multi_turn_base (bfcl-eval)",
        "value",
        "V_sim of the last candidate",
    ),
]

SIM_OPTIONS = [
    click.option(
        "-R", "--rollouts", type=click.IntRange(min=1), default=256, show_default=True, help="Rollouts per candidate."
    ),
    click.option(
        "--draws",
        type=click.IntRange(min=1),
        default=32,
        show_default=True,
        help="Posterior draws of θ and ρ shared by the rollouts (each rollout picks one).",
    ),
    click.option(
        "--slack", type=click.IntRange(min=0), default=3, show_default=True, help="Horizon H = |goal| + slack."
    ),
    click.option(
        "--gamma",
        type=click.FloatRange(min=0),
        default=4.0,
        show_default=True,
        help="Goal tilt of the rollout policy: g = 1 + gamma for ready unfinished goal tools.",
    ),
    click.option("--beta", type=click.FloatRange(min=0), default=2.0, show_default=True, help="Exponent of the tilt."),
]


def sim_options(f):
    for option in reversed(SIM_OPTIONS):
        f = option(f)
    return f


@tool_group(name=PROG)
def main():
    """The Bayesian tool-graph simulator of CITA.

    `fit` estimates the graph from trajectories: a data-flow prior (a response field of tool i names a
    parameter of tool j), Dirichlet transition rows from successful logs, Beta reliabilities from
    logged errors, the failure rate of ungrounded calls, and the mutating set (calls that changed the
    environment's state, else name heuristics). `sample` draws synthetic tasks from the posterior
    predictive (a chain START→STOP in a sampled domain, goal = visited tools) as candidates records.
    `value` computes V(c, a) = P(task turn succeeds | execute a next, then a noisy competent policy) by
    Monte-Carlo rollouts (Numba; bit-identical for any thread count).

    \b
    EXAMPLES
      cita-data bfcl --split train | cita-sim fit -o graph.npz
      cita-sim sample --graph graph.npz -n 5000 -o synthetic.jsonl
      cita-sim value --graph graph.npz candidates.jsonl -R 256 | jq .value

    \b
    NOTES
      Candidates given to `value` need 'goal': the tool names the current turn must execute.
      Posterior uncertainty enters through --draws pre-drawn posterior samples, one picked per rollout.

    \b
    EXIT STATUS
      0  success
      1  failure while running (value --device cuda without CuPy or a GPU)
      2  bad usage or bad input (malformed JSONL, a task with more than 64 tools, a missing graph)
      130  interrupted
    """


def _required_graph(path):
    from methodkit.core.errors import UsageError

    if path is None:
        raise UsageError("--graph PATH is required (a graph.npz from 'cita-sim fit')")
    return path


@main.command("fit")
@input_argument()
@click.option(
    "--alpha0",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="Prior mass of each Dirichlet row.",
)
@click.option("--kappa", type=float, default=2.0, show_default=True, help="Data-flow prior strength exp(κ·dep).")
@click.option("--skip-bad", is_flag=True, help="Skip malformed lines (counted) instead of failing.")
@click.option(
    "-o",
    "--output",
    type=OutputPath(sidecars=(".json",)),
    default=None,
    metavar="PATH",
    help="graph.npz (its sidecar graph.json is written beside it).",
)
@common_options("force", "meta", "quiet", "verbose")
def fit_cmd(input, alpha0, kappa, skip_bad, output, **_):
    """Fit the tool graph from trajectories: graph.npz + graph.json (tools, schemas, hyper-parameters)."""
    from methodkit.cli._cita_io import read_records, warner
    from methodkit.core.errors import UsageError
    from methodkit.tools.cita import api
    from methodkit.tools.cita import graph as tg

    run = Run.from_context()
    tasks = read_records(run, input, "trajectory", skip_bad)
    if output is None:
        raise UsageError("pass the graph file with -o graph.npz")
    graph = tg.fit(tasks, alpha0=alpha0, kappa=kappa, warn=warner(run))
    api.save_graph(output, graph, tasks)
    run.write_meta()


@main.command("sample")
@click.option("--graph", "graph_path", required=True, metavar="PATH", help="graph.npz from 'cita-sim fit'.")
@click.option(
    "-n", "--tasks", "n_tasks", type=click.IntRange(min=1), default=5000, show_default=True, help="Synthetic tasks."
)
@common_options("output", "seed", "force", "meta", "quiet", "verbose")
def sample_cmd(graph_path, n_tasks, **_):
    """Synthetic tasks from the posterior predictive, one candidates record (with 'goal') per line."""
    from methodkit.cli._cita_io import write_jsonl
    from methodkit.tools.cita import api, simulate

    run = Run.from_context()
    graph, side = api.load_graph(graph_path)
    write_jsonl(run, simulate.sample_tasks(graph, api.domains_of(graph, side), n_tasks, run.seed))


@main.command("value")
@input_argument()
@click.option("--graph", "graph_path", default=None, metavar="PATH", help="graph.npz from 'cita-sim fit' (required).")
@sim_options
@click.option("--skip-bad", is_flag=True, help="Skip malformed lines (counted) instead of failing.")
@common_options("output", "seed", "threads", "device", "force", "meta", "quiet", "verbose")
def value_cmd(input, graph_path, rollouts, draws, slack, gamma, beta, skip_bad, **_):
    """Monte-Carlo values of candidates: JSONL {context_id, name, arguments, value, std} per candidate.

    --device cuda runs the rollouts in a CuPy RawKernel with the Numba kernel's random streams (auto:
    CUDA when CuPy sees a GPU); the Numba kernel on the CPU is the reference."""
    from methodkit.cli._cita_io import read_records, write_jsonl
    from methodkit.tools.cita import api, simulate

    run = Run.from_context()
    run.threads()
    device = run.device()
    records, _ = api.prepare_candidates(read_records(run, input, "candidates", skip_bad))
    graph, _ = api.load_graph(_required_graph(graph_path))
    records = [r for r in records if r["candidates"]]
    cfg = simulate.SimConfig(rollouts=rollouts, draws=draws, slack=slack, gamma=gamma, beta=beta, seed=run.seed)
    rows = []
    for rec, (mean, std) in zip(records, simulate.values(graph, records, cfg, device)):
        for call, m, s in zip(rec["candidates"], mean, std):
            rows.append(
                {
                    "context_id": rec["context_id"],
                    "name": call["name"],
                    "arguments": call["arguments"],
                    "value": float(m),
                    "std": float(s),
                }
            )
    write_jsonl(run, rows)
