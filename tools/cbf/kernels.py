"""Numba kernels: the CBF forward pass and the particle-filter baselines, one subject (or run) per thread.

Arrays are [subject, block position, trial]; `valid` marks trials that exist. Every kernel is
thread-count invariant: a subject's work runs in one thread, and a particle filter seeds the
thread's generator from the per-run seed it is handed at the start of its iteration. The kernels are
serial and GIL-free; `threads` runs slices of their subjects or runs on -j threads (not prange: see
cbf_value_adjoint's docstring for why).
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from methodkit.tools.cbf import threads

LOG_2PI = math.log(2.0 * math.pi)
PF_BETA, PF_HPL = 0, 1


@njit(cache=True, nogil=True)
def _cbf_filter_rows(
    outcome,
    valid,
    vnodes,
    snodes,
    m0,
    w0,
    switch,
    carry,
    pred_mean,
    pred_var,
    post_mean,
    vol_mean,
    sto_mean,
    ambiguity,
    entropy,
    logz,
    edge_mass,
):
    """Exact Bayesian model averaging over K x K Kalman filters per subject (outputs filled in place).

    pred_* and the weight summaries use the weights before trial t's outcome; post_mean is the
    mixture mean after it; logz[t] = log p(o_t | o_<t); edge_mass[s] = largest block-end marginal
    mass on an end node of either dimension.
    """
    S, B, T = outcome.shape
    K = vnodes.shape[1]
    KK = K * K
    log_kk = math.log(KK) if KK > 1 else 1.0
    for s in range(S):
        logpi = np.full((K, K), -math.log(KK))
        m = np.empty((K, K))
        w = np.empty((K, K))
        pi = np.empty((K, K))
        lv = np.log(vnodes[s])
        ls = np.log(snodes[s])
        edge = 0.0
        for b in range(B):
            if b > 0 and not carry:
                logpi[:, :] = -math.log(KK)
            m[:, :] = m0
            w[:, :] = w0
            for t in range(T):
                if not valid[s, b, t]:
                    pred_mean[s, b, t] = np.nan
                    pred_var[s, b, t] = np.nan
                    post_mean[s, b, t] = np.nan
                    vol_mean[s, b, t] = np.nan
                    sto_mean[s, b, t] = np.nan
                    ambiguity[s, b, t] = np.nan
                    entropy[s, b, t] = np.nan
                    logz[s, b, t] = np.nan
                    continue
                o = outcome[s, b, t]
                mu = 0.0
                second = 0.0
                ev = 0.0
                es = 0.0
                ed = 0.0
                ed2 = 0.0
                ent = 0.0
                for i in range(K):
                    for j in range(K):
                        p = math.exp(logpi[i, j])
                        if switch > 0.0:
                            p = (1.0 - switch) * p + switch / KK
                            logpi[i, j] = math.log(p)
                        pi[i, j] = p
                        mu += p * m[i, j]
                        second += p * (m[i, j] * m[i, j] + w[i, j] + vnodes[s, i] + snodes[s, j])
                        ev += p * vnodes[s, i]
                        es += p * snodes[s, j]
                        d = lv[i] - ls[j]
                        ed += p * d
                        ed2 += p * d * d
                        if p > 0.0:
                            ent -= p * logpi[i, j]
                pred_mean[s, b, t] = mu
                pred_var[s, b, t] = second - mu * mu
                vol_mean[s, b, t] = ev
                sto_mean[s, b, t] = es
                ambiguity[s, b, t] = max(ed2 - ed * ed, 0.0)
                entropy[s, b, t] = ent / log_kk if KK > 1 else 0.0
                top = -np.inf
                for i in range(K):
                    for j in range(K):
                        pv = w[i, j] + vnodes[s, i]
                        tot = pv + snodes[s, j]
                        e = o - m[i, j]
                        a = logpi[i, j] - 0.5 * (LOG_2PI + math.log(tot)) - 0.5 * e * e / tot
                        logpi[i, j] = a
                        if a > top:
                            top = a
                        gain = pv / tot
                        m[i, j] += gain * e
                        w[i, j] = (1.0 - gain) * pv
                acc = 0.0
                for i in range(K):
                    for j in range(K):
                        acc += math.exp(logpi[i, j] - top)
                lz = top + math.log(acc)
                logz[s, b, t] = lz
                post = 0.0
                for i in range(K):
                    for j in range(K):
                        logpi[i, j] -= lz
                        post += math.exp(logpi[i, j]) * m[i, j]
                post_mean[s, b, t] = post
            if K > 1:
                for i in range(K):
                    row = 0.0
                    col = 0.0
                    for j in range(K):
                        row += math.exp(logpi[i, j])
                        col += math.exp(logpi[j, i])
                    if (i == 0 or i == K - 1) and (row > edge or col > edge):
                        edge = max(row, col)
        edge_mass[s] = edge


# ---------------------------------------------------------------- random numbers for the particle filters
# xoshiro256+ (Blackman & Vigna) per PF run, its state seeded by splitmix64 from the run's seed: a few
# integer operations per draw, no shared generator state, the same stream whatever the thread count.
_U11, _U17, _U27, _U30, _U31, _U45, _U19 = (np.uint64(n) for n in (11, 17, 27, 30, 31, 45, 19))
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TWO_M53 = 2.0**-53


def _ziggurat_tables(layers=128, r=3.442619855899, area=9.91256303526217e-3):
    """Layer edges x[0..layers] and ratios x[i+1]/x[i] of the normal ziggurat (Marsaglia & Tsang 2000, as
    laid out by Doornik 2005: 128 layers of equal area, the base layer holding the tail beyond r)."""
    x = np.zeros(layers + 1)
    f = math.exp(-0.5 * r * r)
    x[0] = area / f
    x[1] = r
    for i in range(2, layers):
        x[i] = math.sqrt(-2.0 * math.log(area / x[i - 1] + f))
        f = math.exp(-0.5 * x[i] * x[i])
    return x, x[1:] / x[:-1]


_ZIG_X, _ZIG_RATIO = _ziggurat_tables()
_ZIG_R = 3.442619855899
_U3, _MASK7 = np.uint64(3), np.uint64(127)


@njit(cache=True)
def rng_seed(seed, state):
    """Fill state (uint64[4]) from an integer seed by splitmix64."""
    x = np.uint64(seed)
    for k in range(4):
        x += _GOLDEN
        z = x
        z = (z ^ (z >> _U30)) * _MIX1
        z = (z ^ (z >> _U27)) * _MIX2
        state[k] = z ^ (z >> _U31)


@njit(cache=True, inline="always")
def _next64(state):
    s0, s1, s2, s3 = state[0], state[1], state[2], state[3]
    out = s0 + s3
    t = s1 << _U17
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = (s3 << _U45) | (s3 >> _U19)
    state[0], state[1], state[2], state[3] = s0, s1, s2, s3
    return out


@njit(cache=True, inline="always")
def rng_uniform(state):
    """Uniform on [0, 1) from the top 53 bits (through int64: a single conversion instruction)."""
    return float(np.int64(_next64(state) >> _U11)) * _TWO_M53


@njit(cache=True, inline="always")
def rng_normal(state):
    """Standard normal by the ziggurat: one 64-bit draw gives the sign/abscissa (top 53 bits) and the
    layer (bits 3-9); ~99% of draws are accepted inside a rectangle without any transcendental call."""
    while True:
        bits = _next64(state)
        u = 2.0 * float(np.int64(bits >> _U11)) * _TWO_M53 - 1.0
        i = np.int64((bits >> _U3) & _MASK7)
        if abs(u) < _ZIG_RATIO[i]:
            return u * _ZIG_X[i]
        if i == 0:  # the tail beyond R (Marsaglia 1964)
            while True:
                x = math.log(1.0 - rng_uniform(state)) / _ZIG_R
                y = math.log(1.0 - rng_uniform(state))
                if -2.0 * y >= x * x:
                    return x - _ZIG_R if u < 0.0 else _ZIG_R - x
        x = u * _ZIG_X[i]
        f0 = math.exp(-0.5 * (_ZIG_X[i] * _ZIG_X[i] - x * x))
        f1 = math.exp(-0.5 * (_ZIG_X[i + 1] * _ZIG_X[i + 1] - x * x))
        if f1 + rng_uniform(state) * (f0 - f1) < 1.0:
            return x


@njit(cache=True)
def gamma_constants(shape):
    """(d, c, 1/shape or 0) of Marsaglia & Tsang's sampler; shape < 1 is drawn as Gamma(shape + 1) U^(1/shape)."""
    a = shape + 1.0 if shape < 1.0 else shape
    d = a - 1.0 / 3.0
    return d, 1.0 / math.sqrt(9.0 * d), 1.0 / shape if shape < 1.0 else 0.0


