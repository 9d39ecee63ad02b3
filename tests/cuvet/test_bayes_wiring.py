"""CUVET-B's wiring (issue 35, item 4): the posterior allocation, the feasibility shrink and the chance constraint.

Each test fails when its component is removed or reversed in tools/cuvet (checked by breaking it on purpose;
docs/cuvet.md, 'Misses and limits', lists the breakages).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from methodkit.tools.cuvet import bayes, kernels, synth
from methodkit.tools.cuvet import model as M
from methodkit.tools.cuvet.data import CostSpec, load_rct

COSTS = CostSpec(arm_costs=[0, 1, 2, 3, 4], on_outcome=True)
N_ROWS = 4000


def _fit(costs):
    frame, _ = synth.synthetic(N_ROWS, 0, synth.synthetic_truth(0))
    return M.fit(load_rct(frame, "treatment", "conversion", costs), budget_frac=0.4, use_bayes=True, seed=3)


@pytest.fixture(scope="module")
def fitted():
    """Cost paid on conversion (random): the shrink applies."""
    return _fit(COSTS)


@pytest.fixture(scope="module")
def fitted_fixed_cost():
    """Deterministic arm costs: no shrink, the growth loop's allocation is the final one."""
    return _fit(CostSpec(arm_costs=[0, 0.01, 0.02, 0.03, 0.04]))


def _stats(n, means_v, means_c, var=0.25):
    st = np.zeros((len(means_v), 5))
    for a in range(len(means_v)):
        st[a] = [n, n * means_v[a], n * (var + means_v[a] ** 2), n * means_c[a], n * means_c[a] ** 2]
    return st


def _posterior_marginal(post, seed, spend):
    a, b = bayes.draws(post, seed)
    return np.array([np.mean(a[k] * b[k] * s ** (b[k] - 1.0)) for k, s in enumerate(spend)])


def _interior(model_or_leaves, spend):
    leaves = model_or_leaves
    return np.array([0 < s < lf.smax * (1 - 1e-9) for s, lf in zip(spend, leaves)])


@pytest.mark.parametrize("which", ["fitted", "fitted_fixed_cost"])
def test_fitted_lambda_solves_the_posterior_first_order_condition(which, request):
    """With --bayes the leaves' spends equalize E_post[alpha beta s^(beta-1)], not the point estimate's marginal."""
    m = request.getfixturevalue(which)
    if which == "fitted_fixed_cost":  # known costs: nothing to shrink, the whole budget is spent
        assert m.working_budget == m.budget_per_user and m.feasibility is None
        shares = np.array([lf.share for lf in m.leaves])
        assert shares @ np.array([lf.spend for lf in m.leaves]) == pytest.approx(m.budget_per_user, rel=1e-6)
    assert m.variant == "cuvet-b" and m.posterior is not None
    # the posterior frontier: every usable arm with a positive cost increment, where the empirical hull drops some
    dropped = 0
    for lf in m.leaves:
        dc, _, _, ok = kernels.increments(lf.stats)
        assert lf.arms == [0, *sorted((a for a in range(1, m.n_arms) if ok[a] and dc[a] > 0), key=lambda a: dc[a])]
        dropped += len(lf.arms) - len(M.leaf_from_stats(lf.stats, m.beta_root, N_ROWS).arms)
    assert dropped > 0
    spend = np.array([lf.spend for lf in m.leaves])
    live = _interior(m.leaves, spend)
    assert live.any()
    post_marg = _posterior_marginal(m.posterior, m.seed, spend)
    np.testing.assert_allclose(post_marg[live], m.lam, rtol=1e-6)
    point = np.array([lf.alpha * lf.beta * s ** (lf.beta - 1.0) for lf, s in zip(m.leaves, spend)])
    # the posterior is wide at 2,000 estimation rows: its expected marginal is not the point estimate's
    assert np.all(np.abs(point[live] / m.lam - 1.0) > 0.05)
    # re-solving for another budget (assign --budget) keeps the posterior form
    shares = np.array([lf.share for lf in m.leaves])
    s2, lam2 = m.leaf_spends(shares, 0.5 * m.budget_per_user)
    live2 = _interior(m.leaves, s2)
    assert live2.any()
    np.testing.assert_allclose(_posterior_marginal(m.posterior, m.seed, s2)[live2], lam2, rtol=1e-6)


def _two_leaves():
    """A sharp leaf (200k rows, 0.05 s^0.5) and a wide one (400 rows, 0.08 s^0.8)."""
    cost = [0.0, 0.5, 1.0, 1.5, 2.0]
    sharp = M.leaf_from_stats(_stats(200_000, [0.1 + 0.05 * c**0.5 for c in cost], cost, var=0.09), 0.5, 200_400)
    wide = M.leaf_from_stats(_stats(400, [0.1 + 0.08 * c**0.8 for c in cost], cost, var=0.09), 0.5, 200_400)
    return [sharp, wide]


