"""Analyses: the GLM recovers planted learning rates, AUC and the cross-over test, the RT regression."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from methodkit.tools.cbf import analyze, data


def planted_cohort(n=30, seed=0, vol_gain=0.2, sto_gain=-0.15):
    """Responses r_{t+1} = r_t + lr * (o_t - r_t) with lr = 0.5 + vol_gain*V/2 + sto_gain*S/2 + noise."""
    rng = np.random.default_rng(seed)
    task = data.simulate_task(seed=seed, trials=40)
    c = data.cohort_for_agents(task, n, seed=seed)
    S_code, V_code = analyze.condition_codes(c)
    for s in range(n):
        for b in range(4):
            lr = 0.5 + vol_gain / 2 * V_code[s, b] + sto_gain / 2 * S_code[s, b]
            r = 60.0
            for t in range(c.outcome.shape[2]):
                c.response[s, b, t] = r
                r = r + lr * (c.outcome[s, b, t] - r) + rng.normal(0, 1)
    c.rt_ms[:] = 4000.0
    return c


def test_glm_recovers_planted_condition_effects():
    c = planted_cohort()
    glm = analyze.lr_glm(c)
    assert np.allclose(glm["b_delta"].mean(), 0.5, atol=0.02)
    assert np.allclose(glm["b_vol"].mean(), 0.1, atol=0.02)  # codes are +-1, so half the difference
    assert np.allclose(glm["b_sto"].mean(), -0.075, atol=0.02)
    assert abs(glm["b_int"].mean()) < 0.02


def test_auc_matches_mann_whitney():
    rng = np.random.default_rng(1)
    x = rng.normal(size=40)
    y = rng.random(40) < 0.5
    u = stats.mannwhitneyu(x[y], x[~y]).statistic
    assert np.isclose(analyze.auc(x, y), u / (y.sum() * (~y).sum()))


def test_crossover_interaction_is_the_two_sample_t_squared():
    rng = np.random.default_rng(2)
    n = 60
    index = rng.normal(size=n)
    top = index >= np.quantile(index, 2 / 3)
    # volatility-blind learners: lower b_vol and more negative b_sto (the prototype's narrow-v grid)
    glm = pd.DataFrame({"b_vol": rng.normal(0.1, 0.05, n) - 0.1 * top, "b_sto": rng.normal(-0.1, 0.05, n) - 0.1 * top})
    out = analyze.phenotype(glm, index)
    bottom = index <= np.quantile(index, 1 / 3)
    t, p = stats.ttest_ind((glm.b_vol - glm.b_sto)[top], (glm.b_vol - glm.b_sto)[bottom])
    assert np.isclose(out["interaction_F"], t * t) and np.isclose(out["interaction_p"], p)
    assert out["crossover"] and out["n_vol_blind"] == 20


def test_rt_regression_finds_a_planted_ambiguity_effect_and_not_a_null_one():
    c = planted_cohort(n=20, seed=3)
    rng = np.random.default_rng(4)
    amb = rng.random(c.outcome.shape)
    c.rt_ms = np.exp(8.4 + 0.3 * amb + rng.normal(0, 0.1, amb.shape))
    c.rt_ms[0, 0, 5] = -1.0  # absurd, excluded and counted
    res = analyze.rt_regression(c, amb)
    assert res.counts["rt_absurd"] == 1
    assert stats.ttest_1samp(res.table["b_amb"], 0).pvalue < 1e-6
    c.rt_ms = np.exp(8.4 + rng.normal(0, 0.1, amb.shape))
    null = analyze.rt_regression(c, amb)
    assert abs(null.table["b_amb"].mean()) < 0.01


def test_sign_test_is_the_exact_binomial_on_nonzero_finite_values():
    values = np.array([0.3, -0.1, 0.2, 0.5, np.nan, 0.0, 0.4, 0.1, 0.2, -0.3])
    out = analyze.sign_test(values)
    assert out["n"] == 8 and out["n_positive"] == 6
    assert np.isclose(out["p"], stats.binomtest(6, 8, 0.5).pvalue)
    assert analyze.sign_test(np.array([np.nan]))["p"] is None
