"""Issue 37 items 12-14: the default task stays in the response range, clipped responses are warned about,
the end-node warning fires only when the fitted prior ran to the range, the K = 1 filter is the Kalman filter."""

from __future__ import annotations

import numpy as np

from methodkit.tools.cbf import data


def test_default_task_stays_inside_the_response_range():
    for seed in range(5):
        task = data.simulate_task(seed=seed)
        assert task.outcome.min() >= 15 and task.outcome.max() <= 85
    free = [data.simulate_task(seed=s, within=None).outcome for s in range(5)]
    assert np.mean([((o < 10) | (o > 90)).mean() for o in free]) > 0.03  # what the default used to write
    steps = np.diff(data.simulate_task(seed=1).latent, axis=0)
    assert np.all(steps != 0) and data.simulate_task(seed=1).latent[0].tolist() == [60.0] * 4


def test_within_is_seeded_and_refuses_the_impossible():
    import pytest

    from methodkit.core.errors import UsageError

    assert np.array_equal(data.simulate_task(seed=3).outcome, data.simulate_task(seed=3).outcome)
    with pytest.raises(UsageError, match="stayed within"):
        data.simulate_task(seed=0, trials=400, within=(50.0, 70.0))


def _clipped_cohort(share: float):
    task = data.simulate_task(seed=2, trials=25)
    cohort = data.cohort_for_agents(task, 4, seed=0)
    rng = np.random.default_rng(0)
    cohort.response[:] = rng.uniform(20, 80, cohort.response.shape).round()
    flat = cohort.response.reshape(-1)
    flat[rng.choice(flat.size, int(share * flat.size), replace=False)] = 90.0
    return cohort


def test_clip_warning_threshold_and_censor():
    from methodkit.tools.cbf.runs import clip_warning

    assert clip_warning(_clipped_cohort(0.01), (10.0, 90.0), censor=False) is None
    message = clip_warning(_clipped_cohort(0.05), (10.0, 90.0), censor=False)
    assert message and "5.0% of the responses sit at a --clip bound" in message and "--censor" in message
    assert clip_warning(_clipped_cohort(0.05), (10.0, 90.0), censor=True) is None


def test_cbf_fit_warns_on_clipped_default_and_sim_task_default(run_cli, tmp_path):
    task = run_cli(["cbf-sim", "task", "--seed", "0", "--within", "none", "-o", tmp_path / "t.csv"])
    assert task.returncode == 0, task.stderr
    agents = run_cli(
        ["cbf-sim", "agents", tmp_path / "t.csv", "--agent", "kf", "--population", "healthy:2",
         "-o", tmp_path / "a.csv"]
    )  # fmt: skip
    assert agents.returncode == 0, agents.stderr
    fit = run_cli(["cbf-fit", "fit", tmp_path / "a.csv", "--model", "kf", "--restarts", "1", "-o", tmp_path / "p.csv"])
    assert fit.returncode == 0, fit.stderr
    assert b"warning:" in fit.stderr and b"sit at a --clip bound" in fit.stderr and b"--censor" in fit.stderr
    default = run_cli(["cbf-sim", "task", "--seed", "1"])
    outcome = [float(line.split(b",")[6]) for line in default.stdout.splitlines()[1:]]
    assert 15 <= min(outcome) and max(outcome) <= 85


def test_concentrated_grid_converges_to_the_kalman_filter_as_one_over_kappa(cbf_agents):
    # With kappa = 1e6 the 15 nodes still span ~1% of log variance, so the mixture differs from the centre
    # node's Kalman filter by ~1.5e-5 (the prior's spread, not rounding); the gap falls as 1/kappa and is
    # below 1e-8 from kappa = 1e10 on. K = 1 (equal nodes) is exact: test_filter.
    from methodkit.tools.cbf import grid, signals
    from methodkit.tools.cbf.forward import FilterOptions
    from tests.cbf.test_filter import kalman

    c = cbf_agents.cohort.subset([0])
    gaps = []
    for kappa in (1e6, 1e8, 1e10):
        vn = grid.nodes(np.array([0.3]), np.array([kappa]), 0.5, 200.0, 15)
        sn = grid.nodes(np.array([0.6]), np.array([kappa]), 0.5, 400.0, 15)
        pred = signals.mixture_signals(c, vn, sn, FilterOptions()).arrays["pred_mean"][0, 0]
        gaps.append(np.max(np.abs(pred - kalman(c.outcome[0, 0], vn[0, 7], sn[0, 7])[0])))
    assert 1e-6 < gaps[0] < 3e-5
    assert 70 < gaps[0] / gaps[1] < 130 and 70 < gaps[1] / gaps[2] < 130
    assert gaps[2] < 1e-8


def test_end_node_warning_needs_a_binding_range():
    # Mass piled on the lowest stochasticity node (a Beta prior with mu_s = .1, kappa_s = .5, as most real
    # subjects fit) used to warn; the outcomes do not favour a node further out, so it no longer does.
    # A volatility range that ends at 2 (the task's volatility is 4 and 49) binds, and warns.
    import pandas as pd

    from methodkit.tools.cbf import agents
    from methodkit.tools.cbf.forward import FilterOptions
    from methodkit.tools.cbf.grid import GridSpec
    from methodkit.tools.cbf.runs import binding_edges, edge_warning

    people = data.cohort_for_agents(data.simulate_task(seed=1), 4, seed=1)
    truth = agents.population_params("cbf", ["healthy"] * 4, np.random.default_rng(2), 4.0)
    cohort = agents.simulate(people, "cbf", truth, seed=3).cohort
    values = {"mu_v": [0.5] * 4, "kappa_v": [2.0] * 4, "mu_s": [0.1] * 4, "kappa_s": [0.5] * 4}
    values = {k: np.array(v) for k, v in values.items()}
    table = pd.DataFrame({**values, "failed": False})
    candidate, binding = binding_edges(cohort, values, GridSpec(), FilterOptions())
    assert candidate.all() and not binding.any()
    assert edge_warning(cohort, table, GridSpec(), FilterOptions()) is None
    short = GridSpec(15, (0.5, 2.0), (0.5, 400.0))
    assert binding_edges(cohort, values, short, FilterOptions())[1].all()
    assert "4 subjects" in edge_warning(cohort, table, short, FilterOptions())