@njit(cache=True, inline="always")
def rng_gamma(state, d, c, inv_shape):
    """Gamma(shape, 1) by Marsaglia & Tsang (2000) squeeze/rejection, constants from gamma_constants."""
    while True:
        x = rng_normal(state)
        v = 1.0 + c * x
        if v <= 0.0:
            continue
        v = v * v * v
        u = 1.0 - rng_uniform(state)
        x2 = x * x
        if u < 1.0 - 0.0331 * x2 * x2 or math.log(u) < 0.5 * x2 + d * (1.0 - v + math.log(v)):
            if inv_shape > 0.0:
                return d * v * (1.0 - rng_uniform(state)) ** inv_shape
            return d * v


@njit(cache=True, inline="always")
def rng_beta_half(state, d, c, inv_shape):
    """Beta(a, 1/2) = X / (X + Y), X ~ Gamma(a) (constants of a), Y ~ Gamma(1/2) = Z^2 / 2, Z standard normal."""
    x = rng_gamma(state, d, c, inv_shape)
    z = rng_normal(state)
    return x / (x + 0.5 * z * z)


# Inverse-CDF tables of Beta(a, 1/2) (tools/cbf/betatable.py): uniform cells of width 1/1024 on [2^-6, 1),
# 16 cells per octave [2^(e-1), 2^e) below, each a cubic in the position t within the cell.
_TAB_CELLS, _TAB_OCT_CELLS, _TAB_TOP = 1024, 16, 2.0**-6


