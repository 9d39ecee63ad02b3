"""Scoring (linking known answers) and the sweep driver (grid, seeds, resume, report)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from methodkit.core.errors import DataError
from methodkit.tools.irt import evaluate, report, sweep
from methodkit.tools.irt.result import Estimate
from methodkit.tools.irt.simulate import DrawSpec, draw


def _affine_estimate(d, A, B, flip=False):
    """An estimate that is the truth on another scale: theta_hat = (theta - B) / A (negated if flip)."""
    s = -1 if flip else 1
    est = Estimate(a=s * d.a * A, b=s * (d.b - B) / A, c=d.c.copy(), theta=s * (d.theta - B) / A)
    est.b_low, est.b_high = est.b - 0.01 * s, est.b + 0.01 * s
    return est


@pytest.mark.parametrize("flip", [False, True])
def test_linking_recovers_an_affine_rescaling(flip):
    d = draw(DrawSpec(n_models=50, n_items=40), 0)
    m = evaluate.evaluate(_affine_estimate(d, 2.0, 0.5, flip), d, "2pl")
    assert m["sign_flip"] is flip
    assert m["link_A"] == pytest.approx(2.0) and m["link_B"] == pytest.approx(0.5)
    for key in ("corr_a", "corr_b", "kendall_tau", "spearman_rho", "top10_overlap", "tau_difficulty", "coverage_b"):
        assert m[key] == pytest.approx(1.0), key
    assert m["rmse_b"] == pytest.approx(0, abs=1e-9) and m["near_tie_order_error"] == 0
    assert m["frac_a_nonpositive"] == (1.0 if flip else 0.0)


def test_near_tie_errors_and_predictive_metrics():
    d = draw(DrawSpec(n_models=60, n_items=50), 1)
    est = _affine_estimate(d, 1.0, 0.0)
    rng = np.random.default_rng(0)
    est.theta = est.theta + 0.3 * rng.standard_normal(60)
    mask = rng.random(d.Y.shape) < 0.1
    m = evaluate.evaluate(est, d, "2pl", mask=mask)
    assert 0 < m["near_tie_order_error"] < 0.5 and m["kendall_tau"] < 1
    assert m["heldout_cells"] == mask.sum() and 0 < m["brier"] < 0.25 and m["auc"] > 0.7
    with pytest.raises(DataError, match="models x"):
        evaluate.evaluate(Estimate(a=d.a, b=d.b, c=d.c, theta=d.theta[:5]), d, "2pl")


GRID = """
seed = 3
reps = 2
mask = 0.1
[cells]
model = "2pl"
profile = "mmlu"
n_items = 15
n_models = [20, 40]
capability = ["normal", "clustered"]
[estimators]
mml = {max_cycles = 40}
psn = {epochs = 3}
vi = {steps = 20}
"""


def test_grid_expansion_and_seeds_shared_by_estimators():
    grid = sweep.parse_grid(GRID, "g.toml")
    todo = sweep.tasks(grid)
    assert len(grid.cells) == 4 and len(todo) == 4 * 2 * 3 and len({t.key for t in todo}) == 24
    cell = grid.cells[0]
    d1, m1 = sweep.draw_cell(grid, cell, 0)
    d2, m2 = sweep.draw_cell(grid, cell, 0)
    assert np.array_equal(d1.Y, d2.Y) and np.array_equal(m1, m2)
    assert not np.array_equal(d1.Y, sweep.draw_cell(grid, cell, 1)[0].Y)
    assert sweep.estimate_seconds(grid, todo) > 0
    with pytest.raises(DataError, match="unknown cell field"):
        sweep.parse_grid(GRID.replace("n_items", "items"), "g.toml")
    with pytest.raises(DataError, match="unknown estimator 'jml'"):
        sweep.parse_grid(GRID + "jml = {}\n", "g.toml")
    assert sweep.parse_grid(json.dumps(grid.source), "g.json").cells == grid.cells


def test_sync_sweep_rows_resume_and_report(tmp_path):
    grid = sweep.parse_grid(GRID.replace("n_models = [20, 40]", "n_models = [20]").replace("reps = 2", "reps = 1"), "g")
    todo = sweep.tasks(grid)
    out = tmp_path / "runs.jsonl"
    with open(out, "w") as handle:
        sweep.execute(grid, todo[:2], lambda row: sweep.append_row(handle, row), scheduler="sync")
    assert len(sweep.done_keys(str(out))) == 2
    with open(out, "a") as handle:
        handle.write('{"key": "torn')  # a crash mid-write
    pending = [t for t in todo if t.key not in sweep.done_keys(str(out))]
    assert len(pending) == len(todo) - 2
    rows = []
    sweep.execute(grid, pending, rows.append, scheduler="sync")
    assert all(r["status"] == "ok" for r in rows), rows
    assert {"corr_b", "kendall_tau", "brier", "seconds", "peak_rss_mb", "task_cpu_seconds"} <= set(rows[0])
    text = report.markdown(rows)
    assert "## Means over reps" in text and "| psn |" not in text.split("## Cost")[0]
    assert "CPU seconds over" in text.split("## Cost")[1]  # the task CPU of each run, summed
    frame = report.tidy(rows)
    assert len(frame) == len(pending) and "cell_capability" in frame


def test_acceptance_checks_read_the_table():
    import pandas as pd

    rows = []
    for est, small, big, cov in (("mml", 0.3, 0.9, None), ("vi", 0.2, 0.8, 0.7), ("mcmc", 0.3, 0.85, 0.95)):
        for n, ca in ((25, small), (500, big)):
            rows.append(
                dict(
                    estimator=est,
                    cell_n_models=n,
                    cell_capability="normal",
                    corr_a=ca,
                    corr_b=0.97,
                    kendall_tau=0.9,
                    coverage_b=cov,
                    status="ok",
                )
            )
    checks = report.acceptance(pd.DataFrame(rows))
    assert [c[2] for c in checks if c[0].startswith("2.")] == [True, True, True]
    assert any(c[0].startswith("3a") and c[2] for c in checks)
    assert checks[0][0].startswith("1. MML, N=500") and checks[0][2] is True


def test_report_cost_and_shape_weighted_claim_2():
    import pandas as pd

    rows = []
    # corr(a) at N = 25: one normal run at 0.1 and three skewed runs at 0.5: shape-weighted mean 0.3
    for cap, n_runs, ca in (("normal", 1, 0.1), ("skewed", 3, 0.5)):
        for rep in range(n_runs):
            rows.append(dict(estimator="mml", cell_n_models=25, cell_capability=cap, rep=rep, corr_a=ca))
    for cap in ("normal", "skewed"):
        rows.append(dict(estimator="mml", cell_n_models=500, cell_capability=cap, rep=0, corr_a=0.6))
    frame = pd.DataFrame(rows).assign(status="ok", task_cpu_seconds=60.0, cpu_seconds=50.0)
    frame.loc[0, "task_cpu_seconds"] = None  # a reused row without task CPU counts its fit CPU
    frame.loc[1, ["task_cpu_seconds", "cpu_seconds"]] = None  # one without any: its (estimator, N) mean
    (claim,) = [c for c in report.acceptance(frame) if c[0].startswith("2.")]
    assert claim[1] == "0.300 vs 0.600" and claim[2] is True  # a plain row mean (0.4) would fail
    c = report.cost(frame)
    assert c["total_cpu_s"] == 50.0 + 5 * 60.0 and (c["task_measured"], c["fit_only"], c["imputed"]) == (4, 1, 1)
    assert abs(c["two_core_min"] - 350.0 / 2 / 60) < 1e-12
    text = "\n".join(report.cost_lines(frame))
    assert "2.9 min; budget 45 min: within" in text and "| mml | 350 | 1.00 |" in text
