"""The paper's qualitative effect at small scale: fitted CBF dispersions tell volatility-lesioned from
stochasticity-lesioned particle-filter agents (data the CBF did not generate)."""

from __future__ import annotations

import numpy as np

from methodkit.tools.cbf import agents, analyze, data, fit


def test_cbf_dispersion_separates_pf_lesion_groups():
    task = data.simulate_task(seed=5)
    labels = ["vol-blind"] * 4 + ["sto-blind"] * 4
    people = data.cohort_for_agents(task, len(labels), seed=6)
    params = agents.population_params("pf-beta", labels, np.random.default_rng(7), 4.0)
    sim = agents.simulate(people, "pf-beta", params, seed=8, particles=200)
    opts = fit.FitOptions(restarts=3)
    table = fit.run(sim.cohort, opts).table
    D = table["D"].to_numpy()
    vol = np.array(labels) == "vol-blind"
    assert analyze.auc(D, vol) >= 0.8
    assert np.median(D[vol]) > np.median(D[~vol])
