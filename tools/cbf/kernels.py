"""Numba kernels: the CBF forward pass and the particle-filter baselines, one subject (or run) per thread.

Arrays are [subject, block position, trial]; `valid` marks trials that exist. Every kernel is
thread-count invariant: a subject's work runs in one thread, and a particle filter seeds the
thread's generator from the per-run seed it is handed at the start of its iteration.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

LOG_2PI = math.log(2.0 * math.pi)
PF_BETA, PF_HPL = 0, 1


@njit(cache=True, parallel=True)
def cbf_filter(
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
    for s in prange(S):
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


@njit(cache=True)
def _systematic_resample(weights, u0, index):
    """Systematic resampling: index[p] for P equally spaced points offset by u0 in [0, 1/P)."""
    P = weights.shape[0]
    cum = 0.0
    j = 0
    cum = weights[0]
    for p in range(P):
        u = (u0 + p) / P
        while u > cum and j < P - 1:
            j += 1
            cum += weights[j]
        index[p] = j


@njit(cache=True, parallel=True)
def pf_filter(
    kind, outcome, valid, params, n_particles, seeds, m0, w0, pred_mean, vol_mean, sto_mean, ambiguity, collapses
):
    """Rao-Blackwellised particle filters over (v, s) with a Kalman filter per particle.

    kind PF_BETA: params [lambda_v, lambda_s, v0, s0]; precisions follow z_t = z_{t-1} eps / eta,
    eps ~ Beta(eta nu, (1 - eta) nu), eta = 1 - lambda, nu = 0.5 / lambda (lambda = 0: fixed, a lesion).
    kind PF_HPL: params [mu_v, mu_s, sigma, init]; log v and log s jump with probability mu by
    N(0, sigma^2); v = s = init at the start of a block.
    seeds [S, R] (uint32-range ints): run r of subject s; outputs [S, R, B, T]; weights resampled
    systematically when ESS < P/2; collapses[s, r] counts trials whose likelihoods all underflowed.
    """
    S, B, T = outcome.shape
    R = seeds.shape[1]
    P = n_particles
    for job in prange(S * R):
        s = job // R
        r = job % R
        np.random.seed(seeds[s, r])
        v = np.empty(P)
        sv = np.empty(P)
        m = np.empty(P)
        w = np.empty(P)
        logw = np.empty(P)
        wt = np.empty(P)
        index = np.empty(P, dtype=np.int64)
        tmp = np.empty(P)
        a0 = params[s, 0]
        a1 = params[s, 1]
        a2 = params[s, 2]
        a3 = params[s, 3]
        n_collapse = 0
        for b in range(B):
            for p in range(P):
                if kind == PF_BETA:
                    v[p] = a2
                    sv[p] = a3
                else:
                    v[p] = a3
                    sv[p] = a3
                m[p] = m0
                w[p] = w0
                wt[p] = 1.0 / P
            for t in range(T):
                if not valid[s, b, t]:
                    pred_mean[s, r, b, t] = np.nan
                    vol_mean[s, r, b, t] = np.nan
                    sto_mean[s, r, b, t] = np.nan
                    ambiguity[s, r, b, t] = np.nan
                    continue
                o = outcome[s, b, t]
                # transition of (v, s), then the prediction from the current weights
                for p in range(P):
                    if kind == PF_BETA:
                        if a0 > 0.0:
                            eta = 1.0 - a0
                            nu = 0.5 / a0
                            v[p] = v[p] * eta / np.random.beta(eta * nu, (1.0 - eta) * nu)
                        if a1 > 0.0:
                            eta = 1.0 - a1
                            nu = 0.5 / a1
                            sv[p] = sv[p] * eta / np.random.beta(eta * nu, (1.0 - eta) * nu)
                    else:
                        if np.random.random() < a0:
                            v[p] = v[p] * math.exp(a2 * np.random.standard_normal())
                        if np.random.random() < a1:
                            sv[p] = sv[p] * math.exp(a2 * np.random.standard_normal())
                mu = 0.0
                ev = 0.0
                es = 0.0
                ed = 0.0
                ed2 = 0.0
                for p in range(P):
                    mu += wt[p] * m[p]
                    ev += wt[p] * v[p]
                    es += wt[p] * sv[p]
                    d = math.log(v[p]) - math.log(sv[p])
                    ed += wt[p] * d
                    ed2 += wt[p] * d * d
                pred_mean[s, r, b, t] = mu
                vol_mean[s, r, b, t] = ev
                sto_mean[s, r, b, t] = es
                ambiguity[s, r, b, t] = max(ed2 - ed * ed, 0.0)
                top = -np.inf
                for p in range(P):
                    pv = w[p] + v[p]
                    tot = pv + sv[p]
                    e = o - m[p]
                    lw = math.log(wt[p]) - 0.5 * (LOG_2PI + math.log(tot)) - 0.5 * e * e / tot
                    logw[p] = lw
                    if lw > top:
                        top = lw
                    gain = pv / tot
                    m[p] += gain * e
                    w[p] = (1.0 - gain) * pv
                if not np.isfinite(top):
                    n_collapse += 1  # every likelihood underflowed: keep the weights uniform
                    for p in range(P):
                        wt[p] = 1.0 / P
                    continue
                acc = 0.0
                for p in range(P):
                    wt[p] = math.exp(logw[p] - top)
                    acc += wt[p]
                ess_inv = 0.0
                for p in range(P):
                    wt[p] /= acc
                    ess_inv += wt[p] * wt[p]
                if 1.0 / ess_inv < 0.5 * P:
                    _systematic_resample(wt, np.random.random(), index)
                    for arr in (v, sv, m, w):
                        for p in range(P):
                            tmp[p] = arr[index[p]]
                        for p in range(P):
                            arr[p] = tmp[p]
                    for p in range(P):
                        wt[p] = 1.0 / P
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


@njit(cache=True, parallel=True)
def cbf_value_grad(
    outcome,
    valid,
    response,
    rmask,
    vnodes,
    snodes,
    dv,
    ds,
    log_sigma,
    m0,
    w0,
    switch,
    carry,
    lo,
    hi,
    censor,
    lapse,
    out_ll,
    out_ev,
    grad_ll,
    grad_ev,
):
    """Response log-likelihood, observer evidence and their exact gradients, by forward-mode differentiation.

    Directions 0-1 move the v nodes (dv[s, i, 0:2] = dv_i/dtheta), 2-3 the s nodes (ds[s, j, 0:2]),
    direction 4 is log sigma_r. The Kalman variances and gains do not depend on the data, so they and
    their tangents are computed once per subject and shared by its blocks. Weights are kept on the
    linear scale and renormalised every trial.
    """
    S, B, T = outcome.shape
    K = vnodes.shape[1]
    KK = K * K
    for s in prange(S):
        g = np.empty((T, K, K))
        inv = np.empty((T, K, K))
        c = np.empty((T, K, K))
        dg = np.empty((T, K, K, 4))
        dinv = np.empty((T, K, K, 4))
        dc = np.empty((T, K, K, 4))
        dw = np.zeros(4)
        dpv = np.zeros(4)
        for i in range(K):
            for j in range(K):
                w = w0
                dw[:] = 0.0
                for t in range(T):
                    pv = w + vnodes[s, i]
                    tot = pv + snodes[s, j]
                    gain = pv / tot
                    g[t, i, j] = gain
                    inv[t, i, j] = 1.0 / tot
                    c[t, i, j] = -0.5 * (LOG_2PI + math.log(tot))
                    for k in range(4):
                        dpv[k] = dw[k] + (dv[s, i, k] if k < 2 else 0.0)
                        dtot = dpv[k] + (ds[s, j, k - 2] if k >= 2 else 0.0)
                        dgain = (dpv[k] * tot - pv * dtot) / (tot * tot)
                        dg[t, i, j, k] = dgain
                        dinv[t, i, j, k] = -dtot / (tot * tot)
                        dc[t, i, j, k] = -0.5 * dtot / tot
                        dw[k] = -dgain * pv + (1.0 - gain) * dpv[k]
                    w = (1.0 - gain) * pv
        pi = np.full((K, K), 1.0 / KK)
        dpi = np.zeros((K, K, 4))
        m = np.empty((K, K))
        dm = np.empty((K, K, 4))
        q = np.empty((K, K))
        dmu = np.zeros(4)
        dz = np.zeros(4)
        ll = 0.0
        ev = 0.0
        gl = np.zeros(5)
        ge = np.zeros(4)
        for b in range(B):
            if b == 0 or not carry:
                pi[:, :] = 1.0 / KK
                dpi[:, :, :] = 0.0
            m[:, :] = m0
            dm[:, :, :] = 0.0
            for t in range(T):
                if not valid[s, b, t]:
                    continue
                if switch > 0.0:
                    for i in range(K):
                        for j in range(K):
                            pi[i, j] = (1.0 - switch) * pi[i, j] + switch / KK
                            for k in range(4):
                                dpi[i, j, k] *= 1.0 - switch
                if rmask[s, b, t]:
                    mu = 0.0
                    dmu[:] = 0.0
                    for i in range(K):
                        for j in range(K):
                            mu += pi[i, j] * m[i, j]
                            for k in range(4):
                                dmu[k] += dpi[i, j, k] * m[i, j] + pi[i, j] * dm[i, j, k]
                    f, fmu, fls = _response_term(response[s, b, t], mu, log_sigma[s], lo, hi, censor, lapse)
                    ll += f
                    for k in range(4):
                        gl[k] += fmu * dmu[k]
                    gl[4] += fls
                o = outcome[s, b, t]
                top = -np.inf
                for i in range(K):
                    for j in range(K):
                        e = o - m[i, j]
                        q[i, j] = c[t, i, j] - 0.5 * e * e * inv[t, i, j]
                        if q[i, j] > top:
                            top = q[i, j]
                z = 0.0
                dz[:] = 0.0
                for i in range(K):
                    for j in range(K):
                        e = o - m[i, j]
                        lik = math.exp(q[i, j] - top)
                        p = pi[i, j] * lik
                        pi[i, j] = p
                        z += p
                        for k in range(4):
                            dlog = dc[t, i, j, k] + e * dm[i, j, k] * inv[t, i, j] - 0.5 * e * e * dinv[t, i, j, k]
                            dp = lik * dpi[i, j, k] + p * dlog
                            dpi[i, j, k] = dp
                            dz[k] += dp
                            dm[i, j, k] += dg[t, i, j, k] * e - g[t, i, j] * dm[i, j, k]
                        m[i, j] += g[t, i, j] * e
                ev += math.log(z) + top
                for k in range(4):
                    ge[k] += dz[k] / z
                for i in range(K):
                    for j in range(K):
                        pi[i, j] /= z
                        for k in range(4):
                            dpi[i, j, k] = (dpi[i, j, k] - pi[i, j] * dz[k]) / z
        out_ll[s] = ll
        out_ev[s] = ev
        for k in range(5):
            grad_ll[s, k] = gl[k]
        for k in range(4):
            grad_ev[s, k] = ge[k]
