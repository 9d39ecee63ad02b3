"""Known answers and references for the CUVET library: fits, allocation, LP, kernels, Bayes."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.cuvet import allocate as al
from methodkit.tools.cuvet import bayes, kernels, lp, tree
from methodkit.tools.cuvet.binning import N_BINS


def _stats_from_means(n, means_v, means_c, var=0.25):
    """Arm statistics with given means (sums of squares from a variance)."""
    k = len(means_v)
    st = np.zeros((k, 5))
    for a in range(k):
        st[a] = [n, n * means_v[a], n * (var + means_v[a] ** 2), n * means_c[a], n * means_c[a] ** 2]
    return st


def test_exact_power_law_is_recovered():
    cost = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    value = 0.1 + 0.02 * cost**0.5
    a, b, smax, npts = kernels.fit_power_law(_stats_from_means(10_000, value, cost), 1.0, np.zeros(2), np.zeros((2, 2)))
    assert npts == 4 and smax == pytest.approx(4.0)
    assert a == pytest.approx(0.02, rel=1e-9) and b == pytest.approx(0.5, rel=1e-9)


def test_wls_matches_statsmodels():
    import statsmodels.api as sm

    rng = np.random.default_rng(3)
    cost = np.array([0.0, 0.5, 1.2, 2.0, 3.1, 4.0])
    value = 0.3 + 0.1 * cost**0.4 * np.exp(rng.normal(0, 0.05, 6))
    st = _stats_from_means(5_000, value, cost)
    dc, dv, var, ok = kernels.increments(st)
    arms = kernels.frontier(dc, dv, ok)[1:]
    w = np.clip(dv[arms] ** 2 / var[arms], 1e-6, 1e6)
    ref = sm.WLS(np.log(dv[arms]), sm.add_constant(np.log(dc[arms])), weights=w).fit().params
    a, b, _, _ = kernels.fit_power_law(st, 1.0, np.zeros(2), np.zeros((2, 2)))
    if 0.05 < ref[1] < 1:
        assert np.log(a) == pytest.approx(ref[0], rel=1e-8) and b == pytest.approx(ref[1], rel=1e-8)


def test_frontier_drops_dominated_and_nonconcave_arms():
    dc = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    dv = np.array([0.0, 0.1, 0.12, 0.25, 0.2])  # arm 2 under the hull of 1 and 3; arm 4 dominated
    assert kernels.frontier(dc, dv, np.array([False, True, True, True, True])).tolist() == [0, 1, 3]


def test_no_positive_point_never_treats():
    st = _stats_from_means(1000, [0.5, 0.4, 0.45], [0.0, 1.0, 2.0])
    a, _, smax, npts = kernels.fit_power_law(st, 1.0, np.zeros(2), np.zeros((2, 2)))
    assert a == 0.0 and npts == 0 and smax == 0.0


def test_allocation_equalizes_marginal_value_and_meets_budget():
    rng = np.random.default_rng(0)
    n = rng.integers(100, 1000, 12).astype(float)
    alpha = rng.uniform(0.01, 0.1, 12)
    beta = rng.uniform(0.2, 0.8, 12)
    smax = np.full(12, 1e6)
    budget = 0.3 * n.sum()
    out = al.allocate(n, alpha, beta, smax, budget)
    assert n @ out.spend == pytest.approx(budget, rel=1e-9)
    marginal = alpha * beta * out.spend ** (beta - 1)
    assert np.allclose(marginal, out.lam, rtol=1e-9)


def test_common_beta_closed_form():
    n = np.array([100.0, 200.0, 300.0])
    alpha = np.array([0.02, 0.05, 0.01])
    out = al.allocate(n, alpha, np.full(3, 0.5), np.full(3, 1e9), 90.0)
    assert np.allclose(out.spend, al.common_beta_spend(n, alpha, 0.5, 90.0), rtol=1e-8)


def test_linear_cohorts_rank_by_roi_with_a_fractional_marginal_cohort():
    n = np.array([100.0, 100.0, 100.0])
    out = al.allocate(n, [0.3, 0.2, 0.1], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0], 150.0)
    assert out.spend.tolist() == pytest.approx([1.0, 0.5, 0.0])
    assert n @ out.spend == pytest.approx(150.0)


def test_budget_above_maximum_is_clamped():
    out = al.allocate([10.0, 10.0], [0.1, 0.1], [0.5, 0.5], [1.0, 2.0], 100.0)
    assert out.clamped and out.total == pytest.approx(30.0)


def test_realize_mixes_the_bracketing_frontier_arms():
    mix = al.realize(1.5, [0.0, 1.0, 3.0], [0, 2, 4])
    assert mix == pytest.approx({2: 0.75, 4: 0.25})
    assert al.realize(0.0, [0.0, 1.0], [0, 1]) == {0: 1.0}


def _lp_cases():
    rng = np.random.default_rng(1)
    n, k = 300, 5
    c = np.column_stack([np.zeros(n), np.sort(rng.uniform(0.1, 2, (n, k - 1)), axis=1)])
    v = np.column_stack([np.zeros(n), rng.uniform(-0.1, 1, (n, k - 1))])
    yield "sorted costs", v, c
    yield "many exact ties", np.round(v * 4) / 4, np.round(c * 2) / 2
    yield "unsorted, costly control", rng.uniform(0, 1, (n, k)), rng.uniform(0, 2, (n, k))


@pytest.mark.parametrize("case", ["sorted costs", "many exact ties", "unsorted, costly control"])
def test_lagrangian_lp_matches_highs(case):
    _, v, c = next(x for x in _lp_cases() if x[0] == case)
    floor, top = c.min(1).sum(), c.max(1).sum()
    for budget in (floor + 0.05 * top, floor + 0.3 * top, 0.9 * top):
        ours = lp.solve(v, c, budget)
        vectorized = lp.solve(v, c, budget, xp=np)  # the --device cuda code path, run with NumPy
        ref = lp.solve_highs(v, c, budget)
        assert ours.value == pytest.approx(ref.value, rel=1e-9)
        assert vectorized.value == pytest.approx(ref.value, rel=1e-9)
        assert np.allclose(ours.pi, vectorized.pi) and ours.lam == vectorized.lam
        assert ours.cost <= budget * (1 + 1e-9)
        assert np.allclose(ours.pi.sum(1), 1.0) and ours.pi.min() >= 0.0


def test_lp_edge_budgets():
    rng = np.random.default_rng(3)
    c = np.column_stack([np.full(50, 0.2), rng.uniform(0.5, 1, (50, 2))])
    v = np.column_stack([np.zeros(50), rng.uniform(0.1, 1, (50, 2))])
    loose = lp.solve(v, c, 1e9)  # budget never binds: everyone gets the most valuable arm, lam = 0
    assert loose.lam == 0.0 and np.array_equal(loose.pi.argmax(1), v.argmax(1))
    tight = lp.solve(v, c, 1.0)  # below the cheapest policy's cost (10): the cheapest arms
    assert np.all(tight.pi[:, 0] == 1.0) and tight.cost == pytest.approx(10.0)


def test_hull_kernel_drops_dominated_and_concave_violating_arms():
    v = np.array([[0.0, 0.5, 0.6, 0.4, 1.0]])
    c = np.array([[0.0, 1.0, 2.0, 2.5, 3.0]])
    hull, size, slope, step = kernels.hull_segments(v, c)
    # (2, .6) lies under the chord (1, .5) -> (3, 1); (2.5, .4) is dominated
    assert size[0] == 3 and list(hull[0, :3]) == [0, 1, 4]
    assert slope[0, :2] == pytest.approx([0.5, 0.25]) and step[0, :2] == pytest.approx([1.0, 2.0])
    ref = lp.hull_segments_array(v, c, np)
    assert list(ref[0][0, :3]) == [0, 1, 4] and ref[1][0] == 3


def test_histogram_kernel_matches_numpy():
    rng = np.random.default_rng(2)
    n, d = 5000, 4
    codes = rng.integers(0, N_BINS, (d, n)).astype(np.uint8)
    t = rng.integers(0, 3, n)
    y, z = rng.random(n), rng.random(n)
    rows = np.sort(rng.choice(n, 3000, replace=False))
    ours = kernels.node_histogram(codes, rows, t, y, z, N_BINS, 3)
    ref = tree.numpy_histogram(codes, rows, t, y, z, N_BINS, 3)
    assert np.allclose(ours, ref)


def test_split_finder_matches_reference_and_finds_the_true_split():
    rng = np.random.default_rng(4)
    n, d = 20_000, 3
    x = rng.integers(0, 64, (d, n)).astype(np.uint8)
    t = rng.integers(0, 3, n)
    responsive = x[1] < 20
    y = (rng.random(n) < 0.2 + responsive * np.array([0.0, 0.2, 0.3])[t]).astype(float)
    z = np.array([0.0, 1.0, 2.0])[t]
    rows = np.arange(n)
    parent = kernels.arm_stats(rows, t, y, z, 3)
    hist = kernels.node_histogram(x, rows, t, y, z, N_BINS, 3)
    n_valid = np.full(d, 64)
    args = (hist, n_valid, parent, 0.05, 200, 20, 0.5, np.zeros(2), np.zeros((2, 2)))
    f, b, g = kernels.best_split(*args)
    rf, rb, rg = tree.numpy_split_finder(*args)
    assert (f, b) == (rf, rb) and g == pytest.approx(rg, rel=1e-9)
    assert f == 1 and abs(b - 19) <= 8  # the responsive feature, near its true boundary


def test_laplace_posterior_shrinks_towards_prior_with_noisy_data():
    leaf = bayes.LeafData(np.array([1.0, 2.0, 3.0]), np.array([0.02, 0.03, 0.035]), np.full(3, 1e-6))
    noisy = bayes.LeafData(leaf.dc, leaf.dv, np.full(3, 1.0))
    mu, sigma = np.array([np.log(0.05), 0.0]), np.eye(2) * 0.1
    sharp, _ = bayes.laplace(leaf, mu, sigma)
    vague, cov = bayes.laplace(noisy, mu, sigma)
    assert np.exp(sharp[0]) == pytest.approx(0.02, rel=0.05)
    assert np.allclose(vague, mu, atol=1e-3) and np.allclose(cov, sigma, atol=1e-3)


def test_expected_spend_solves_the_posterior_first_order_condition():
    a, b = bayes.draws(
        bayes.Posterior(np.array([[np.log(0.05), 0.0]]), np.eye(2)[None] * 0.05, np.zeros(2), np.eye(2)), 0
    )
    s = bayes.expected_spend(0.02, a, b, np.array([100.0]))
    marginal = np.mean(a[0] * b[0] * s[0] ** (b[0] - 1))
    assert marginal == pytest.approx(0.02, rel=1e-6)


def test_ipw_bootstrap_kernel_matches_python():
    rng = np.random.default_rng(5)
    n = 200
    pi, y, z, e = rng.random(n), rng.random(n), rng.random(n), np.full(n, 0.5)
    seeds = np.arange(3, dtype=np.int64)
    ours = kernels.ipw_bootstrap(pi, pi, pi, y, z, e, seeds)
    ref = kernels.ipw_bootstrap.py_func(pi, pi, pi, y, z, e, seeds)
    assert np.allclose(ours, ref)


def test_categorical_levels_are_ordered_per_node():
    """Levels 0 and 2 respond, 1 and 3 do not: no threshold on the codes separates them, the node's
    ratio order does (left = one responsive pair, exactly)."""
    rng = np.random.default_rng(5)
    n = 40_000
    lev = rng.integers(0, 4, n)
    t = rng.integers(0, 3, n)
    responsive = np.isin(lev, [0, 2])
    y = (rng.random(n) < 0.2 + responsive * np.array([0.0, 0.15, 0.25])[t]).astype(float)
    z = np.array([0.0, 1.0, 2.0])[t]
    codes = lev[None, :].astype(np.uint8)
    hist = kernels.node_histogram(codes, np.arange(n), t, y, z, N_BINS, 3)
    order = tree.node_level_order(hist[0], 4)
    assert set(order[:2].tolist()) == {1, 3} and set(order[2:].tolist()) == {0, 2}
    params = tree.TreeParams(1, 200, 20, 0.0)
    args = (codes, np.array([4]), np.arange(n), t, y, z, 3, 0.05, params, 0.5)
    cat = tree.grow(*args, categorical=[True])
    assert set(cat.nodes[0].left_bins) in ({0, 2}, {1, 3})
    left = cat.nodes[0].goes_left(lev.astype(np.uint8))
    assert (left == responsive).all() or (left == ~responsive).all()
    ordinal = tree.grow(*args)  # thresholds on the codes cannot isolate {0, 2}
    left = ordinal.nodes[0].goes_left(lev.astype(np.uint8))
    assert not ((left == responsive).all() or (left == ~responsive).all())


def test_priced_moments_are_the_sample_moments_of_y_minus_lam_z():
    rng = np.random.default_rng(6)
    n = 3000
    t = rng.integers(0, 3, n)
    y = (rng.random(n) < 0.3).astype(float)
    z = np.array([0.0, 1.0, 4.0])[t] * y  # cost paid on conversion: strongly correlated with y
    rows = np.arange(n)
    st, cross = kernels.arm_stats(rows, t, y, z, 3), kernels.arm_cross(rows, t, y, z, 3)
    assert np.allclose(cross, [np.sum(y[t == a] * z[t == a]) for a in range(3)])
    lam = 0.2
    mean, sd = tree.priced_moments(st, cross, lam)
    for a in range(3):
        w = y[t == a] - lam * z[t == a]
        assert mean[a] == pytest.approx(w.mean()) and sd[a] == pytest.approx(w.std(), rel=1e-9)
    _, bound = tree.priced_moments(st, None, lam)
    assert (bound >= sd - 1e-12).all() and bound[2] > 1.2 * sd[2]


def test_cuvet_b_realizes_on_every_usable_arm():
    """An arm whose noisy dV falls under the chord leaves the empirical hull, not CUVET-B's frontier."""
    from methodkit.tools.cuvet.model import leaf_from_stats, posterior_frontier

    st = _stats_from_means(10_000, [0.05, 0.06, 0.063, 0.075, 0.08], [0.0, 0.2, 0.4, 0.6, 0.8])
    lf = leaf_from_stats(st, 0.5, 50_000)
    assert lf.arms == [0, 1, 3, 4]
    posterior_frontier(lf)
    assert lf.arms == [0, 1, 2, 3, 4] and lf.smax == pytest.approx(0.8)
    assert lf.dc == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8])