@njit(cache=True, inline="always")
def _table_cell(u):
    """(row, t) of u in a Beta(a, 1/2) table; row -1 for u = 0."""
    if u >= _TAB_TOP:
        x = u * _TAB_CELLS
        row = int(x)
        return row, x - row
    if u > 0.0:
        mant, e = math.frexp(u)  # u = mant 2^e, mant in [1/2, 1): octave [2^(e-1), 2^e)
        x = (2.0 * mant - 1.0) * _TAB_OCT_CELLS
        j = int(x)
        return _TAB_CELLS + (-6 - e) * _TAB_OCT_CELLS + j, x - j
    return -1, 0.0


@njit(cache=True, inline="always")
def beta_half_inverse(table, u):
    """Q(u) of the tabulated Beta(a, 1/2) (rows of cubic coefficients from betatable.beta_half_table)."""
    row, t = _table_cell(u)
    if row < 0:
        return 0.0
    return table[row, 0] + t * (table[row, 1] + t * (table[row, 2] + t * table[row, 3]))


@njit(cache=True, inline="always")
def beta_half_inverse_log(table, u):
    """(Q(u), log Q(u)), the log from its own tabulated cubic (no logarithm per draw)."""
    row, t = _table_cell(u)
    if row < 0:
        return 0.0, -np.inf
    q = table[row, 0] + t * (table[row, 1] + t * (table[row, 2] + t * table[row, 3]))
    lq = table[row, 4] + t * (table[row, 5] + t * (table[row, 6] + t * table[row, 7]))
    return q, lq


@njit(cache=True)
def beta_half_quantiles(table, u):
    """Q(u) and log Q(u) elementwise from a Beta(a, 1/2) table (tests)."""
    out = np.empty(u.shape[0])
    logs = np.empty(u.shape[0])
    for i in range(u.shape[0]):
        out[i], logs[i] = beta_half_inverse_log(table, u[i])
    return out, logs


@njit(cache=True)
def sample(kind, shape, seed, n, table):
    """n draws of one sampler (0 uniform, 1 normal, 2 Gamma(shape), 3 Beta(shape, 1/2) by gamma ratio,
    4 Beta(a, 1/2) by inversion of `table`) from one seed (tests)."""
    state = np.empty(4, dtype=np.uint64)
    rng_seed(seed, state)
    d, c, inv = gamma_constants(shape if shape > 0.0 else 1.0)
    out = np.empty(n)
    for i in range(n):
        if kind == 0:
            out[i] = rng_uniform(state)
        elif kind == 1:
            out[i] = rng_normal(state)
        elif kind == 2:
            out[i] = rng_gamma(state, d, c, inv)
        elif kind == 3:
            out[i] = rng_beta_half(state, d, c, inv)
        else:
            out[i] = beta_half_inverse(table, rng_uniform(state))
    return out


@njit(cache=True)
def _systematic_gather(weights, total, u0, a, b, c, d, e, f, a2, b2, c2, d2, e2, f2):
    """Systematic resampling fused with the copy: x2[p] = x[index[p]] for the six particle arrays (pass the
    same array twice where fewer are needed), index[p] the ancestor of the P equally spaced points
    (u0 + p) / P, u0 in [0, 1), on the cumulative weights divided by their sum `total`."""
    P = weights.shape[0]
    j = 0
    cum = weights[0]
    step = total / P
    for p in range(P):
        u = (u0 + p) * step
        while u > cum and j < P - 1:
            j += 1
            cum += weights[j]
        a2[p] = a[j]
        b2[p] = b[j]
        c2[p] = c[j]
        d2[p] = d[j]
        e2[p] = e[j]
        f2[p] = f[j]


