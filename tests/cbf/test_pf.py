"""Particle-filter kernels: lesion limits equal the Kalman filter, seeds fix the output, resampling is systematic."""

from __future__ import annotations

import numpy as np

from methodkit.tools.cbf import betatable, kernels, models, signals
from methodkit.tools.cbf.forward import FilterOptions

from .test_filter import kalman

NO_TABLE = np.zeros((1, 8))


def test_pf_beta_with_both_lesions_is_the_kalman_filter(cbf_agents):
    c = cbf_agents.cohort.subset([0, 1])
    values = {
        "lambda_v": np.zeros(2),
        "lambda_s": np.zeros(2),
        "v0": np.array([5.0, 30.0]),
        "s0": np.array([20.0, 60.0]),
    }
    sig = signals.model_signals(c, "pf-beta", values, grid=None, fopts=FilterOptions(), particles=50, runs=2)
    for s, (v, sto) in enumerate([(5.0, 20.0), (30.0, 60.0)]):
        preds, _ = kalman(c.outcome[s, 1], v, sto)
        assert np.allclose(sig.arrays["pred_mean"][s, 1], preds, atol=1e-9)
    assert np.allclose(sig.arrays["ambiguity"], 0.0, atol=1e-9)


def test_pf_hpl_without_jumps_is_the_kalman_filter_at_the_initial_variances(cbf_agents):
    c = cbf_agents.cohort.subset([2])
    values = {"mu_v": np.zeros(1), "mu_s": np.zeros(1), "sigma": np.full(1, 0.5)}
    sig = signals.model_signals(c, "pf-hpl", values, grid=None, fopts=FilterOptions(), particles=20, runs=1)
    preds, _ = kalman(c.outcome[0, 0], models.HPL_INIT, models.HPL_INIT)
    assert np.allclose(sig.arrays["pred_mean"][0, 0], preds, atol=1e-9)


def test_same_seeds_same_output_and_different_seeds_differ(cbf_agents):
    c = cbf_agents.cohort
    params = models.kernel_params("pf-beta", np.tile([0.3, 0.2, 10.0, 30.0], (4, 1)))

    def once(seeds):
        outs = [np.empty((4, 2, *c.outcome.shape[1:])) for _ in range(4)]
        col = np.zeros((4, 2), dtype=np.int64)
        tables, use = betatable.tables_for(params[:, :2])
        kernels.pf_filter(
            kernels.PF_BETA, c.outcome, c.valid, params, 200, seeds, 60.0, 10.0, *outs, col, True, tables, use
        )
        return outs[0]

    seeds = np.arange(8, dtype=np.int64).reshape(4, 2) + 100
    a, b = once(seeds), once(seeds)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, once(seeds + 1))
    assert np.isfinite(a).all()


def test_systematic_resampling_matches_a_numpy_reference():
    rng = np.random.default_rng(0)
    for _ in range(20):
        w = rng.random(37)
        w /= w.sum()
        u0 = rng.random()
        points = (u0 + np.arange(37)) / 37
        ref = np.minimum(np.searchsorted(np.cumsum(w), points), 36)
        # normalised weights, and unnormalised ones with their sum, copy the same ancestors
        for weights in (w, w * 3.7e-5):
            src = [rng.random(37) for _ in range(6)]
            dst = [np.empty(37) for _ in range(6)]
            kernels._systematic_gather(weights, weights.sum(), u0, *src, *dst)
            for a, b in zip(src, dst):
                assert np.array_equal(b, a[ref])


def test_own_generator_draws_follow_their_distributions():
    """KS tests of the PF's xoshiro256+ / ziggurat / Marsaglia-Tsang / Beta(a, 1/2) samplers (fixed seeds)."""
    from scipy import stats

    cases = [
        (0, 0.0, stats.uniform()),
        (1, 0.0, stats.norm()),
        (2, 2.0, stats.gamma(2.0)),
        (2, 0.3, stats.gamma(0.3)),
        (3, 2.0, stats.beta(2.0, 0.5)),  # lambda = 0.2
        (3, 0.2, stats.beta(0.2, 0.5)),  # lambda = 5/7: shape < 1 takes the boosted branch
        (3, 19.5, stats.beta(19.5, 0.5)),  # lambda = 0.025
    ]
    for kind, shape, dist in cases:
        x = kernels.sample(kind, shape, 11, 40_000, NO_TABLE)
        assert stats.kstest(x, dist.cdf).pvalue > 1e-3, (kind, shape)
        assert abs(x.mean() - dist.mean()) < 5 * dist.std() / 200.0, (kind, shape)


def test_normal_tail_beyond_the_ziggurat_base_has_the_right_mass():
    x = kernels.sample(1, 0.0, 5, 1_000_000, NO_TABLE)
    tail = (np.abs(x) > 3.0).mean()
    assert abs(tail - 0.0026998) < 4 * np.sqrt(0.0027 / 1e6)
    assert np.abs(x).max() > 4.0  # draws do come from the tail branch


def test_generator_streams_depend_on_the_seed_only():
    a, b, c = (kernels.sample(0, 0.0, s, 1000, NO_TABLE) for s in (1, 1, 2))
    assert np.array_equal(a, b)
    assert not np.allclose(a, c)
    assert abs(np.corrcoef(a, c)[0, 1]) < 0.1


def test_pf_beta_transition_matches_the_published_diffusion():
    """One step of the precision diffusion: E[z_t / z_{t-1}] = E[eps] / eta = 1 (Piray & Daw 2021)."""
    lam = 0.2
    eta, nu = 1 - lam, 0.5 / lam
    eps = kernels.sample(3, eta * nu, 3, 100_000, NO_TABLE)
    ratio = eps / eta
    assert abs(ratio.mean() - 1.0) < 0.005
    assert abs(eps.var() - (eta * (1 - eta)) / (nu + 1)) < 0.002