def test_split_rows_kernel_matches_numpy_masks():
    rng = np.random.default_rng(7)
    codes = rng.integers(0, N_BINS, 5000).astype(np.uint8)
    rows = np.sort(rng.choice(5000, 3000, replace=False)).astype(np.int64)
    left = rng.random(N_BINS) < 0.4
    li, ri = kernels.split_rows(codes, rows, left)
    assert np.array_equal(li, rows[left[codes[rows]]]) and np.array_equal(ri, rows[~left[codes[rows]]])


def _xor_data(n, seed):
    """Arms respond only where exactly one of x0 < 32, x1 < 32 holds: no feature has a marginal effect."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 64, (3, n)).astype(np.uint8)
    t = rng.integers(0, 3, n)
    responsive = (x[0] < 32) ^ (x[1] < 32)
    y = (rng.random(n) < 0.2 + responsive * np.array([0.0, 0.2, 0.3])[t]).astype(float)
    return x, t, y, np.array([0.0, 1.0, 2.0])[t], responsive


def test_lookahead_split_matches_a_brute_force_two_level_search():
    x, t, y, z, _ = _xor_data(4000, 7)
    x = x // 8  # 8 bins: the lookahead's second level then tries every threshold
    rows = np.arange(len(t))
    parent = kernels.arm_stats(rows, t, y, z, 3)
    hist = kernels.node_histogram(x, rows, t, y, z, N_BINS, 3)
    n_valid = np.full(3, 8)
    rank = np.tile(np.arange(N_BINS), (3, 1))
    fit_args = (0.05, 100, 10, 0.5, np.zeros(2), np.zeros((2, 2)))
    f, b, g, score = kernels.lookahead_split(x, rows, t, y, z, rank, hist, n_valid, parent, *fit_args, 4)
    best = (-np.inf, -1, -1, 0.0)
    for rf in range(3):
        for rb in range(7):
            go_left = x[rf] <= rb
            parts = [rows[go_left], rows[~go_left]]
            stats = [kernels.arm_stats(p, t, y, z, 3) for p in parts]
            if min(s[:, 0].min() for s in stats) < 10 or min(s[:, 0].sum() for s in stats) < 100:
                continue
            one = tree.numpy_split_finder(hist[rf : rf + 1], n_valid[:1], parent, *fit_args)
            own = tree.numpy_split_finder(  # this (rf, rb) alone: only its threshold is allowed
                np.stack([hist[rf, : rb + 1].sum(0), hist[rf, rb + 1 :].sum(0)])[None], np.array([2]), parent, *fit_args
            )[2]
            assert own <= one[2] + 1e-9
            sc = own
            for p, s in zip(parts, stats):
                h = tree.numpy_histogram(x, p, t, y, z, N_BINS, 3)
                sc += max(tree.numpy_split_finder(h, n_valid, s, *fit_args)[2], 0.0)
            if sc > best[0]:
                best = (sc, rf, rb, own)
    assert (f, b) == best[1:3]
    assert score == pytest.approx(best[0], rel=1e-9) and g == pytest.approx(best[3], rel=1e-9)


def test_lookahead_finds_an_interaction_the_greedy_split_misses():
    x, t, y, z, responsive = _xor_data(40_000, 8)
    args = (x, np.full(3, 64), np.arange(len(t)), t, y, z, 3, 0.05)

    def pure_share(grown):  # share of rows in leaves that are (almost) all responsive or all not
        leaf = grown.leaf_of_codes(x)
        purity = np.array([responsive[leaf == k].mean() for k in range(grown.n_leaves)])[leaf]
        return float(((purity < 0.05) | (purity > 0.95)).mean())

    look = tree.grow(*args, tree.TreeParams(2, 500, 20, 0.0, lookahead=True), 0.5)
    assert look.nodes[0].feature in (0, 1) and abs(look.nodes[0].bin - 31) <= 1
    assert look.n_leaves == 4 and pure_share(look) == 1.0
    greedy = tree.grow(*args, tree.TreeParams(2, 500, 20, 0.0), 0.5)
    assert pure_share(greedy) < 0.5  # its root split is at a noise threshold


def test_allocation_without_s_max_cap_matches_the_closed_form_and_never_nan():
    """Issue 35 item 5: s_max = inf (no cap) gave NaN spends silently; the uncapped curved case must equal
    the closed form s_k = B a_k / sum n_j a_j, and an uncapped linear cohort is refused."""
    import numpy as np

    from methodkit.core.errors import DataError
    from methodkit.tools.cuvet.allocate import allocate, common_beta_spend

    rng = np.random.default_rng(7)
    n, alpha = rng.uniform(0.5, 2.0, 5), rng.uniform(0.1, 3.0, 5)
    alpha[2] = 0.0  # a cohort that gains nothing: inf * 0 must not turn into NaN
    got = allocate(n, alpha, np.full(5, 0.6), np.full(5, np.inf), 3.0)
    assert np.all(np.isfinite(got.spend))
    np.testing.assert_allclose(got.spend, common_beta_spend(n, alpha, 0.6, 3.0), rtol=1e-9, atol=1e-12)
    with pytest.raises(DataError, match="s_max"):
        allocate(n, alpha + 0.1, np.full(5, 1.0), np.full(5, np.inf), 3.0)


def test_bayes_expected_spend_refuses_an_infinite_s_max():
    """Issue 35 item 5, Bayesian path: log(s_max = inf) made the spend NaN without a word."""
    from methodkit.core.errors import DataError

    alpha, beta = np.full((2, 8), 1.0), np.full((2, 8), 0.5)
    with pytest.raises(DataError, match="s_max"):
        bayes.expected_spend(0.5, alpha, beta, np.array([1.0, np.inf]))