# ---------------------------------------------------------------- vectorisable pieces of the particle filter
# Reassociation lets LLVM vectorise the per-particle sums and min; no flag that assumes finite values.
_FAST = {"reassoc", "contract", "nsz", "arcp"}
_LN2_HI = 6.93147180369123816490e-01  # Cody-Waite split of log 2
_LN2_LO = 1.90821492927058770002e-10
_LOG2E = 1.4426950408889634
_EXP_BIAS = np.int64(1023)


@njit(cache=True, fastmath=_FAST)
def fill_uniform(counter, out):
    """out[:] = uniforms on [0, 1) by SplitMix64 on a counter (the generator of Java's SplittableRandom, Steele
    et al. 2014): out[p] = mix(c + (p + 1) golden), then c advances by len(out) golden. No state carried from
    one draw to the next, so the loop vectorises; counter is uint64[1], seeded per run from its xoshiro256+."""
    base = counter[0]
    for p in range(out.shape[0]):
        z = base + np.uint64(p + 1) * _GOLDEN
        z = (z ^ (z >> _U30)) * _MIX1
        z = (z ^ (z >> _U27)) * _MIX2
        z = z ^ (z >> _U31)
        out[p] = float(np.int64(z >> _U11)) * _TWO_M53
    counter[0] = base + np.uint64(out.shape[0]) * _GOLDEN


