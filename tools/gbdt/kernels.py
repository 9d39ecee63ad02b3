"""Numba kernels of gbdt-poison: aggregated BoostIn, batched feasible projection, leaf refit.

Each kernel does one step on plain arrays; Python owns the schedule. No eager
signatures (they would compile at import and slow `--help`).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

# ---------------------------------------------------------------- BoostIn, summed over the validation set


@njit(cache=True)
def boostin_aggregate(L_tr, L_v, leaf_values, y_tr, y_v, lr, lam, b0):
    """I_i = sum_t Gv_t[l_it] * d_it for every train row i (binary logloss).

    L_tr (n,T) and L_v (m,T) are leaf indices, leaf_values (T, max_leaves) the
    shrunk leaf values with the initial score b0 taken out of tree 0. Per round t
    the raw scores accumulate over the previous trees, as BoostIn prescribes.
    Serial on purpose: one pass per tree is memory-bound, and 3 parallel regions per
    tree spent more time in thread barriers than in work on a shared 2-core machine
    (measured 10x slower than NumPy there).
    """
    n, T = L_tr.shape
    m = L_v.shape[0]
    max_leaves = leaf_values.shape[1]
    F_tr = np.full(n, b0)
    F_v = np.full(m, b0)
    g = np.empty(n)
    h = np.empty(n)
    out = np.zeros(n)
    for t in range(T):
        for i in range(n):
            p = 1.0 / (1.0 + np.exp(-F_tr[i]))
            g[i] = p - y_tr[i]
            h[i] = p * (1.0 - p)
        H = np.zeros(max_leaves)
        for i in range(n):
            H[L_tr[i, t]] += h[i]
        Gv = np.zeros(max_leaves)
        for j in range(m):
            p = 1.0 / (1.0 + np.exp(-F_v[j]))
            Gv[L_v[j, t]] += p - y_v[j]
        for i in range(n):
            leaf = L_tr[i, t]
            value = leaf_values[t, leaf]
            d = lr * (g[i] + value * h[i]) / (H[leaf] + lam)
            out[i] += Gv[leaf] * d
            F_tr[i] += value
        for j in range(m):
            F_v[j] += leaf_values[t, L_v[j, t]]
    return out


# ---------------------------------------------------------------- leaf refit (fast oracle)


@njit(cache=True)
def leaf_refit_scores(L_tr, y_tr, L_v, n_leaves, lr, lam, b0):
    """Validation raw scores of a model whose tree structures are kept and leaf values refit.

    Round by round, each leaf gets LightGBM's Newton value -lr * G / (H + lam) from
    the gradients of the rows now routed to it (the LeafRefit idea of tree_influence).
    """
    n, T = L_tr.shape
    m = L_v.shape[0]
    F_tr = np.full(n, b0)
    F_v = np.full(m, b0)
    for t in range(T):
        nl = n_leaves[t]
        G = np.zeros(nl)
        H = np.zeros(nl)
        for i in range(n):
            p = 1.0 / (1.0 + np.exp(-F_tr[i]))
            G[L_tr[i, t]] += p - y_tr[i]
            H[L_tr[i, t]] += p * (1.0 - p)
        values = np.empty(nl)
        for leaf in range(nl):
            values[leaf] = -lr * G[leaf] / (H[leaf] + lam)
        for i in range(n):
            F_tr[i] += values[L_tr[i, t]]
        for j in range(m):
            F_v[j] += values[L_v[j, t]]
    return F_v


# ---------------------------------------------------------------- projection onto ellipsoid ∩ box ∩ lattice


@njit(cache=True)
def _maha2(delta, U, s):
    k = delta.shape[0]
    total = 0.0
    for a in range(k):
        w = 0.0
        for b in range(k):
            w += U[b, a] * delta[b]
        total += w * w / s[a]
    return total


@njit(cache=True)
def _project_ellipsoid(y, x0, U, s, eps):
    """Euclidean projection of y onto {x : (x-x0)' (U diag(s) U')^-1 (x-x0) <= eps^2}."""
    k = y.shape[0]
    w = np.empty(k)
    for a in range(k):
        acc = 0.0
        for b in range(k):
            acc += U[b, a] * (y[b] - x0[b])
        w[a] = acc
    q = 0.0
    sw2 = 0.0
    for a in range(k):
        q += w[a] * w[a] / s[a]
        sw2 += s[a] * w[a] * w[a]
    eps2 = eps * eps
    if q <= eps2:
        return y.copy()
    # phi(lam) = sum s w^2 / (s+lam)^2 - eps^2 is decreasing and convex: Newton from the left,
    # kept inside a bisection bracket [lo, hi] with phi(hi) <= 0.
    lo = 0.0
    hi = np.sqrt(sw2) / eps
    lam = 0.0
    for _ in range(100):
        phi = -eps2
        dphi = 0.0
        for a in range(k):
            r = s[a] + lam
            phi += s[a] * w[a] * w[a] / (r * r)
            dphi -= 2.0 * s[a] * w[a] * w[a] / (r * r * r)
        if phi > 0.0:
            lo = lam
        else:
            hi = lam
        if abs(phi) <= 1e-13 * eps2:
            break
        step = lam - phi / dphi if dphi < 0.0 else 0.5 * (lo + hi)
        if not (lo < step < hi):
            step = 0.5 * (lo + hi)
        lam = step
        if hi - lo <= 1e-15 * (1.0 + hi):
            break
    out = x0.copy()
    for a in range(k):
        z = s[a] * w[a] / (s[a] + lam)
        for b in range(k):
            out[b] += U[b, a] * z
    return out


@njit(cache=True)
def _to_original(z, mean, sd, logmask):
    v = z * sd + mean
    return np.expm1(v) if logmask else v


@njit(cache=True)
def _to_standard(x, mean, sd, logmask):
    v = np.log1p(x) if logmask else x
    return (v - mean) / sd


@njit(cache=True)
def _feasible(x, x0, U, s, eps, lo, hi, tol):
    if _maha2(x - x0, U, s) > eps * eps * (1.0 + tol) + tol:
        return False
    for a in range(x.shape[0]):
        if x[a] < lo[a] - tol or x[a] > hi[a] + tol:
            return False
    return True


@njit(cache=True)
def _on_lattice(x, x0, t, int_mask, mean, sd, logmask):
    """x0 + t (x - x0) with integer columns rounded in original units."""
    k = x.shape[0]
    out = np.empty(k)
    for a in range(k):
        v = x0[a] + t * (x[a] - x0[a])
        if int_mask[a]:
            v = _to_standard(np.round(_to_original(v, mean[a], sd[a], logmask[a])), mean[a], sd[a], logmask[a])
        out[a] = v
    return out


@njit(cache=True)
def project_one(y, x0, U, s, eps, lo, hi, int_mask, mean, sd, logmask, max_iter, tol):
    """P_i(y): Dykstra onto ellipsoid ∩ box, a pull towards x0 if Dykstra stopped early, then the lattice."""
    k = y.shape[0]
    x = y.copy()
    p = np.zeros(k)
    q = np.zeros(k)
    for _ in range(max_iter):
        a = _project_ellipsoid(x + p, x0, U, s, eps)
        p = x + p - a
        b = np.minimum(np.maximum(a + q, lo), hi)
        q = a + q - b
        # converged when the iterate stops moving AND both projections agree (x alone can stall)
        change = 0.0
        for j in range(k):
            change += (b[j] - x[j]) ** 2 + (a[j] - b[j]) ** 2
        x = b
        if change <= tol * tol:
            break
    # Dykstra's last iterate is in the box; if it is still a hair outside the ellipsoid,
    # shrink it towards x0 (x0 lies in both convex sets, so the result is feasible).
    m2 = _maha2(x - x0, U, s)
    if m2 > eps * eps:
        x = x0 + (x - x0) * (eps / np.sqrt(m2)) * (1.0 - 1e-12)
    has_int = False
    for j in range(k):
        if int_mask[j]:
            has_int = True
    if not has_int:
        return x
    cand = _on_lattice(x, x0, 1.0, int_mask, mean, sd, logmask)
    if _feasible(cand, x0, U, s, eps, lo, hi, 1e-9):
        return cand
    # Rounding left the region: bisection on t for round(x0 + t (x - x0)); t = 0 is x0 itself.
    t_lo = 0.0
    t_hi = 1.0
    best = _on_lattice(x, x0, 0.0, int_mask, mean, sd, logmask)
    for _ in range(40):
        t = 0.5 * (t_lo + t_hi)
        cand = _on_lattice(x, x0, t, int_mask, mean, sd, logmask)
        if _feasible(cand, x0, U, s, eps, lo, hi, 1e-9):
            best = cand
            t_lo = t
        else:
            t_hi = t
    return best


@njit(cache=True, parallel=True)
def project_rows(Y, X0, U, s, eps, lo, hi, int_mask, mean, sd, logmask, max_iter, tol):
    """Row-wise P_i for a batch: Y, X0 (B,k); U (B,k,k); s, lo, hi, mean, sd (B,k); masks (B,k); eps (B,)."""
    B = Y.shape[0]
    out = np.empty_like(Y)
    for i in prange(B):
        out[i] = project_one(
            Y[i], X0[i], U[i], s[i], eps[i], lo[i], hi[i], int_mask[i], mean[i], sd[i], logmask[i], max_iter, tol
        )
    return out


@njit(cache=True, parallel=True)
def mahalanobis_rows(D, U, s):
    """sqrt(d_i' Sigma_i^-1 d_i) for each row of D (B,k), Sigma_i = U_i diag(s_i) U_i'."""
    B = D.shape[0]
    out = np.empty(B)
    for i in prange(B):
        out[i] = np.sqrt(_maha2(D[i], U[i], s[i]))
    return out


# ---------------------------------------------------------------- threshold search: first-order move scores


@njit(cache=True)
def staged_leaf_sums(L, leaf_values, y, b0):
    """Per round t, the sums G_t[l], H_t[l] of the rows' logloss gradient and hessian over each leaf,
    with raw scores accumulated over the previous trees (as the trees were grown)."""
    n, T = L.shape
    width = leaf_values.shape[1]
    G = np.zeros((T, width))
    H = np.zeros((T, width))
    F = np.full(n, b0)
    for t in range(T):
        for i in range(n):
            p = 1.0 / (1.0 + np.exp(-F[i]))
            leaf = L[i, t]
            G[t, leaf] += p - y[i]
            H[t, leaf] += p * (1.0 - p)
            F[i] += leaf_values[t, leaf]
    return G, H


@njit(cache=True)
def move_scores(L_rows, L_cand, cand_row, y_rows, G, H, Gv, leaf_values, lr, lam, b0):
    """First-order change of the validation loss when one poisoned row takes a candidate position.

    Row b = cand_row[c] leaves its leaves L_rows[b] for the candidate's leaves L_cand[c]: in each
    round its own gradient/hessian (staged along the old and the new path) come out of the old
    leaf's sums and into the new one's, the two Newton leaf values -lr G / (H + lam) change, and
    the validation loss changes by Gv_t[l] times each change (Gv: summed validation gradients
    per leaf of the current model). Other rows' gradients are held fixed (the TracIn/BoostIn
    approximation), so one pass costs O(T) per candidate.
    """
    C, T = L_cand.shape
    out = np.zeros(C)
    for c in range(C):
        b = cand_row[c]
        F_old = b0
        F_new = b0
        total = 0.0
        for t in range(T):
            p = 1.0 / (1.0 + np.exp(-F_old))
            g_old = p - y_rows[b]
            h_old = p * (1.0 - p)
            p = 1.0 / (1.0 + np.exp(-F_new))
            g_new = p - y_rows[b]
            h_new = p * (1.0 - p)
            a = L_rows[b, t]
            leaf = L_cand[c, t]
            v_a = -lr * G[t, a] / (H[t, a] + lam)
            if a == leaf:
                total += Gv[t, a] * (-lr * (G[t, a] - g_old + g_new) / (H[t, a] - h_old + h_new + lam) - v_a)
            else:
                v_l = -lr * G[t, leaf] / (H[t, leaf] + lam)
                total += Gv[t, a] * (-lr * (G[t, a] - g_old) / (H[t, a] - h_old + lam) - v_a)
                total += Gv[t, leaf] * (-lr * (G[t, leaf] + g_new) / (H[t, leaf] + h_new + lam) - v_l)
            F_old += leaf_values[t, a]
            F_new += leaf_values[t, leaf]
        out[c] = total
    return out
