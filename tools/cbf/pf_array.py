"""The particle filters as whole-array operations for CuPy (`--device cuda`); NumPy runs the same code.

One array row per (subject, run), one column per particle: every trial is a handful of elementwise
kernels, a row reduction and, for rows whose ESS fell below P/2, batched systematic resampling (the
rows' cumulative weights offset by their row number make one sorted vector, so a single searchsorted
serves all rows). pf-beta's eps ~ Beta(a, 1/2) is drawn by inverting the same tabulated quantile as the
Numba kernel (betatable), gathered per row; shapes below the table's range use the gamma ratio. The
random streams differ from the Numba kernel's (xp.random.RandomState per call), so the two agree in
distribution, and exactly where the filter is deterministic (lambda = 0: the Kalman filter).
"""

from __future__ import annotations

import math

import numpy as np

from methodkit.tools.cbf import betatable

_TOP = 2.0**betatable.TOP_EXPONENT


def _table_rows(xp, u):
    """Row and position t of each uniform in a Beta(a, 1/2) table (see betatable's layout)."""
    x = u * betatable.UNIFORM_CELLS
    row = xp.floor(x)
    t = x - row
    mant, e = xp.frexp(u)
    y = (2.0 * mant - 1.0) * betatable.OCTAVE_CELLS
    j = xp.floor(y)
    small = u < _TOP
    row = xp.where(small, betatable.UNIFORM_CELLS + (betatable.TOP_EXPONENT - e) * betatable.OCTAVE_CELLS + j, row)
    t = xp.where(small, y - j, t)
    row = xp.clip(row, betatable.FIRST_UNIFORM, betatable.N_CELLS - 1)  # u = 0 lands in a clipped row (prob 2^-53)
    return row.astype(xp.int64), t


def _beta_eps(xp, rs, tables, use, shapes, dim, shape):
    """eps [J, P] for dimension `dim`: table inversion where use[:, dim], else the gamma ratio (rows with
    shape > 0), ones where there is no draw (a lesion)."""
    J, P = shape
    eps = xp.ones(shape)
    tab_rows = np.flatnonzero(use[:, dim])
    if tab_rows.size:
        u = rs.random_sample((tab_rows.size, P))
        row, t = _table_rows(xp, u)
        tab = xp.asarray(tables[tab_rows, dim])  # [n, N_CELLS, 8]
        k = xp.arange(tab_rows.size)[:, None]
        c = [tab[k, row, i] for i in range(4)]
        eps[xp.asarray(tab_rows)] = c[0] + t * (c[1] + t * (c[2] + t * c[3]))
    for j in np.flatnonzero(~use[:, dim].astype(bool) & (shapes[:, dim] > 0)):
        g = rs.standard_gamma(float(shapes[j, dim]), size=P)
        z = rs.standard_normal(size=P)
        eps[int(j)] = g / (g + 0.5 * z * z)
    return xp.maximum(eps, 1e-300)


