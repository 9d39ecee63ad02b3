"""py-irt's hierarchical VI terms, Stocking-Lord linking inside the sweep, the scalability study."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from methodkit.tools.irt import estimators, vi
from methodkit.tools.irt.simulate import DrawSpec, draw


def test_hierarchical_prior_is_py_irts_model_with_scale_one_over_precision():
    import torch

    rng = np.random.default_rng(0)
    xs = [rng.normal(size=n) for n in (7, 5, 5)]
    mu, u = np.array([0.3, -1.0, 0.2]), np.array([0.7, 2.5, 1.3])
    got = vi.hierarchical_logprior(torch, [torch.tensor(x) for x in xs], torch.tensor(mu), torch.tensor(u)).item()
    want = sum(stats.norm.logpdf(x, m, 1 / p).sum() for x, m, p in zip(xs, mu, u))
    want += stats.norm.logpdf(mu, 0, 1e6).sum() + stats.gamma.logpdf(u, 1, scale=1).sum()
    assert got == pytest.approx(want, rel=1e-10)


def test_vi_reports_the_lognormal_median_and_is_reproducible():
    d = draw(DrawSpec(n_models=30, n_items=15), 2)
    s = estimators.make_settings("vi", steps=60)
    one = estimators.run(d, "2pl", "vi", s, seed=4).estimate
    two = estimators.run(d, "2pl", "vi", s, seed=4).estimate
    assert np.array_equal(one.b, two.b) and np.array_equal(one.a, two.a)  # Gamma rsample is seeded too
    assert np.allclose(one.a, np.sqrt(one.a_low * one.a_high), rtol=1e-6)  # exp(loc): centre of the log interval
    assert np.all(one.b_sd > 0) and np.all(one.theta_sd > 0)


GRID = """
seed = 1
reps = 1
mask = 0.1
linking = LINKING
[cells]
model = "2pl"
profile = "mmlu"
n_items = 15
n_models = 30
[estimators]
mml = {max_cycles = 60}
vi = {steps = 40}
"""


def test_sweep_scores_under_each_listed_linking():
    from methodkit.tools.irt import evaluate, report, sweep

    grid = sweep.parse_grid(GRID.replace("LINKING", '["mean-sigma", "stocking-lord"]'), "g.toml")
    assert grid.linking == ("mean-sigma", "stocking-lord")
    rows = []
    sweep.execute(grid, sweep.tasks(grid), rows.append, scheduler="sync")
    data, mask = sweep.draw_cell(grid, grid.cells[0], 0)
    for row in rows:
        assert row["status"] == "ok" and row["linking"] == "mean-sigma"
        assert "sl_corr_b" in row and "sl_link_A" in row and "sl_brier" not in row  # predictive metrics are link-free
    vi_row = next(r for r in rows if r["estimator"] == "vi")
    assert "sl_coverage_b" in vi_row and 0 <= vi_row["sl_coverage_b"] <= 1
    # the prefixed columns are exactly what eval gives under Stocking-Lord linking
    from methodkit.tools.irt import estimators

    fit_data = data.subset()
    fit_data.Y = np.where(mask, 255, data.Y).astype(np.uint8)
    fit = estimators.run(
        fit_data,
        "2pl",
        "mml",
        estimators.make_settings("mml", max_cycles=60),
        seed=sweep.seeds(grid, grid.cells[0], 0)[2],
    )
    direct = evaluate.evaluate(fit.estimate, data, "2pl", linking="stocking-lord")
    mml_row = next(r for r in rows if r["estimator"] == "mml")
    assert mml_row["sl_link_A"] == pytest.approx(direct["link_A"]) and mml_row["sl_corr_b"] == pytest.approx(
        direct["corr_b"]
    )
    text = report.markdown(rows)
    assert "## Linking" in text and "| stocking-lord |" in text
    only_sl = sweep.parse_grid(GRID.replace("LINKING", '"stocking-lord"'), "g.toml")
    assert only_sl.linking == ("stocking-lord",)


@pytest.mark.parametrize("bad", ['"procrustes"', '["mean-sigma", "mean-sigma"]', "[]"])
def test_sweep_refuses_an_unknown_linking(bad):
    from methodkit.core.errors import DataError
    from methodkit.tools.irt import sweep

    with pytest.raises(DataError, match="g.toml: linking must be one of"):
        sweep.parse_grid(GRID.replace("LINKING", bad), "g.toml")


def test_paired_gap_has_a_monte_carlo_se():
    import pandas as pd

    from methodkit.tools.irt import report

    rows = [
        dict(estimator=e, cell_n_models=25, cell_capability="normal", rep=r, coverage_b=v)
        for r, (m, v_) in enumerate(((0.95, 0.85), (0.93, 0.86), (0.97, 0.84)))
        for e, v in (("mcmc", m), ("vi", v_))
    ]
    mean, se, n = report.paired_gap(pd.DataFrame(rows), "coverage_b", "mcmc", "vi")
    d = np.array([0.10, 0.07, 0.13])
    assert n == 3 and mean == pytest.approx(d.mean()) and se == pytest.approx(d.std(ddof=1) / np.sqrt(3))


def test_cpu_budget_stops_a_fit_and_is_recorded():
    from methodkit.tools.irt.result import Clock, TimeBudget

    clock = Clock(TimeBudget(cpu=0.05))
    x = 0.0
    while not clock.expired():
        x += 1.0
    assert clock.cpu_seconds() > 0.05
    d = draw(DrawSpec(n_models=20, n_items=10), 1)
    s = estimators.make_settings("mcmc", warmup=10**6, draws=10)
    fit = estimators.run(d, "2pl", "mcmc", s, time_limit=TimeBudget(cpu=0.3))
    assert fit.info["status"] == "timeout" and fit.info["cpu_limit"] == 0.3 and fit.info["cpu_seconds"] >= 0.3


def test_loglog_slope_and_study_slopes():
    from methodkit.tools.irt import scaling

    J = np.array([500, 2000, 14042])
    assert scaling.loglog_slope(J, 3e-4 * J**1.5) == pytest.approx(1.5)
    assert scaling.loglog_slope([500], [1.0]) is None
    row = dict(
        n_models=200,
        wall_s=1.0,
        fit_seconds=1.0,
        fit_cpu_seconds=None,
        projected_cpu_s=None,
        peak_rss_mb=1.0,
        n_iter=1,
        exit_code=0,
    )
    rows = [
        scaling.ScalingRow(estimator="vi", n_items=int(j), status=st, cpu_s=float(c), **row)
        for j, st, c in ((500, "ok", 2.0), (2000, "ok", 8.0), (14042, "timeout", 120.0))
    ]
    assert scaling.slopes(rows)["vi"] == pytest.approx(1.0)  # the timed-out size is left out
    assert scaling.iterations_done("mcmc", {"n_iter": 50, "chains_run": 2}) == 100
    # fixed cost 5 s + 0.01 s per iteration: two probes recover the full VI fit's 5 + 0.01 * 2000
    assert scaling.projected_cpu("vi", (5.2, 20), (5.6, 60)) == pytest.approx(25.0)
    assert scaling.iterations_done("vi", {"n_iter": 50}) == 50 and scaling.iterations_done("psn", {}) is None


@pytest.mark.slow
def test_scaling_study_runs_each_fit_in_its_own_process(tmp_path):
    from methodkit.tools.irt import scaling

    rows = scaling.run_study(
        [12, 24], ("mml", "vi"), n_models=15, cpu_limit=60, workdir=tmp_path, extra={"vi": ["--steps", "30"]}
    )
    assert [(r.estimator, r.n_items, r.status) for r in rows] == [
        ("mml", 12, "ok"), ("vi", 12, "ok"), ("mml", 24, "ok"), ("vi", 24, "ok")
    ]  # fmt: skip
    assert all(r.cpu_s > 0 and r.peak_rss_mb > 0 and r.exit_code == 0 for r in rows)
    assert set(scaling.slopes(rows)) == {"mml", "vi"}
