"""Numba kernels of CUVET: node statistics, the closed-form leaf fit, the split finder,
the per-user Lagrangian LP (hull breakpoints + weighted selection) and the IPW bootstrap.

Per-arm statistics are rows of a (K+1, 5) array: n, sum y, sum y^2, sum z, sum z^2
(y = value, z = cost). Everything the split finder needs is computed from them in
closed form, so one candidate split costs two frontier+fit+L evaluations.
"""

from __future__ import annotations

import numpy as np
from numba import get_num_threads, njit, prange

from methodkit.tools.cuvet.parallel import CHUNK_ROWS

N_STATS = 5
BETA_MIN = 0.05
W_MIN = 1e-6
W_MAX = 1e6


# ---------------------------------------------------------------- histograms


def node_histogram(codes_t, rows, t, y, z, n_bins, n_arms):
    """hist[f, bin, arm, :] = (n, sum y, sum y^2, sum z, sum z^2) over `rows` (see _node_histogram)."""
    return _node_histogram(codes_t, rows, t, y, z, n_bins, n_arms, get_num_threads())


@njit(cache=True, parallel=True)
def _node_histogram(codes_t, rows, t, y, z, n_bins, n_arms, threads):
    """hist[f, bin, arm, :] = (n, sum y, sum y^2, sum z, sum z^2) over `rows`.

    One pass over the rows with the features inside: each row's arm, value and cost are
    read once for all features, and the d feature-major code streams advance together.
    Chunks of rows (one per thread) run in parallel, each into its own histogram, summed at the end.
    """
    d = codes_t.shape[0]
    m = rows.shape[0]
    n_chunks = max(1, min(threads, m // CHUNK_ROWS))
    per = (m + n_chunks - 1) // n_chunks
    parts = np.zeros((n_chunks, d, n_bins, n_arms, N_STATS))
    for c in prange(n_chunks):
        h = parts[c]
        for r in range(c * per, min(m, (c + 1) * per)):
            i = rows[r]
            a = t[i]
            yi = y[i]
            zi = z[i]
            yy = yi * yi
            zz = zi * zi
            for f in range(d):
                b = codes_t[f, i]
                h[f, b, a, 0] += 1.0
                h[f, b, a, 1] += yi
                h[f, b, a, 2] += yy
                h[f, b, a, 3] += zi
                h[f, b, a, 4] += zz
    hist = parts[0].copy()
    for c in range(1, n_chunks):
        hist += parts[c]
    return hist


@njit(cache=True)
def split_rows(codes_f, rows, left):
    """(left rows, right rows) of a node: row i goes left when left[codes_f[i]] (one pass, order kept)."""
    m = rows.shape[0]
    go = np.empty(m, dtype=np.bool_)
    nl = 0
    for r in range(m):
        go[r] = left[codes_f[rows[r]]]
        nl += go[r]
    li = np.empty(nl, dtype=np.int64)
    ri = np.empty(m - nl, dtype=np.int64)
    a = 0
    b = 0
    for r in range(m):
        if go[r]:
            li[a] = rows[r]
            a += 1
        else:
            ri[b] = rows[r]
            b += 1
    return li, ri


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


@njit(cache=True)
def arm_cross(rows, t, y, z, n_arms):
    """Per-arm sum of y*z over `rows` (the value-cost cross moment honest pruning needs)."""
    out = np.zeros(n_arms)
    for r in range(rows.shape[0]):
        i = rows[r]
        out[t[i]] += y[i] * z[i]
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


@njit(cache=True)
def _parent_value(parent, lam, beta_root, prior_mu, prior_prec):
    """(n, L) of the node being split."""
    a0, b0, s0, _ = fit_power_law(parent, beta_root, prior_mu, prior_prec)
    n_par = 0.0
    for a in range(parent.shape[0]):
        n_par += parent[a, 0]
    return n_par, node_value(n_par, a0, b0, s0, lam)


@njit(cache=True)
def _split_gain(left, parent, n_par, l_par, lam, min_leaf, min_arm, beta_root, prior_mu, prior_prec):
    """L(left) + L(right) - L(parent) for the left child's statistics; -inf if a child is too small."""
    right = parent - left
    if not _enough(left, min_leaf, min_arm) or not _enough(right, min_leaf, min_arm):
        return -np.inf
    al, bl, sl, _ = fit_power_law(left, beta_root, prior_mu, prior_prec)
    ar, br, sr, _ = fit_power_law(right, beta_root, prior_mu, prior_prec)
    nl = 0.0
    for a in range(left.shape[0]):
        nl += left[a, 0]
    return node_value(nl, al, bl, sl, lam) + node_value(n_par - nl, ar, br, sr, lam) - l_par


@njit(cache=True)
def _best_feature(values, bins):
    """The feature with the highest value among those with a valid split (-1 if none); first on ties."""
    best_f = -1
    best = -np.inf
    for f in range(values.shape[0]):
        if bins[f] >= 0 and values[f] > best:
            best = values[f]
            best_f = f
    return best_f


@njit(cache=True, parallel=True)
def best_split(hist, n_valid, parent, lam, min_leaf, min_arm, beta_root, prior_mu, prior_prec):
    """Best split of a node from its histogram: (feature, bin, gain), feature -1 if none.

    Left child = bins 0..b of the feature; the NaN bin (the last one) always goes right.
    gain = L(left) + L(right) - L(parent) at the fixed lam.
    """
    d, nb, k, ns = hist.shape
    n_par, l_par = _parent_value(parent, lam, beta_root, prior_mu, prior_prec)
    gains = np.full(d, -np.inf)
    bins = np.full(d, -1, dtype=np.int64)
    for f in prange(d):
        left = np.zeros((k, ns))
        for b in range(n_valid[f] - 1):
            for a in range(k):
                for s in range(ns):
                    left[a, s] += hist[f, b, a, s]
            g = _split_gain(left, parent, n_par, l_par, lam, min_leaf, min_arm, beta_root, prior_mu, prior_prec)
            if g > gains[f]:  # -inf (a child too small) never is
                gains[f] = g
                bins[f] = b
    best_f = _best_feature(gains, bins)
    if best_f < 0:
        return -1, -1, 0.0
    return best_f, bins[best_f], gains[best_f]


@njit(cache=True)
def _best_child_gain(hist, n_valid, parent, lam, min_leaf, min_arm, beta_root, prior_mu, prior_prec, step):
    """Best one-split gain of a child given its histogram (serial best_split, gain only).

    Thresholds of features with more than 16 bins are tried every `step` bins (the
    lookahead's second level; the child's own search later tries them all).
    """
    d, nb, k, ns = hist.shape
    n_par, l_par = _parent_value(parent, lam, beta_root, prior_mu, prior_prec)
    best = 0.0
    left = np.zeros((k, ns))
    for f in range(d):
        left[:, :] = 0.0
        last = n_valid[f] - 1
        st = step if n_valid[f] > 16 else 1
        for b in range(last):
            for a in range(k):
                for s in range(ns):
                    left[a, s] += hist[f, b, a, s]
            if (b + 1) % st != 0 and b != last - 1:
                continue
            g = _split_gain(left, parent, n_par, l_par, lam, min_leaf, min_arm, beta_root, prior_mu, prior_prec)
            if g > best:
                best = g
    return best


@njit(cache=True, parallel=True)
def lookahead_split(
    codes_t, rows, t, y, z, rank, hist, n_valid, parent, lam, min_leaf, min_arm, beta_root, prior_mu, prior_prec, step
):
    """Best split by one-step lookahead: (feature, bin, its own gain, two-level score).

    A candidate (f, b) is scored by its gain plus the best positive gain of a further split
    of each child, so a split that only pays off through an interaction below it (no
    marginal effect of its own) can still be chosen. `hist` is the node's histogram in
    ranked order and `rank[f, code]` the ranked bin of a raw code (identity for numeric
    features; the node's ratio order for categorical ones). For each f one pass over the
    rows builds the joint histogram J[b_f, f2, b_f2]; cumulative sums over b_f give every
    left child's histogram, the parent's minus it every right child's.
    """
    d, nb, k, ns = hist.shape
    n_par, l_par = _parent_value(parent, lam, beta_root, prior_mu, prior_prec)
    scores = np.full(d, -np.inf)
    gains = np.zeros(d)
    bins = np.full(d, -1, dtype=np.int64)
    for f in prange(d):
        nvf = n_valid[f]
        if nvf < 2:
            continue
        joint = np.zeros((nvf, d, nb, k, ns))
        for r in range(rows.shape[0]):
            i = rows[r]
            bf = rank[f, codes_t[f, i]]
            if bf >= nvf:  # NaN: always right, never in a left child
                continue
            a = t[i]
            yi = y[i]
            zi = z[i]
            for f2 in range(d):
                b2 = rank[f2, codes_t[f2, i]]
                joint[bf, f2, b2, a, 0] += 1.0
                joint[bf, f2, b2, a, 1] += yi
                joint[bf, f2, b2, a, 2] += yi * yi
                joint[bf, f2, b2, a, 3] += zi
                joint[bf, f2, b2, a, 4] += zi * zi
        lh = np.zeros((d, nb, k, ns))
        left = np.zeros((k, ns))
        for b in range(nvf - 1):
            lh += joint[b]
            for a in range(k):
                for s in range(ns):
                    left[a, s] += hist[f, b, a, s]
            g = _split_gain(left, parent, n_par, l_par, lam, min_leaf, min_arm, beta_root, prior_mu, prior_prec)
            if g == -np.inf:
                continue
            right = parent - left
            rh = hist - lh
            gl = _best_child_gain(lh, n_valid, left, lam, min_leaf, min_arm, beta_root, prior_mu, prior_prec, step)
            gr = _best_child_gain(rh, n_valid, right, lam, min_leaf, min_arm, beta_root, prior_mu, prior_prec, step)
            sc = g + gl + gr
            if sc > scores[f]:
                scores[f] = sc
                gains[f] = g
                bins[f] = b
    best_f = _best_feature(scores, bins)
    if best_f < 0:
        return -1, -1, 0.0, 0.0
    return best_f, bins[best_f], gains[best_f], scores[best_f]


# ---------------------------------------------------------------- the Lagrangian LP step


@njit(cache=True, parallel=True)
def hull_segments(v, c):
    """Each user's upper concave hull of (cost, value) over the arms, walked from the cheapest arm.

    Returns (hull arms (n, K), hull size (n,), segment slopes (n, K-1), segment cost steps
    (n, K-1)). As lambda falls from +inf to 0, argmax_t v - lam c moves along the hull one
    vertex per segment whose slope exceeds lam; arms off the hull are never chosen. Among
    equal costs the higher value wins, among equal values the lower cost (the LP's tie rule).
    """
    n, k = v.shape
    hull = np.empty((n, k), dtype=np.int64)
    size = np.zeros(n, dtype=np.int64)
    slope = np.zeros((n, max(k - 1, 1)))
    step = np.zeros((n, max(k - 1, 1)))
    for i in prange(n):
        order = hull[i]  # sorted arm order first, then overwritten by the hull (h <= j always)
        for a in range(k):
            order[a] = a
        for a in range(1, k):  # insertion sort by (cost asc, value desc)
            x = order[a]
            b = a - 1
            while b >= 0 and (c[i, order[b]] > c[i, x] or (c[i, order[b]] == c[i, x] and v[i, order[b]] < v[i, x])):
                order[b + 1] = order[b]
                b -= 1
            order[b + 1] = x
        h = 1
        for j in range(1, k):
            p = order[j]
            top = hull[i, h - 1]
            if v[i, p] <= v[i, top] or c[i, p] <= c[i, top]:
                continue  # costs more (or the same) for no more value: dominated
            while h >= 2:
                q0 = hull[i, h - 2]
                q1 = hull[i, h - 1]
                # pop q1 when it lies on or under the chord q0 -> p
                if (v[i, q1] - v[i, q0]) * (c[i, p] - c[i, q1]) <= (v[i, p] - v[i, q1]) * (c[i, q1] - c[i, q0]):
                    h -= 1
                else:
                    break
            hull[i, h] = p
            h += 1
        size[i] = h
        for j in range(h - 1):
            a0 = hull[i, j]
            a1 = hull[i, j + 1]
            step[i, j] = c[i, a1] - c[i, a0]
            slope[i, j] = (v[i, a1] - v[i, a0]) / step[i, j]
    return hull, size, slope, step


@njit(cache=True)
def dual_price(c, hull, size, slope, step, budget):
    """(lam*, theta): the slope s* with sum(step | slope > s*) < need <= sum(step | slope >= s*),
    need = budget - cost of everyone's cheapest hull arm, and the share theta of the segments
    tied at s* that makes the budget bind.

    Weighted quickselect over the flattened segments (expected O(segments)). need >= every
    step: lam = 0 (the budget does not bind); need <= 0: lam = the steepest slope (cheapest arms).
    """
    need = budget
    m = 0
    total = 0.0
    steepest = 0.0
    for i in range(size.shape[0]):
        need -= c[i, hull[i, 0]]
        m += size[i] - 1
        for j in range(size[i] - 1):
            total += step[i, j]
            steepest = max(steepest, slope[i, j])
    if need >= total:
        return 0.0, 0.0
    if need <= 0.0:
        return steepest, 0.0
    s = np.empty(m)
    w = np.empty(m)
    pos = 0
    for i in range(size.shape[0]):
        for j in range(size[i] - 1):
            s[pos] = slope[i, j]
            w[pos] = step[i, j]
            pos += 1
    lo, hi = 0, m  # the unresolved range s[lo:hi]
    above = 0.0  # weight of resolved segments with slope > the range
    np.random.seed(7919)
    while hi > lo:
        pivot = s[lo + np.random.randint(hi - lo)]
        # three-way partition: [lo, gt) > pivot, [gt, eq) == pivot, [eq, hi) < pivot
        gt, i, lt = lo, lo, hi
        w_gt = 0.0
        w_eq = 0.0
        while i < lt:
            if s[i] > pivot:
                w_gt += w[i]
                s[gt], s[i] = s[i], s[gt]
                w[gt], w[i] = w[i], w[gt]
                gt += 1
                i += 1
            elif s[i] < pivot:
                lt -= 1
                s[lt], s[i] = s[i], s[lt]
                w[lt], w[i] = w[i], w[lt]
            else:
                w_eq += w[i]
                i += 1
        if above + w_gt >= need:
            hi = gt
        elif above + w_gt + w_eq >= need:
            return pivot, min(max((need - above - w_gt) / w_eq, 0.0), 1.0)
        else:
            above += w_gt + w_eq
            lo = lt
    return 0.0, 0.0  # not reached when need < total


@njit(cache=True, parallel=True)
def threshold_policy(v, c, hull, size, slope, lam, theta):
    """pi for every user at lambda = lam: all hull segments steeper than lam, a theta share of
    the one exactly at lam (ties). Returns (pi, total value, total cost)."""
    n, k = v.shape
    pi = np.zeros((n, k))
    tv = np.zeros(n)
    tc = np.zeros(n)
    for i in prange(n):
        j = 0
        while j < size[i] - 1 and slope[i, j] > lam:
            j += 1
        a = hull[i, j]
        if j < size[i] - 1 and slope[i, j] == lam and theta > 0.0:
            b = hull[i, j + 1]
            pi[i, a] = 1.0 - theta
            pi[i, b] = theta
            tv[i] = (1.0 - theta) * v[i, a] + theta * v[i, b]
            tc[i] = (1.0 - theta) * c[i, a] + theta * c[i, b]
        else:
            pi[i, a] = 1.0
            tv[i] = v[i, a]
            tc[i] = c[i, a]
    return pi, tv.sum(), tc.sum()


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


@njit(cache=True, parallel=True)
def bootstrap_means(terms, seeds):
    """Bootstrap replicates of the column means of terms (n, m), one seed per replicate (as above)."""
    b = seeds.shape[0]
    n, m = terms.shape
    out = np.zeros((b, m))
    for r in prange(b):
        np.random.seed(seeds[r])
        for _ in range(n):
            i = np.random.randint(0, n)
            for j in range(m):
                out[r, j] += terms[i, j]
        for j in range(m):
            out[r, j] /= n
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
