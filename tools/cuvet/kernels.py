"""Numba kernels of CUVET: node statistics, the closed-form leaf fit, the split finder,
the per-user Lagrangian LP step and the IPW bootstrap.

Per-arm statistics are rows of a (K+1, 5) array: n, sum y, sum y^2, sum z, sum z^2
(y = value, z = cost). Everything the split finder needs is computed from them in
closed form, so one candidate split costs two frontier+fit+L evaluations.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

N_STATS = 5
BETA_MIN = 0.05
W_MIN = 1e-6
W_MAX = 1e6


# ---------------------------------------------------------------- histograms


@njit(cache=True, parallel=True)
def node_histogram(codes_t, rows, t, y, z, n_bins, n_arms):
    """hist[f, bin, arm, :] = (n, sum y, sum y^2, sum z, sum z^2) over `rows`.

    codes_t is (d, n) uint8 (feature-major, so each feature streams one row of memory);
    features run in parallel and each owns its slice of the output (no races).
    """
    d = codes_t.shape[0]
    hist = np.zeros((d, n_bins, n_arms, N_STATS))
    for f in prange(d):
        for r in range(rows.shape[0]):
            i = rows[r]
            b = codes_t[f, i]
            a = t[i]
            yi = y[i]
            zi = z[i]
            hist[f, b, a, 0] += 1.0
            hist[f, b, a, 1] += yi
            hist[f, b, a, 2] += yi * yi
            hist[f, b, a, 3] += zi
            hist[f, b, a, 4] += zi * zi
    return hist


@njit(cache=True)
def arm_stats(rows, t, y, z, n_arms):
    """Per-arm statistics of `rows` (the node total)."""
    out = np.zeros((n_arms, N_STATS))
    for r in range(rows.shape[0]):
        i = rows[r]
        a = t[i]
        out[a, 0] += 1.0
        out[a, 1] += y[i]
        out[a, 2] += y[i] * y[i]
        out[a, 3] += z[i]
        out[a, 4] += z[i] * z[i]
    return out


# ---------------------------------------------------------------- increments and frontier


@njit(cache=True)
def _mean_var(n, s, ss):
    """Mean and variance of the mean (sample variance / n, floored so a constant arm keeps a weight)."""
    m = s / n
    v = (ss - n * m * m) / max(n - 1.0, 1.0)
    if v < 1e-12:
        v = 1e-12
    return m, v / n


@njit(cache=True)
def increments(stats):
    """(dc, dv, var_dv, usable) per arm relative to arm 0 (arm 0 itself: zeros, unusable)."""
    k = stats.shape[0]
    dc = np.zeros(k)
    dv = np.zeros(k)
    var = np.zeros(k)
    ok = np.zeros(k, dtype=np.bool_)
    n0 = stats[0, 0]
    if n0 < 1.0:
        return dc, dv, var, ok
    v0, var0 = _mean_var(n0, stats[0, 1], stats[0, 2])
    c0 = stats[0, 3] / n0
    for a in range(1, k):
        na = stats[a, 0]
        if na < 1.0:
            continue
        va, vara = _mean_var(na, stats[a, 1], stats[a, 2])
        dv[a] = va - v0
        dc[a] = stats[a, 3] / na - c0
        var[a] = vara + var0
        ok[a] = True
    return dc, dv, var, ok


@njit(cache=True)
def frontier(dc, dv, ok):
    """Arms on the upper concave hull of {(0,0)} and the usable (dc, dv), increasing part only.

    Gift wrapping from the origin: the next frontier arm is the one with the steepest
    slope from the current point among the costlier ones; stop when no slope is positive.
    Returns the frontier arm indices in increasing cost (arm 0 first).
    """
    k = dc.shape[0]
    out = np.zeros(k, dtype=np.int64)
    m = 1
    cur_c = 0.0
    cur_v = 0.0
    while True:
        best = -1
        best_slope = 0.0
        for a in range(1, k):
            if not ok[a] or dc[a] <= cur_c + 1e-15:
                continue
            slope = (dv[a] - cur_v) / (dc[a] - cur_c)
            if slope > best_slope or (slope == best_slope and best >= 0 and dc[a] > dc[best]):
                best_slope = slope
                best = a
        if best < 0:
            break
        out[m] = best
        m += 1
        cur_c = dc[best]
        cur_v = dv[best]
    return out[:m]


# ---------------------------------------------------------------- the power law


@njit(cache=True)
def fit_power_law(stats, beta_root, prior_mu, prior_prec):
    """Closed-form fit of dV(s) = alpha s^beta on the frontier of one node.

    Weighted least squares in log-log space (weights dv^2/var(dv), the inverse delta-method
    variance of log dv), optionally with a Gaussian prior on (log alpha, beta) given by its
    mean and 2x2 precision (zero precision = plain WLS). Returns (alpha, beta, s_max, n_points).
    """
    dc, dv, var, ok = increments(stats)
    arms = frontier(dc, dv, ok)
    npts = arms.shape[0] - 1
    if npts == 0:
        return 0.0, beta_root, 0.0, 0
    smax = dc[arms[npts]]
    sw = 0.0
    swx = 0.0
    swxx = 0.0
    swy = 0.0
    swxy = 0.0
    for j in range(1, npts + 1):
        a = arms[j]
        w = dv[a] * dv[a] / var[a]
        w = min(max(w, W_MIN), W_MAX)
        x = np.log(dc[a])
        yv = np.log(dv[a])
        sw += w
        swx += w * x
        swxx += w * x * x
        swy += w * yv
        swxy += w * x * yv
    p11 = prior_prec[0, 0]
    p12 = prior_prec[0, 1]
    p22 = prior_prec[1, 1]
    a11 = sw + p11
    a12 = swx + p12
    a22 = swxx + p22
    r1 = swy + p11 * prior_mu[0] + p12 * prior_mu[1]
    r2 = swxy + p12 * prior_mu[0] + p22 * prior_mu[1]
    det = a11 * a22 - a12 * a12
    if npts >= 2 or p22 > 0.0:
        if abs(det) <= 1e-12 * max(a11 * a22, 1e-300):
            beta = beta_root
        else:
            beta = (a11 * r2 - a12 * r1) / det
    else:
        beta = beta_root
    beta = min(max(beta, BETA_MIN), 1.0)
    # alpha given the (clipped) beta: the first normal equation
    log_alpha = (r1 - a12 * beta) / a11
    return np.exp(log_alpha), beta, smax, npts


@njit(cache=True)
def best_spend(alpha, beta, smax, lam):
    """argmax_s alpha s^beta - lam s on [0, smax] (the KKT solution, clipped)."""
    if alpha <= 0.0 or smax <= 0.0:
        return 0.0
    if beta >= 1.0:
        return smax if alpha > lam else 0.0
    if lam <= 0.0:
        return smax
    s = (alpha * beta / lam) ** (1.0 / (1.0 - beta))
    return min(s, smax)


@njit(cache=True)
def node_value(n, alpha, beta, smax, lam):
    """L(k; lam) = n * max_s [alpha s^beta - lam s]: value net of priced cost."""
    s = best_spend(alpha, beta, smax, lam)
    if s <= 0.0:
        return 0.0
    return n * (alpha * s**beta - lam * s)


@njit(cache=True)
def _enough(stats, min_leaf, min_arm):
    tot = 0.0
    for a in range(stats.shape[0]):
        tot += stats[a, 0]
        if stats[a, 0] < min_arm:
            return False
    return tot >= min_leaf


@njit(cache=True, parallel=True)
def best_split(hist, n_valid, parent, lam, min_leaf, min_arm, beta_root, prior_mu, prior_prec):
    """Best split of a node from its histogram: (feature, bin, gain), feature -1 if none.

    Left child = bins 0..b of the feature; the NaN bin (the last one) always goes right.
    gain = L(left) + L(right) - L(parent) at the fixed lam.
    """
    d, nb, k, ns = hist.shape
    a0, b0, s0, _ = fit_power_law(parent, beta_root, prior_mu, prior_prec)
    n_par = 0.0
    for a in range(k):
        n_par += parent[a, 0]
    l_par = node_value(n_par, a0, b0, s0, lam)
    gains = np.full(d, -np.inf)
    bins = np.full(d, -1, dtype=np.int64)
    for f in prange(d):
        left = np.zeros((k, ns))
        for b in range(n_valid[f] - 1):
            for a in range(k):
                for s in range(ns):
                    left[a, s] += hist[f, b, a, s]
            right = parent - left
            if not _enough(left, min_leaf, min_arm) or not _enough(right, min_leaf, min_arm):
                continue
            al, bl, sl, _ = fit_power_law(left, beta_root, prior_mu, prior_prec)
            ar, br, sr, _ = fit_power_law(right, beta_root, prior_mu, prior_prec)
            nl = 0.0
            for a in range(k):
                nl += left[a, 0]
            g = node_value(nl, al, bl, sl, lam) + node_value(n_par - nl, ar, br, sr, lam) - l_par
            if g > gains[f]:
                gains[f] = g
                bins[f] = b
    best_f = -1
    best_g = -np.inf
    for f in range(d):
        if bins[f] >= 0 and gains[f] > best_g:
            best_g = gains[f]
            best_f = f
    if best_f < 0:
        return -1, -1, 0.0
    return best_f, bins[best_f], best_g


# ---------------------------------------------------------------- the Lagrangian LP step


@njit(cache=True)
def lagrangian_choice(v, c, lam):
    """Each user's argmax_t v - lam c (lowest-cost arm among exact ties).

    Serial on purpose: one pass is memory-bound and runs ~100 times per solve, so a
    parallel region's start-up costs more than it saves (measured in bench/cuvet.py).
    """
    n, k = v.shape
    arm = np.empty(n, dtype=np.int64)
    for i in range(n):
        best = 0
        best_s = v[i, 0] - lam * c[i, 0]
        for a in range(1, k):
            s = v[i, a] - lam * c[i, a]
            if s > best_s or (s == best_s and c[i, a] < c[i, best]):
                best_s = s
                best = a
        arm[i] = best
    return arm


@njit(cache=True)
def gather_totals(v, c, arm):
    tv = 0.0
    tc = 0.0
    for i in range(arm.shape[0]):
        tv += v[i, arm[i]]
        tc += c[i, arm[i]]
    return tv, tc


# ---------------------------------------------------------------- IPW and its bootstrap


@njit(cache=True)
def _ipw_once(pi_obs, y, z, e_obs, idx):
    sv = 0.0
    sc = 0.0
    for r in range(idx.shape[0]):
        i = idx[r]
        w = pi_obs[i] / e_obs[i]
        sv += w * y[i]
        sc += w * z[i]
    m = idx.shape[0]
    return sv / m, sc / m


@njit(cache=True, parallel=True)
def ipw_bootstrap(pi_obs, pi_ref, pi_ctl, y, z, e_obs, seeds):
    """Bootstrap replicates of (V, C) for a policy, a reference policy and control.

    pi_*[i] is the probability the policy gives unit i its observed arm; one seed per
    replicate (drawn from core.rng), so the result does not depend on the thread count.
    """
    b = seeds.shape[0]
    n = y.shape[0]
    out = np.empty((b, 6))
    for r in prange(b):
        np.random.seed(seeds[r])
        idx = np.empty(n, dtype=np.int64)
        for j in range(n):
            idx[j] = np.random.randint(0, n)
        v1, c1 = _ipw_once(pi_obs, y, z, e_obs, idx)
        v2, c2 = _ipw_once(pi_ref, y, z, e_obs, idx)
        v3, c3 = _ipw_once(pi_ctl, y, z, e_obs, idx)
        out[r, 0] = v1
        out[r, 1] = c1
        out[r, 2] = v2
        out[r, 3] = c2
        out[r, 4] = v3
        out[r, 5] = c3
    return out


# ---------------------------------------------------------------- ROI-greedy fill


@njit(cache=True)
def greedy_fill(users, arms, dc, budget, n):
    """Walk (user, arm) pairs in ranked order; a user takes the first pair that still fits the budget."""
    arm = np.zeros(n, dtype=np.int64)
    taken = np.zeros(n, dtype=np.bool_)
    spent = 0.0
    for r in range(users.shape[0]):
        i = users[r]
        if taken[i]:
            continue
        cost = dc[r]
        if spent + cost <= budget:
            spent += cost
            arm[i] = arms[r]
            taken[i] = True
    return arm