@intrinsic
def _bits_as_float64(typingctx, bits):
    """The float64 whose bit pattern is the int64 `bits` (an LLVM bitcast: unlike an array view it stays
    inside a loop body, so the loop still vectorises)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@njit(cache=True, inline="always")
def exp1_nonpositive(x):
    """exp(x) for x <= 0, branch-free: x = k log 2 + r, |r| <= log(2)/2, degree-12 Taylor series of exp(r)
    (truncation < 4e-16) times 2^k built in the exponent bits. x < -708 is read as -708 (exp(-708) ~ 3e-308
    instead of a smaller number or 0). Inlined into a fastmath loop, numba applies the caller's
    reassociation, which merges the two-part log 2 (Cody-Waite) constant: the relative error then grows to
    ~3.4e-17 |x| (2.4e-14 at x = -707)."""
    y = max(x, -708.0)
    k = math.floor(y * _LOG2E + 0.5)
    r = (y - k * _LN2_HI) - k * _LN2_LO
    e = 1.0 / 479001600.0
    e = 1.0 / 39916800.0 + r * e
    e = 1.0 / 3628800.0 + r * e
    e = 1.0 / 362880.0 + r * e
    e = 1.0 / 40320.0 + r * e
    e = 1.0 / 5040.0 + r * e
    e = 1.0 / 720.0 + r * e
    e = 1.0 / 120.0 + r * e
    e = 1.0 / 24.0 + r * e
    e = 1.0 / 6.0 + r * e
    e = 0.5 + r * e
    e = 1.0 + r * e
    return (1.0 + r * e) * _bits_as_float64((np.int64(k) + _EXP_BIAS) << 52)


@njit(cache=True)
def exp_nonpositive(x, out):
    """out[p] = exp1_nonpositive(x[p]) (tests; the filter inlines the scalar form into its fused pass)."""
    for p in range(x.shape[0]):
        out[p] = exp1_nonpositive(x[p])


@njit(cache=True)
def _move_beta(state, counter, x, lx, eta, table, use_table, d, c, inv, ubuf, logs):
    """pf-beta's precision diffusion on the variance scale, x <- x eta / eps, eps ~ Beta(a, 1/2) by inversion
    of the tabulated quantile or by the exact gamma ratio; with `logs`, lx <- lx + log eta - log eps too."""
    if use_table:
        fill_uniform(counter, ubuf)
        if logs:
            log_eta = math.log(eta)
            for p in range(x.shape[0]):
                q, lq = beta_half_inverse_log(table, ubuf[p])
                ubuf[p] = q
                lx[p] += log_eta - max(lq, -690.0)
        else:
            for p in range(x.shape[0]):
                ubuf[p] = beta_half_inverse(table, ubuf[p])
    else:
        for p in range(x.shape[0]):
            ubuf[p] = rng_beta_half(state, d, c, inv)
        if logs:
            for p in range(x.shape[0]):
                lx[p] += math.log(eta / max(ubuf[p], 1e-300))
    for p in range(x.shape[0]):
        x[p] = x[p] * eta / max(ubuf[p], 1e-300)


@njit(cache=True)
def _move_hpl(state, counter, x, lx, rate, sigma, ubuf):
    """pf-hpl: log x jumps by N(0, sigma^2) with probability `rate`; lx keeps log x."""
    fill_uniform(counter, ubuf)
    for p in range(x.shape[0]):
        if ubuf[p] < rate:
            step = sigma * rng_normal(state)
            lx[p] += step
            x[p] = x[p] * math.exp(step)


@njit(cache=True, nogil=True, fastmath=_FAST)
def _pf_jobs(
    first,
    last,
    kind,
    outcome,
    valid,
    params,
    n_particles,
    seeds,
    m0,
    w0,
    pred_mean,
    vol_mean,
    sto_mean,
    ambiguity,
    collapses,
    signals,
    tables,
    use_table,
):
    """Rao-Blackwellised particle filters over (v, s) with a Kalman filter per particle.

    kind PF_BETA: params [lambda_v, lambda_s, v0, s0]; precisions follow z_t = z_{t-1} eps / eta,
    eps ~ Beta(eta nu, (1 - eta) nu), eta = 1 - lambda, nu = 0.5 / lambda (lambda = 0: fixed, a lesion);
    the second shape is (1 - eta) nu = 1/2 for every lambda: eps is drawn by inverting the tabulated
    quantile `tables[s, 0 or 1]` where `use_table[s, .]` (betatable.tables_for), else by the exact
    gamma ratio rng_beta_half.
    kind PF_HPL: params [mu_v, mu_s, sigma, init]; log v and log s jump with probability mu by
    N(0, sigma^2); v = s = init at the start of a block.
    seeds [S, R]: run r of subject s has its own generators (a scalar xoshiro256+ and LANES streams seeded
    from it); outputs [S, R, B, T]. Per trial: the particles move; one branch-free vectorised pass reads
    the prediction from the current weights and updates each particle's Kalman filter; the weights are
    multiplied by the likelihoods shifted by the best one (log-sum-exp on the linear scale, vectorised exp)
    and resampled systematically when ESS < P/2. collapses[s, r] counts trials on which every unshifted
    likelihood underflowed. signals=False skips vol/sto/ambiguity (left NaN).
    """
    S, B, T = outcome.shape
    R = seeds.shape[1]
    P = n_particles
    for job in range(first, last):
        s = job // R
        r = job % R
        state = np.empty(4, dtype=np.uint64)
        rng_seed(seeds[s, r], state)
        counter = np.empty(1, dtype=np.uint64)  # the SplitMix64 counter of fill_uniform
        counter[0] = _next64(state)
        v = np.empty(P)
        sv = np.empty(P)
        lv = np.zeros(P)  # log v - log v0 (pf-hpl always, pf-beta with signals), ls the same for s
        ls = np.zeros(P)
        m = np.empty(P)
        w = np.empty(P)
        wt = np.empty(P)
        nw = np.empty(P)
        half = np.empty(P)  # -q/2, q = squared standardised prediction error
        scale = np.empty(P)
        ubuf = np.empty(P)
        v2 = np.empty(P)  # spare buffers: resampling gathers into them, then the names swap
        sv2 = np.empty(P)
        m2 = np.empty(P)
        w2 = np.empty(P)
        lv2 = np.empty(P)
        ls2 = np.empty(P)
        a0 = params[s, 0]
        a1 = params[s, 1]
        a2 = params[s, 2]
        a3 = params[s, 3]
        eta_v = 1.0 - a0
        eta_s = 1.0 - a1
        beta_v = kind == PF_BETA and a0 > 0.0
        beta_s = kind == PF_BETA and a1 > 0.0
        tab_v = use_table[s, 0] == 1 and beta_v
        tab_s = use_table[s, 1] == 1 and beta_s
        dv, cv, iv = gamma_constants(eta_v * 0.5 / a0 if beta_v else 1.0)
        ds, cs, is_ = gamma_constants(eta_s * 0.5 / a1 if beta_s else 1.0)
        table_v = tables[s, 0]
        table_s = tables[s, 1]
        v0 = a2 if kind == PF_BETA else a3
        s0 = a3
        log_ratio0 = math.log(v0 / s0)
        n_collapse = 0
        for b in range(B):
            for p in range(P):
                v[p] = v0
                sv[p] = s0
                lv[p] = 0.0
                ls[p] = 0.0
                m[p] = m0
                w[p] = w0
                wt[p] = 1.0 / P
            total = 1.0
            for t in range(T):
                if not valid[s, b, t]:
                    pred_mean[s, r, b, t] = np.nan
                    vol_mean[s, r, b, t] = np.nan
                    sto_mean[s, r, b, t] = np.nan
                    ambiguity[s, r, b, t] = np.nan
                    continue
                o = outcome[s, b, t]
                # transition of (v, s)
                if kind == PF_BETA:
                    if beta_v:
                        _move_beta(state, counter, v, lv, eta_v, table_v, tab_v, dv, cv, iv, ubuf, signals)
                    if beta_s:
                        _move_beta(state, counter, sv, ls, eta_s, table_s, tab_s, ds, cs, is_, ubuf, signals)
                else:
                    _move_hpl(state, counter, v, lv, a0, a2, ubuf)
                    _move_hpl(state, counter, sv, ls, a1, a2, ubuf)
                inv_total = 1.0 / total  # weights are kept unnormalised, summing to `total`
                if signals:
                    # the moved (predictive) particles under the current weights
                    ev = 0.0
                    es = 0.0
                    ed = 0.0
                    ed2 = 0.0
                    for p in range(P):
                        wp = wt[p]
                        d = log_ratio0 + lv[p] - ls[p]
                        ev += wp * v[p]
                        es += wp * sv[p]
                        ed += wp * d
                        ed2 += wp * d * d
                    ed *= inv_total
                    vol_mean[s, r, b, t] = ev * inv_total
                    sto_mean[s, r, b, t] = es * inv_total
                    ambiguity[s, r, b, t] = max(ed2 * inv_total - ed * ed, 0.0)
                else:
                    vol_mean[s, r, b, t] = np.nan
                    sto_mean[s, r, b, t] = np.nan
                    ambiguity[s, r, b, t] = np.nan
                # the prediction from the current weights, then each particle's Kalman update and likelihood terms
                mu = 0.0
                best = np.inf
                for p in range(P):
                    mu += wt[p] * m[p]
                    pv = w[p] + v[p]
                    rs = 1.0 / math.sqrt(pv + sv[p])
                    inv = rs * rs
                    e = o - m[p]
                    q = e * e * inv
                    half[p] = -0.5 * q
                    scale[p] = rs
                    best = min(best, q)
                    gain = pv * inv
                    m[p] += gain * e
                    w[p] = (1.0 - gain) * pv
                pred_mean[s, r, b, t] = mu * inv_total
                if 0.5 * best > 745.0:
                    n_collapse += 1  # exp(-q/2) underflows for every particle; the shift below keeps the weights
                # shift by the best particle (log-sum-exp) only where exp would underflow
                shift = 0.5 * best if 0.5 * best > 700.0 else 0.0
                # new unnormalised weights wt exp(-q/2) / sqrt(pv + s), their sum and sum of squares, in one pass
                acc = 0.0
                acc2 = 0.0
                for p in range(P):
                    x = wt[p] * exp1_nonpositive(half[p] + shift) * scale[p]
                    nw[p] = x
                    acc += x
                    acc2 += x * x
                if not acc > 1e-250 * total:
                    # the best-fitting particles carried almost no weight: redo the product on the log scale
                    top = -np.inf
                    for p in range(P):
                        lw = math.log(wt[p]) + half[p] + math.log(scale[p]) if wt[p] > 0.0 else -np.inf
                        nw[p] = lw
                        if lw > top:
                            top = lw
                    acc = 0.0
                    acc2 = 0.0
                    for p in range(P):
                        x = math.exp(nw[p] - top)
                        nw[p] = x
                        acc += x
                        acc2 += x * x
                wt, nw = nw, wt
                total = acc
                if acc * acc < 0.5 * P * acc2:  # ESS = acc^2 / acc2 < P / 2: resample into the spare buffers
                    if kind == PF_HPL or signals:
                        _systematic_gather(wt, acc, rng_uniform(state), v, sv, m, w, lv, ls, v2, sv2, m2, w2, lv2, ls2)
                        lv, lv2 = lv2, lv
                        ls, ls2 = ls2, ls
                    else:
                        _systematic_gather(wt, acc, rng_uniform(state), v, sv, m, w, v, v, v2, sv2, m2, w2, v2, v2)
                    v, v2 = v2, v
                    sv, sv2 = sv2, sv
                    m, m2 = m2, m
                    w, w2 = w2, w
                    for p in range(P):
                        wt[p] = 1.0 / P
                    total = 1.0
                elif not 1e-30 < total < 1e30:
                    for p in range(P):
                        wt[p] /= total
                    total = 1.0
        collapses[s, r] = n_collapse


@njit(cache=True)
def _log_ndtr(a):
    if a < -30.0:
        return -0.5 * a * a - math.log(-a) - 0.5 * LOG_2PI
    return math.log(0.5 * math.erfc(-a / math.sqrt(2.0)))


@njit(cache=True)
def _response_term(r, mu, log_sigma, lo, hi, censor, lapse):
    """(log p(r | mu), d/dmu, d/dlog sigma) of the response model (Gaussian, censored, lapse)."""
    sigma = math.exp(log_sigma)
    if censor and r <= lo:
        a = (lo - mu) / sigma
        f = _log_ndtr(a)
        ratio = math.exp(-0.5 * a * a - 0.5 * LOG_2PI - f)
        dmu, dls = -ratio / sigma, -ratio * a
    elif censor and r >= hi:
        a = (mu - hi) / sigma
        f = _log_ndtr(a)
        ratio = math.exp(-0.5 * a * a - 0.5 * LOG_2PI - f)
        dmu, dls = ratio / sigma, -ratio * a
    else:
        z = (r - mu) / sigma
        f = -0.5 * (LOG_2PI + z * z) - log_sigma
        dmu, dls = z / sigma, -1.0 + z * z
    if lapse > 0.0:
        keep = (1.0 - lapse) * math.exp(f)
        total = keep + lapse / (hi - lo)
        share = keep / total
        return math.log(total), dmu * share, dls * share
    return f, dmu, dls


@njit(cache=True, fastmath=_FAST)
def _cbf_cells(vnodes, snodes, m0, w0, T, G, INV, C, PV):
    """Per-cell Kalman gains, 1/total variance, log-density constants and prior variances for trials 0..T-1.

    They do not depend on the data (w follows a fixed recursion), so a subject's blocks share them."""
    K1, K2 = vnodes.shape[0], snodes.shape[0]
    for i in range(K1):
        for j in range(K2):
            c = i * K2 + j
            w = w0
            for t in range(T):
                pv = w + vnodes[i]
                tot = pv + snodes[j]
                PV[t, c] = pv
                G[t, c] = pv / tot
                INV[t, c] = 1.0 / tot
                C[t, c] = -0.5 * (LOG_2PI + math.log(tot))
                w = pv * snodes[j] / tot