def pf_filter_array(xp, model, outcome, valid, params, particles, seed, runs, m0, w0, signals):
    """Outputs [S, R, B, T] (pred_mean, vol_mean, sto_mean, ambiguity; NumPy) and collapses [S, R] of
    `model` with kernel params [S, 4] (models.kernel_params), computed with array module `xp`."""
    S, B, T = outcome.shape
    R, P = int(runs), int(particles)
    J = S * R
    prm = np.repeat(np.asarray(params, float), R, axis=0)  # row j = (subject j // R, run j % R)
    beta = model == "pf-beta"
    if beta:
        tables, use = betatable.tables_for(prm[:, :2])
        lam = prm[:, :2]
        with np.errstate(divide="ignore"):
            shapes = np.where(lam > 0, (1.0 - lam) * 0.5 / np.where(lam > 0, lam, 1.0), 0.0)
        eta = xp.asarray(1.0 - lam)
        v0, s0 = prm[:, 2], prm[:, 3]
    else:
        rate = xp.asarray(prm[:, :2])
        sigma = xp.asarray(prm[:, 2])[:, None]
        v0 = s0 = prm[:, 3]
    rs = xp.random.RandomState(int(seed) % (2**32))
    outs = [np.full((S, R, B, T), np.nan) for _ in range(4)]
    collapses = np.zeros(J, dtype=np.int64)
    obs = np.asarray(outcome, float)
    offsets = xp.arange(J, dtype=float)[:, None]
    grid = xp.arange(P, dtype=float)[None, :]
    flat_base = (xp.arange(J) * P)[:, None]
    for b in range(B):
        v = xp.repeat(xp.asarray(v0, float)[:, None], P, axis=1)
        sv = xp.repeat(xp.asarray(s0, float)[:, None], P, axis=1)
        m = xp.full((J, P), float(m0))
        w = xp.full((J, P), float(w0))
        logw = xp.full((J, P), -math.log(P))
        for t in range(T):
            live = np.repeat(np.asarray(valid[:, b, t], bool), R)
            if not live.any():
                continue
            o = xp.asarray(np.repeat(obs[:, b, t], R))[:, None]
            if beta:
                v = v * eta[:, 0:1] / _beta_eps(xp, rs, tables, use, shapes, 0, (J, P))
                sv = sv * eta[:, 1:2] / _beta_eps(xp, rs, tables, use, shapes, 1, (J, P))
            else:
                for arr_i, dim in ((0, 0), (1, 1)):
                    jump = rs.random_sample((J, P)) < rate[:, dim : dim + 1]
                    step = xp.where(jump, sigma * rs.standard_normal((J, P)), 0.0)
                    if arr_i == 0:
                        v = v * xp.exp(step)
                    else:
                        sv = sv * xp.exp(step)
            wt = xp.exp(logw - logw.max(axis=1, keepdims=True))
            wt = wt / wt.sum(axis=1, keepdims=True)
            pred = (wt * m).sum(axis=1)
            if signals:
                d = xp.log(v / sv)
                ed = (wt * d).sum(axis=1)
                sig = [(wt * v).sum(axis=1), (wt * sv).sum(axis=1), xp.maximum((wt * d * d).sum(axis=1) - ed * ed, 0.0)]
            pv = w + v
            tot = pv + sv
            e = o - m
            q = e * e / tot
            gain = pv / tot
            new_m = m + gain * e
            new_w = (1.0 - gain) * pv
            collapses += live & (0.5 * xp_to_numpy(q.min(axis=1)) > 745.0)
            new_logw = xp.log(wt) - 0.5 * q - 0.5 * xp.log(tot)
            new_logw = new_logw - new_logw.max(axis=1, keepdims=True)
            lv = xp.asarray(live)[:, None]
            m = xp.where(lv, new_m, m)
            w = xp.where(lv, new_w, w)
            logw = xp.where(lv, new_logw, logw)
            # batched systematic resampling of the rows with ESS < P/2
            nw = xp.exp(logw)
            nw = nw / nw.sum(axis=1, keepdims=True)
            need = (1.0 / (nw * nw).sum(axis=1)) < 0.5 * P
            need = need & lv[:, 0]
            if bool(need.any()):
                cum = xp.cumsum(nw, axis=1)
                cum[:, -1] = 1.0
                points = (rs.random_sample((J, 1)) + grid) / P
                idx = xp.searchsorted((cum + offsets).ravel(), (points + offsets).ravel())
                idx = xp.minimum(idx.reshape(J, P), flat_base + P - 1) - flat_base
                idx = xp.clip(idx, 0, P - 1)
                pick = need[:, None]
                v = xp.where(pick, xp.take_along_axis(v, idx, axis=1), v)
                sv = xp.where(pick, xp.take_along_axis(sv, idx, axis=1), sv)
                m = xp.where(pick, xp.take_along_axis(m, idx, axis=1), m)
                w = xp.where(pick, xp.take_along_axis(w, idx, axis=1), w)
                logw = xp.where(pick, -math.log(P), logw)
            rows = np.flatnonzero(live)
            s_idx, r_idx = rows // R, rows % R
            outs[0][s_idx, r_idx, b, t] = xp_to_numpy(pred)[rows]
            if signals:
                for k in range(3):
                    outs[k + 1][s_idx, r_idx, b, t] = xp_to_numpy(sig[k])[rows]
    return outs, collapses.reshape(S, R)


def xp_to_numpy(a):
    get = getattr(a, "get", None)
    return get() if callable(get) else np.asarray(a)
