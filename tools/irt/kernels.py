"""Numba kernels of the IRT estimators: one step each, Python owns the loops.

Parameters live on the unconstrained scale (la = log a, b, lc = logit c) as a J x 3
array; `code` is 1, 2 or 3 for the 1PL, 2PL and 3PL. Responses are uint8 with 255 =
missing. Kernels never draw random numbers: the caller hands them pre-drawn normals and
log-uniforms from one seeded NumPy Generator, so results do not depend on thread count.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

MISSING = 255
_EPS = 1e-10


@njit(cache=True)
def _sig(z):
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@njit(cache=True)
def _log_sig(z):
    # log sigma(z) without overflow
    if z >= 0:
        return -math.log1p(math.exp(-z))
    return z - math.log1p(math.exp(z))


@njit(cache=True)
def cell_loglik(y, theta, la, b, lc, code):
    """log P(y | theta, item) for one cell."""
    a = math.exp(la) if code > 1 else 1.0
    z = a * (theta - b)
    if code < 3:
        return _log_sig(z) if y == 1 else _log_sig(-z)
    c = _sig(lc)
    p = c + (1.0 - c) * _sig(z)
    p = min(max(p, _EPS), 1.0 - _EPS)
    return math.log(p) if y == 1 else math.log(1.0 - p)


# ---------------------------------------------------------------- MML-EM: M-step


@njit(cache=True)
def _item_objective(par, r, n, nodes, code, prior):
    """Expected complete-data log posterior of one item, its gradient and Fisher information.

    prior = (use_la, mu_la, sd_la, use_b, mu_b, sd_b, alpha_c, beta_c): a Beta(alpha, beta)
    density on c itself (Bayes modal, as mirt), normal priors on log a and b when switched on.
    """
    la, b, lc = par[0], par[1], par[2]
    a = math.exp(la) if code > 1 else 1.0
    c = _sig(lc) if code == 3 else 0.0
    f = 0.0
    g = np.zeros(3)
    info = np.zeros((3, 3))
    d = np.zeros(3)
    for q in range(nodes.shape[0]):
        if n[q] <= 0.0:
            continue
        z = a * (nodes[q] - b)
        s = _sig(z)
        p = c + (1.0 - c) * s
        p = min(max(p, _EPS), 1.0 - _EPS)
        f += r[q] * math.log(p) + (n[q] - r[q]) * math.log(1.0 - p)
        v = s * (1.0 - s)
        d[0] = (1.0 - c) * v * z if code > 1 else 0.0
        d[1] = -(1.0 - c) * v * a
        d[2] = c * (1.0 - c) * (1.0 - s) if code == 3 else 0.0
        w = (r[q] - n[q] * p) / (p * (1.0 - p))
        fi = n[q] / (p * (1.0 - p))
        for k in range(3):
            g[k] += w * d[k]
            for m in range(3):
                info[k, m] += fi * d[k] * d[m]
    if prior[0] > 0 and code > 1:
        f += -0.5 * ((la - prior[1]) / prior[2]) ** 2
        g[0] += -(la - prior[1]) / prior[2] ** 2
        info[0, 0] += 1.0 / prior[2] ** 2
    if prior[3] > 0:
        f += -0.5 * ((b - prior[4]) / prior[5]) ** 2
        g[1] += -(b - prior[4]) / prior[5] ** 2
        info[1, 1] += 1.0 / prior[5] ** 2
    if code == 3:
        al, be = prior[6], prior[7]
        f += (al - 1.0) * math.log(max(c, _EPS)) + (be - 1.0) * math.log(max(1.0 - c, _EPS))
        g[2] += (al - 1.0) * (1.0 - c) - (be - 1.0) * c
        info[2, 2] += max(al + be - 2.0, 0.0) * c * (1.0 - c)
    return f, g, info


@njit(cache=True)
def _solve_free(info, g, code, par, low, high):
    """Fisher-scoring step on the free coordinates (1PL: b; 2PL: log a, b; 3PL: all).

    A coordinate sitting on its bound with the gradient pointing outwards is held there (the
    active set of a projected Newton method): an all-correct item keeps b at the lower bound and
    still gets the a that is best there, instead of a joint step the box would cut short.
    """
    lo = 1 if code == 1 else 0
    hi = 3 if code == 3 else 2
    idx = np.empty(3, np.int64)
    k = 0
    for c in range(lo, hi):
        held = (par[c] <= low[c] and g[c] < 0.0) or (par[c] >= high[c] and g[c] > 0.0)
        if not held:
            idx[k] = c
            k += 1
    step = np.zeros(3)
    if k == 0:
        return step
    A = np.empty((k, k))
    v = np.empty(k)
    for i in range(k):
        v[i] = g[idx[i]]
        for m in range(k):
            A[i, m] = info[idx[i], idx[m]]
        A[i, i] += 1e-8
    sol = np.linalg.solve(A, v)
    for i in range(k):
        step[idx[i]] = sol[i]
    return step


@njit(parallel=True, cache=True)
def mstep(params, r, n, nodes, code, prior, max_iter, tol, low, high):
    """Maximise each item's expected complete-data log posterior in the box [low, high].

    Projected Fisher scoring with step halving: trial points are clipped to the box and accepted
    only when the objective does not fall, so every EM cycle is monotone. Items are independent
    given the E-step counts r (correct) and n (observed), J x Q. Updates `params` (J x 3) in place.
    """
    J = params.shape[0]
    for j in prange(J):
        par = params[j].copy()
        for k in range(3):
            par[k] = min(max(par[k], low[k]), high[k])
        f, g, info = _item_objective(par, r[j], n[j], nodes, code, prior)
        for _ in range(max_iter):
            step = _solve_free(info, g, code, par, low, high)
            # keep one step from throwing a parameter far away (Fisher scoring can overshoot at extremes)
            big = 0.0
            for k in range(3):
                big = max(big, abs(step[k]))
            if big == 0.0:
                break
            if big > 2.0:
                for k in range(3):
                    step[k] *= 2.0 / big
            t = 1.0
            improved = False
            moved = 0.0
            for _h in range(20):
                trial = par + t * step
                for k in range(3):
                    trial[k] = min(max(trial[k], low[k]), high[k])
                f2, g2, info2 = _item_objective(trial, r[j], n[j], nodes, code, prior)
                if f2 >= f - 1e-12:
                    moved = 0.0
                    for k in range(3):
                        moved = max(moved, abs(trial[k] - par[k]))
                    par = trial
                    f, g, info = f2, g2, info2
                    improved = True
                    break
                t *= 0.5
            if not improved or moved < tol:
                break
        params[j] = par


# ---------------------------------------------------------------- MML: Louis information


@njit(cache=True)
def _dp_d2p(x, la, b, lc, code, d, h):
    """P at node x, its gradient d (3) and Hessian h (3 x 3) in (log a, b, logit c)."""
    a = math.exp(la) if code > 1 else 1.0
    c = _sig(lc) if code == 3 else 0.0
    z = a * (x - b)
    s = _sig(z)
    v = s * (1.0 - s)
    v1 = v * (1.0 - 2.0 * s)
    p = c + (1.0 - c) * s
    for k in range(3):
        d[k] = 0.0
        for m in range(3):
            h[k, m] = 0.0
    d[1] = -(1.0 - c) * v * a
    h[1, 1] = (1.0 - c) * v1 * a * a
    if code > 1:
        d[0] = (1.0 - c) * v * z
        h[0, 0] = (1.0 - c) * (v1 * z * z + v * z)
        h[0, 1] = (1.0 - c) * (-v1 * z * a - v * a)
        h[1, 0] = h[0, 1]
    if code == 3:
        cc = c * (1.0 - c)
        d[2] = cc * (1.0 - s)
        h[2, 2] = cc * (1.0 - 2.0 * c) * (1.0 - s)
        h[0, 2] = -cc * v * z
        h[2, 0] = h[0, 2]
        h[1, 2] = cc * v * a
        h[2, 1] = h[1, 2]
    return p


@njit(parallel=True, cache=True)
def louis_information(YT, W, params, nodes, code):
    """Observed information of each item's parameters by Louis' (1982) identity.

    I_j = sum_n { E_post[-d2 log f] - Var_post[d log f] }, the posterior over nodes being
    row n of W (N x Q). Item blocks only (cross-item terms are left out). Returns J x 3 x 3.
    """
    J, N = YT.shape
    Q = nodes.shape[0]
    out = np.zeros((J, 3, 3))
    for j in prange(J):
        la, b, lc = params[j, 0], params[j, 1], params[j, 2]
        P = np.empty(Q)
        D = np.empty((Q, 3))
        H = np.empty((Q, 3, 3))
        d = np.empty(3)
        h = np.empty((3, 3))
        for q in range(Q):
            P[q] = min(max(_dp_d2p(nodes[q], la, b, lc, code, d, h), _EPS), 1.0 - _EPS)
            D[q] = d
            H[q] = h
        acc = np.zeros((3, 3))
        for nn in range(N):
            if YT[j, nn] == MISSING:
                continue
            y = float(YT[j, nn])  # uint8 arithmetic would wrap (-1 == 255)
            m1 = np.zeros(3)
            m2 = np.zeros((3, 3))
            for q in range(Q):
                w = W[nn, q]
                if w < 1e-14:
                    continue
                p = P[q]
                l1 = (y - p) / (p * (1.0 - p))
                l2 = -y / (p * p) - (1.0 - y) / ((1.0 - p) * (1.0 - p))
                for k in range(3):
                    sk = l1 * D[q, k]
                    m1[k] += w * sk
                    for m in range(3):
                        m2[k, m] += w * sk * l1 * D[q, m]
                        acc[k, m] -= w * (l2 * D[q, k] * D[q, m] + l1 * H[q, k, m])
            for k in range(3):
                for m in range(3):
                    acc[k, m] -= m2[k, m] - m1[k] * m1[m]
        out[j] = acc
    return out


# ---------------------------------------------------------------- MCMC: Metropolis within Gibbs


_FLUSH_HIGH, _FLUSH_LOW = 1e150, 1e-150


@njit(cache=True)
def _loglik_ratio_12(y, z0, z1):
    """log p(y | z1) - log p(y | z0) of a logistic cell as the ratio (1 + e^u0) / (1 + e^u1), u = -(2y-1) z.

    One division instead of two log1p calls; the caller multiplies ratios and takes one log per
    flush. Returns -1 when u would overflow exp (the caller then uses the log-space formula).
    """
    s = 1.0 if y == 1 else -1.0
    u0, u1 = -s * z0, -s * z1
    if u0 > 700.0 or u1 > 700.0:
        return -1.0
    return (1.0 + math.exp(u0)) / (1.0 + math.exp(u1))


@njit(cache=True)
def _item_natural(params, code):
    """a and c per item (exp and sigmoid once per item, not once per cell)."""
    J = params.shape[0]
    a = np.ones(J)
    c = np.zeros(J)
    for j in range(J):
        if code > 1:
            a[j] = math.exp(params[j, 0])
        if code == 3:
            c[j] = _sig(params[j, 2])
    return a, c


@njit(cache=True)
def _cell_delta_3pl(y, t0, t1, a, b, c):
    p0 = min(max(c + (1.0 - c) * _sig(a * (t0 - b)), _EPS), 1.0 - _EPS)
    p1 = min(max(c + (1.0 - c) * _sig(a * (t1 - b)), _EPS), 1.0 - _EPS)
    if y == 1:
        return math.log(p1) - math.log(p0)
    return math.log1p(-p1) - math.log1p(-p0)


@njit(parallel=True, cache=True)
def mh_theta(Y, theta, params, code, step, z, logu, accepted):
    """One random-walk MH update of every theta_n (independent given the items); prior N(0, 1).

    1PL/2PL: the log acceptance ratio sums log((1 + e^u0) / (1 + e^u1)) over the model's items as
    a running product of ratios with one log per flush (2 exp per cell instead of 2 exp + 2 log1p).
    """
    N, J = Y.shape
    a, c = _item_natural(params, code)
    for nn in prange(N):
        t0 = theta[nn]
        t1 = t0 + step[nn] * z[nn]
        delta = 0.5 * (t0 * t0 - t1 * t1)
        prod = 1.0
        for j in range(J):
            y = Y[nn, j]
            if y == MISSING:
                continue
            b = params[j, 1]
            if code == 3:
                delta += _cell_delta_3pl(y, t0, t1, a[j], b, c[j])
                continue
            ratio = _loglik_ratio_12(y, a[j] * (t0 - b), a[j] * (t1 - b))
            if ratio < 0.0:
                delta += cell_loglik(y, t1, params[j, 0], b, 0.0, code) - cell_loglik(y, t0, params[j, 0], b, 0.0, code)
                continue
            prod *= ratio
            if prod > _FLUSH_HIGH or prod < _FLUSH_LOW:
                delta += math.log(prod)
                prod = 1.0
        delta += math.log(prod)
        if logu[nn] < delta:
            theta[nn] = t1
            accepted[nn] = 1
        else:
            accepted[nn] = 0


@njit(cache=True)
def item_log_prior(la, b, lc, code, prior):
    """log a ~ N(prior0, prior1), b ~ N(prior2, prior3), c ~ Beta(prior4, prior5) on the logit scale."""
    out = -0.5 * ((b - prior[2]) / prior[3]) ** 2
    if code > 1:
        out += -0.5 * ((la - prior[0]) / prior[1]) ** 2
    if code == 3:
        # density of logit c when c ~ Beta(alpha, beta): alpha log c + beta log(1 - c)
        out += prior[4] * _log_sig(lc) + prior[5] * _log_sig(-lc)
    return out


@njit(parallel=True, cache=True)
def mh_items(YT, theta, params, code, step, z, logu, prior, accepted):
    """One joint random-walk MH update of every item's (log a, b, logit c) (independent given theta).

    1PL/2PL cells use the same ratio product as mh_theta.
    """
    J, N = YT.shape
    for j in prange(J):
        la0, b0, lc0 = params[j, 0], params[j, 1], params[j, 2]
        la1 = la0 + step[j] * z[j, 0] if code > 1 else la0
        b1 = b0 + step[j] * z[j, 1]
        lc1 = lc0 + step[j] * z[j, 2] if code == 3 else lc0
        delta = item_log_prior(la1, b1, lc1, code, prior) - item_log_prior(la0, b0, lc0, code, prior)
        a0 = math.exp(la0) if code > 1 else 1.0
        a1 = math.exp(la1) if code > 1 else 1.0
        prod = 1.0
        for nn in range(N):
            y = YT[j, nn]
            if y == MISSING:
                continue
            t = theta[nn]
            if code == 3:
                delta += cell_loglik(y, t, la1, b1, lc1, code) - cell_loglik(y, t, la0, b0, lc0, code)
                continue
            ratio = _loglik_ratio_12(y, a0 * (t - b0), a1 * (t - b1))
            if ratio < 0.0:
                delta += cell_loglik(y, t, la1, b1, lc1, code) - cell_loglik(y, t, la0, b0, lc0, code)
                continue
            prod *= ratio
            if prod > _FLUSH_HIGH or prod < _FLUSH_LOW:
                delta += math.log(prod)
                prod = 1.0
        delta += math.log(prod)
        if logu[j] < delta:
            params[j, 0] = la1
            params[j, 1] = b1
            params[j, 2] = lc1
            accepted[j] = 1
        else:
            accepted[j] = 0