@njit(cache=True, nogil=True, fastmath=_FAST)
def cbf_value_adjoint(
    outcome,
    valid,
    response,
    rmask,
    vnodes,
    snodes,
    log_sigma,
    m0,
    w0,
    switch,
    carry,
    lo,
    hi,
    censor,
    lapse,
    w_ll,
    w_ev,
    need_grad,
    out_ll,
    out_ev,
    grad_v,
    grad_s,
    grad_ls,
):
    """Response log-likelihood, observer evidence and the exact gradient of w_ll*ll + w_ev*ev w.r.t. the
    grid nodes and log sigma_r, by reverse-mode (adjoint) differentiation.

    The forward pass keeps each trial's weights, means and likelihood ratios; the backward pass runs the
    recursion in reverse, accumulating the adjoints of the per-cell gains, 1/variances and constants, which a
    last backward sweep of each cell's variance recursion turns into node gradients. Weights are linear and
    renormalised every trial; exp(q - top) is the branch-free exp, floored at exp(-708). Without
    `need_grad` only the values are computed (start-point screening).

    Serial and without the GIL: callers spread rows over threads (`threads.over_rows`). Not a prange:
    compiled with parallel=True and fastmath together, the freshly compiled parfor and the one loaded from
    Numba's cache gave different gradients (~1e-9; measured, either option alone did not), so the first run
    after an install differed from every later run. Why the two objects differ was not traced.
    """
    S, B, T = outcome.shape
    K1, K2 = vnodes.shape[1], snodes.shape[1]
    KK = K1 * K2
    for s in range(S):
        G = np.empty((T, KK))
        INV = np.empty((T, KK))
        C = np.empty((T, KK))
        PV = np.empty((T, KK))
        _cbf_cells(vnodes[s], snodes[s], m0, w0, T, G, INV, C, PV)
        PI = np.empty((B, T, KK))
        M = np.empty((B, T, KK))
        LIK = np.empty((B, T, KK))
        Z = np.ones((B, T))
        FMU = np.zeros((B, T))
        pi = np.empty(KK)
        m = np.empty(KK)
        ll = 0.0
        ev = 0.0
        gls = 0.0
        for b in range(B):
            if b == 0 or not carry:
                pi[:] = 1.0 / KK
            m[:] = m0
            for t in range(T):
                if not valid[s, b, t]:
                    continue
                if switch > 0.0:
                    for c in range(KK):
                        pi[c] = (1.0 - switch) * pi[c] + switch / KK
                if rmask[s, b, t]:
                    mu = 0.0
                    for c in range(KK):
                        mu += pi[c] * m[c]
                    f, fmu, fls = _response_term(response[s, b, t], mu, log_sigma[s], lo, hi, censor, lapse)
                    ll += f
                    FMU[b, t] = w_ll * fmu
                    gls += w_ll * fls
                o = outcome[s, b, t]
                lik = LIK[b, t]
                top = -np.inf
                for c in range(KK):
                    e = o - m[c]
                    q = C[t, c] - 0.5 * e * e * INV[t, c]
                    lik[c] = q
                    top = max(top, q)
                z = 0.0
                for c in range(KK):
                    x = exp1_nonpositive(lik[c] - top)
                    lik[c] = x
                    PI[b, t, c] = pi[c]
                    M[b, t, c] = m[c]
                    z += pi[c] * x
                ev += math.log(z) + top
                Z[b, t] = z
                inv_z = 1.0 / z
                for c in range(KK):
                    pi[c] = pi[c] * lik[c] * inv_z
                    m[c] += G[t, c] * (o - m[c])
        out_ll[s] = ll
        out_ev[s] = ev
        grad_ls[s] = gls
        if not need_grad:
            continue
        # backward: PB, MB = adjoints of the weights and means after the current trial
        GB = np.zeros((T, KK))
        IB = np.zeros((T, KK))
        CB = np.zeros((T, KK))
        PB = np.zeros(KK)
        MB = np.zeros(KK)
        for b in range(B - 1, -1, -1):
            if b == B - 1 or not carry:
                PB[:] = 0.0
            MB[:] = 0.0
            for t in range(T - 1, -1, -1):
                if not valid[s, b, t]:
                    continue
                o = outcome[s, b, t]
                inv_z = 1.0 / Z[b, t]
                dot = 0.0
                for c in range(KK):
                    dot += PB[c] * PI[b, t, c] * LIK[b, t, c]
                dot *= inv_z
                fm = FMU[b, t]
                for c in range(KK):
                    x = LIK[b, t, c]
                    p = PI[b, t, c] * x
                    pbar = (PB[c] - dot + w_ev) * inv_z
                    qbar = pbar * p
                    e = o - M[b, t, c]
                    CB[t, c] += qbar
                    IB[t, c] -= 0.5 * e * e * qbar
                    GB[t, c] += MB[c] * e
                    mb = MB[c] * (1.0 - G[t, c]) + qbar * e * INV[t, c] + fm * PI[b, t, c]
                    pb = pbar * x + fm * M[b, t, c]
                    PB[c] = pb * (1.0 - switch)
                    MB[c] = mb
        # the cells' variance recursions, backward: adjoints of the nodes
        gv = grad_v[s]
        gs = grad_s[s]
        gv[:] = 0.0
        gs[:] = 0.0
        for i in range(K1):
            for j in range(K2):
                c = i * K2 + j
                sj = snodes[s, j]
                wb = 0.0
                sb = 0.0
                vb = 0.0
                for t in range(T - 1, -1, -1):
                    pv = PV[t, c]
                    it = INV[t, c]
                    it2 = it * it
                    common = -IB[t, c] * it2 - 0.5 * CB[t, c] * it
                    pvb = wb * sj * sj * it2 + GB[t, c] * sj * it2 + common
                    sb += wb * pv * pv * it2 - GB[t, c] * pv * it2 + common
                    vb += pvb
                    wb = pvb
                gv[i] += vb
                gs[j] += sb