def test_posterior_allocation_differs_from_the_point_estimate_where_the_posterior_is_wide():
    leaves = _two_leaves()
    post = M._posterior(leaves, 0.5)
    sd = np.sqrt(np.array([np.diag(c) for c in post.cov]))
    assert np.all(sd[1] > 3 * sd[0])  # the small leaf's posterior is the wide one
    budget = 1.0
    s_post, lam_post = M._solve(leaves, budget, post, seed=0)
    s_point, lam_point = M._solve(leaves, budget, None, seed=0)
    shares = np.array([lf.share for lf in leaves])
    assert shares @ s_post == pytest.approx(budget, rel=1e-6)
    live = _interior(leaves, s_post)
    np.testing.assert_allclose(_posterior_marginal(post, 0, s_post)[live], lam_post, rtol=1e-6)
    # the wide leaf's spend moves away from the point-estimate allocation; the sharp one hardly moves
    assert abs(s_post[1] / s_point[1] - 1.0) > 0.25
    assert abs(s_post[0] / s_point[0] - 1.0) < 0.05


def test_feasibility_matches_the_normal_predictive():
    """Known answer: one leaf, half on an arm with dC ~ N(1, 0.04) and realized-cost variance 1 over 100 users."""
    mix = [{0: 0.5, 1: 0.5}]
    dc_mean, dc_var, z_var = [np.array([0.0, 1.0])], [np.array([0.0, 0.04])], [np.array([0.0, 1.0])]
    for b in (0.45, 0.6):
        p = np.mean([bayes.feasibility(np.array([1.0]), mix, dc_mean, dc_var, z_var, 100, b, s) for s in range(40)])
        exact = norm.cdf((b - 0.5) / np.sqrt(0.25 * 0.04 + 0.5 / 100))
        assert p == pytest.approx(exact, abs=0.03)


def test_feasibility_shrink_meets_the_chance_constraint_and_is_tight(fitted):
    m = fitted
    n_est = sum(lf.n for lf in m.leaves)  # the leaves are estimated on every row (issue 35 item 2)
    B = m.budget_per_user
    full, _ = M._solve(m.leaves, B, m.posterior, m.seed)
    p_full = M.feasibility_of(m.leaves, full, B, m.seed, n_est)
    assert p_full < 1 - M.DELTA  # spending all of B by the estimate is infeasible at 1 - delta
    assert m.working_budget < B and any("shrank the working budget" in w for w in m.warnings)
    spend = np.array([lf.spend for lf in m.leaves])
    shares = np.array([lf.share for lf in m.leaves])
    assert shares @ spend <= m.working_budget * (1 + 1e-9)
    assert m.feasibility >= 1 - M.DELTA
    assert M.feasibility_of(m.leaves, spend, B, m.seed, n_est) >= 1 - M.DELTA
    # tight: 5% more working budget breaks the constraint (a shrink to zero would pass the lines above)
    more, _ = M._solve(m.leaves, min(B, m.working_budget * 1.05), m.posterior, m.seed)
    assert M.feasibility_of(m.leaves, more, B, m.seed, n_est) < 1 - M.DELTA


def test_chance_constrained_spend_stays_within_budget_on_simulated_posteriors(fitted):
    """Fresh draws (another seed, 20,000 of them) of the leaves' cost increments and of the population's cost
    noise: the shrunk policy's cost stays within B in at least 1 - delta of them, the unshrunk one in about half."""
    m = fitted
    n_est = sum(lf.n for lf in m.leaves)  # the leaves are estimated on every row (issue 35 item 2)
    B = m.budget_per_user
    dc_mean, dc_var, z_var = M.cost_moments(m.leaves)
    rng = np.random.default_rng(12345)

    def within(spend, draws=20_000):
        total, noise = np.zeros(draws), 0.0
        for k, (lf, s) in enumerate(zip(m.leaves, spend)):
            for arm, p in M.realize(float(s), lf.dc, lf.arms).items():
                if arm:
                    total += lf.share * p * rng.normal(dc_mean[k][arm], np.sqrt(dc_var[k][arm]), draws)
                    noise += lf.share * p * z_var[k][arm]
        total += rng.standard_normal(draws) * np.sqrt(noise / n_est)
        return float(np.mean(total <= B))

    shrunk = within([lf.spend for lf in m.leaves])
    unshrunk = within(M._solve(m.leaves, B, m.posterior, m.seed)[0])
    assert shrunk >= 1 - M.DELTA - 0.02  # 256 seeded draws set the shrink: allow their Monte Carlo error
    assert unshrunk < 0.6
