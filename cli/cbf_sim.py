"""cbf-sim: outcome sequences of the volatility x stochasticity task, and synthetic participants on them."""

from __future__ import annotations

import click

from methodkit.cli._cbf_options import learner_options
from methodkit.cli._common import (
    DemoStep,
    FiniteFloatRange,
    OutputPath,
    Run,
    common_options,
    input_argument,
    tool_group,
)

DEMO = [
    DemoStep(
        "cbf-sim task --seed 1 | cbf-sim agents --agent pf-beta --population healthy:6,vol-blind:6,sto-blind:6 --seed 2",
        "stovol2x2 task, 18 pf-beta agents",
        "rows",
        "trials simulated",
    ),
]


@tool_group(name="cbf-sim")
def main():
    """Simulate the volatility x stochasticity prediction task and synthetic participants.

    `task` writes the shared outcome sequences of a design as a long table (one block per
    condition): the default stovol2x2 design of Piray & Daw (2024) crosses true volatility
    variance {4, 49} with stochasticity variance {16, 64}, 50 trials per block, a random-walk
    latent starting at 60 and outcome = latent + N(0, sto), each sequence redrawn until its
    outcomes lie in --within (15-85, inside the 10-90 response range, as the real task's). `agents` runs learners on those
    sequences (each participant gets a random block order, as in the real task) and writes
    their predictions (plus response noise, rounded and clipped like the real task) and
    response times, in the canonical long table that `cbf-fit` reads.

    \b
    EXAMPLES
      cbf-sim task -o task.csv
      cbf-sim agents task.csv --agent cbf --population healthy:100 --params-out truth.csv -o agents.csv
      cbf-sim agents task.csv --agent pf-beta --population healthy:60,vol-blind:60,sto-blind:60 -o lesions.csv
      cbf-sim task | cbf-sim agents --rt "logrt=8.4+0.2*amb+N(0,0.1)" | cbf-fit fit --model kf

    \b
    EXIT STATUS
      0  success
      1  failure while running
      2  bad usage or bad input data
      130  interrupted
    """


@main.command("task")
@click.option("--design", type=click.Choice(["stovol2x2"]), default="stovol2x2", show_default=True, help="Task design.")
@click.option("--trials", type=click.IntRange(min=3), default=None, help="Trials per block [default: 50].")
@click.option("--start", type=FiniteFloatRange(), default=None, help="Initial latent value [default: 60].")
@click.option(
    "--within",
    default="15,85",
    show_default=True,
    metavar="LO,HI|none",
    help="Redraw each sequence until its outcomes lie in [LO, HI] (none: unconstrained random walk).",
)
@common_options("output", "format", "force", "seed", "meta", "quiet", "verbose")
def task(design, trials, start, within, **_):
    """Write the outcome sequences of a design (one block per condition) as a long table."""
    from methodkit.core.memory import guard_memory
    from methodkit.tools.cbf import data
    from methodkit.tools.cbf.commands import parse_pair

    rows = data.task_rows(design, trials)
    guard_memory(rows * data.TASK_BYTES_PER_ROW, f"a task table of {rows:,} rows", "--trials")
    run = Run.from_context()
    bounds = None if within.strip().lower() == "none" else parse_pair(within, "--within")
    task = data.simulate_task(design, trials=trials, start=start, seed=run.seed, within=bounds)
    run.emit_table(data.task_frame(task))


@main.command("agents")
@input_argument()
@click.option(
    "--agent",
    type=click.Choice(["cbf", "pf-beta", "pf-hpl", "kf"]),
    default="cbf",
    show_default=True,
    help="The learner.",
)
@click.option(
    "--params",
    "params_path",
    default=None,
    metavar="CSV",
    help="Per-agent parameters (columns of the agent's model, optional sigma_r and group).",
)
@click.option(
    "--population",
    default="healthy:20,vol-blind:20,sto-blind:20",
    show_default=True,
    help="Groups to draw when --params is not given.",
)
@click.option(
    "--sigma-r",
    type=FiniteFloatRange(min=0),
    default=4.0,
    show_default=True,
    help="Response noise sd (when the params lack sigma_r).",
)
@click.option(
    "--clip", default="10,90", show_default=True, metavar="LO,HI", help="Response range; responses are clipped to it."
)
@click.option(
    "--step",
    type=FiniteFloatRange(min=0),
    default=2.0,
    show_default=True,
    help="Responses are rounded to this step (0 = no rounding).",
)
@click.option(
    "--rt",
    "rt_formula",
    default="logrt=8.4+0.05*amb+N(0,0.1)",
    show_default=True,
    help="Response-time model (signals: amb, entropy).",
)
@click.option(
    "--params-out", type=OutputPath(), default=None, metavar="PATH", help="Also write the agents' true parameters here."
)
@learner_options
@common_options("in_format", "output", "format", "force", "seed", "threads", "meta", "quiet", "verbose")
def agents(input, agent, params_path, population, sigma_r, clip, step, rt_formula, params_out, **params):
    """Simulate participants on the outcome sequences in INPUT (a task or data table)."""
    import numpy as np

    from methodkit.core import io
    from methodkit.tools.cbf import agents as agentsmod
    from methodkit.tools.cbf import data
    from methodkit.tools.cbf.commands import learner_settings, parse_pair

    run = Run.from_context()
    run.threads()
    grid, fopts = learner_settings(params)
    rt = agentsmod.parse_rt(rt_formula)
    clip_pair = parse_pair(clip, "--clip")
    if params_path:
        table = run.read_table(params_path)
        if "sigma_r" not in table.columns:
            table["sigma_r"] = sigma_r
        if "group" not in table.columns:
            table["group"] = "given"
        labels = None
    else:
        labels = agentsmod.parse_population(population)
    task_table = run.read_table(input)
    cohort = data.from_frame(task_table, clip=None)
    task = data.task_from_cohort(cohort)
    n = len(labels) if labels is not None else len(table)
    people = data.cohort_for_agents(task, n, seed=run.seed)
    if labels is not None:
        table = agentsmod.population_params(
            agent, labels, np.random.default_rng(np.random.SeedSequence([run.seed, 7])), sigma_r
        )
    result = agentsmod.simulate(
        people,
        agent,
        table,
        seed=run.seed,
        clip=clip_pair,
        step=step,
        rt=rt,
        grid=grid,
        fopts=fopts,
        particles=params["particles"],
    )
    frame = result.to_frame()
    if params_out:
        io.write_table(
            result.params[["subject", *[c for c in result.params.columns if c != "subject"]]],
            params_out,
            force=run.force,
        )
    run.emit_table(frame)