def test_beta_table_quantile_matches_scipy_over_the_tabulated_range():
    """The inverse-CDF table of Beta(a, 1/2) against scipy's betaincinv, bulk, both tails (u down to 2^-53)."""
    from scipy import special

    rng = np.random.default_rng(0)
    u = np.concatenate([rng.random(20_000), 2.0 ** -rng.uniform(6, 53, 20_000), 1 - 2.0 ** -rng.uniform(6, 40, 5_000)])
    for a in (betatable.MIN_SHAPE, 0.5, 2.0, 4.5, 19.5, 99.5):
        q, logq = kernels.beta_half_quantiles(betatable.beta_half_table(a), u)
        ref = special.betaincinv(a, 0.5, u)
        assert np.max(np.abs(q / ref - 1.0)) < 2e-6, a  # measured max 8.4e-7 (a = 0.25), < 4e-8 for a >= 2
        assert np.max(np.abs(logq - np.log(ref))) < 2e-6, a
    q, logq = kernels.beta_half_quantiles(betatable.beta_half_table(2.0), np.array([0.0]))
    assert q[0] == 0.0 and logq[0] == -np.inf


def test_beta_table_draws_have_the_beta_distribution():
    """Draws by inversion (kind 4): KS against scipy's Beta(a, 1/2) and mean/variance within 5 standard errors."""
    from scipy import stats

    for lam in (0.05, 0.2, 0.5, 2.0 / 3.0):
        a = betatable.shape_of(lam)
        x = kernels.sample(4, 0.0, 17, 100_000, betatable.beta_half_table(a))
        dist = stats.beta(a, 0.5)
        assert stats.kstest(x, dist.cdf).pvalue > 1e-3, lam
        n = x.size
        assert abs(x.mean() - dist.mean()) < 5 * dist.std() / np.sqrt(n), lam
        # var of the sample variance ~ (mu4 - sigma^4) / n
        mu4 = dist.expect(lambda y, mean=dist.mean(): (y - mean) ** 4)
        assert abs(x.var() - dist.var()) < 5 * np.sqrt((mu4 - dist.var() ** 2) / n), lam


def test_tables_for_flags_lesions_and_shapes_below_the_table():
    tables, use = betatable.tables_for(np.array([[0.2, 0.0], [0.9, 0.5]]))
    assert use.tolist() == [[1, 0], [0, 1]]  # lambda = 0: no draw; lambda = .9: shape .056, exact sampler
    assert tables.shape == (2, 2, betatable.N_CELLS, 8)
    assert np.array_equal(tables[0, 0], betatable.beta_half_table(2.0))
    _, none = betatable.tables_for(np.zeros((1, 2)))
    assert not none.any()


def test_pf_beta_table_and_exact_sampler_agree_in_distribution(cbf_agents):
    """Same parameters, eps by table inversion vs by the exact gamma ratio: per-run squared prediction error
    and mean ambiguity agree between the two samplers (Welch t over 60 + 60 runs), while a change of lambda_v
    is detected by the same statistic (the test has power)."""
    from scipy import stats

    c = cbf_agents.cohort.subset([0])
    R = 60
    seeds = np.arange(R, dtype=np.int64)[None, :] + 7

    def per_run(lam_v, table):
        params = models.kernel_params("pf-beta", np.array([[lam_v, 0.2, 10.0, 30.0]]))
        tables, use = betatable.tables_for(params[:, :2])
        if not table:
            use[:] = 0
        outs = [np.empty((1, R, *c.outcome.shape[1:])) for _ in range(4)]
        col = np.zeros((1, R), dtype=np.int64)
        kernels.pf_filter(
            kernels.PF_BETA, c.outcome, c.valid, params, 300, seeds, 60.0, 10.0, *outs, col, True, tables, use
        )
        sse = ((outs[0][0] - c.outcome[0][None]) ** 2).sum(axis=(1, 2))
        return sse, outs[3][0].mean(axis=(1, 2))

    table, exact, other = per_run(0.3, True), per_run(0.3, False), per_run(0.1, True)
    for k in range(2):
        assert abs(stats.ttest_ind(table[k], exact[k], equal_var=False).statistic) < 4.0
        assert abs(stats.ttest_ind(table[k], other[k], equal_var=False).statistic) > 4.0


def test_vectorised_exp_log_and_uniform_streams():
    rng = np.random.default_rng(1)
    x = -rng.exponential(30.0, 50_000)
    x[:3] = (0.0, -707.0, -1e-300)
    out = np.empty_like(x)
    kernels.exp_nonpositive(x, out)
    # ~1 ulp, plus up to ~3.4e-17 |x| where a caller's reassociation merges the two-part log 2 constant
    assert np.all(np.abs(out / np.exp(x) - 1.0) < 2e-15 + 4e-17 * np.abs(x))
    assert out[0] == 1.0
    kernels.exp_nonpositive(np.array([-800.0]), out[:1])
    assert abs(out[0] / np.exp(-708.0) - 1.0) < 3e-14  # documented floor
    counter = np.array([12345], dtype=np.uint64)
    u = np.empty(100_001)
    kernels.fill_uniform(counter, u)
    from scipy import stats

    assert stats.kstest(u, "uniform").pvalue > 1e-3
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.02  # consecutive counters are not correlated
    assert int(counter[0]) != 12345  # the counter moves on: the next call draws new numbers
    again = np.empty(100_001)
    kernels.fill_uniform(np.array([12345], dtype=np.uint64), again)
    assert np.array_equal(u, again)
    later = np.empty(10)
    kernels.fill_uniform(counter, later)
    assert not np.isin(later, u).any()