# ---------------------------------------------------------------- thread dispatch (same signatures as before)


def cbf_filter(outcome, valid, vnodes, snodes, m0, w0, switch, carry, *outs):
    """`_cbf_filter_rows` over slices of subjects on -j threads (outs: the 8 signal arrays, then edge_mass)."""
    threads.over_rows(_cbf_filter_rows, (outcome, valid, vnodes, snodes), (m0, w0, switch, carry), outs, 4)


PF_PIECE_STEPS = 5_000_000


def pf_filter(kind, outcome, valid, params, n_particles, seeds, m0, w0, *rest):
    """`_pf_jobs` over ranges of the S x R runs on -j threads (rest: the outputs, collapses, signals, tables,
    use_table, as `_pf_jobs` takes them). Each run seeds its own generators, so the split changes nothing."""

    def job(lo, hi):
        _pf_jobs(lo, hi, kind, outcome, valid, params, n_particles, seeds, m0, w0, *rest)

    # pieces of about PF_PIECE_STEPS particle-trials (~0.2 s), so that Ctrl-C is acted on promptly
    piece = max(1, PF_PIECE_STEPS // max(1, n_particles * outcome.shape[1] * outcome.shape[2]))
    threads.over_ranges(seeds.shape[0] * seeds.shape[1], job, piece=piece)
