"""Small shared inputs for the cbf tests: one simulated task and a few agents on it."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="session")
def task():
    from methodkit.tools.cbf import data

    return data.simulate_task(seed=11, trials=20)


@pytest.fixture(scope="session")
def cbf_agents(task):
    from methodkit.tools.cbf import agents, data

    people = data.cohort_for_agents(task, 4, seed=1)
    params = agents.population_params("cbf", ["healthy"] * 4, np.random.default_rng(2), 4.0)
    return agents.simulate(people, "cbf", params, seed=3)
