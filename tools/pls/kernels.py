"""Numba kernels for the batched PLS1 fits: the per-column loops between BLAS GEMMs.

Every kernel works on many right-hand sides at once (columns b = observed y and its
permutations) that share one X. Python owns the GEMMs (X.T @ V, X @ W), these kernels
the column-wise work that NumPy cannot vectorise without temporaries. Columns are
independent, so `prange` over them gives the same bytes at any thread count.
`kernels_xp.py` holds the vectorised NumPy/CuPy twins, which the tests use as reference.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def orthonormalize_step(V, W, k, tol):
    """Make column b of V (p x B) orthonormal to W[0..k-1][:, b], normalise it, store it in W[k].

    Two passes of classical Gram-Schmidt (full re-orthogonalisation keeps the Krylov
    basis orthonormal for K up to ~20). A column whose norm collapses below
    `tol` x its norm before projection has exhausted its Krylov space: it becomes zero
    and `exhausted[b]` is set (that right-hand side is truncated to k components).
    """
    p, B = V.shape
    exhausted = np.zeros(B, dtype=np.bool_)
    for b in prange(B):
        before = 0.0
        for i in range(p):
            before += V[i, b] * V[i, b]
        before = np.sqrt(before)
        for _ in range(2):
            for j in range(k):
                dot = 0.0
                for i in range(p):
                    dot += W[j, i, b] * V[i, b]
                for i in range(p):
                    V[i, b] -= dot * W[j, i, b]
        after = 0.0
        for i in range(p):
            after += V[i, b] * V[i, b]
        after = np.sqrt(after)
        if before == 0.0 or after <= tol * before:
            exhausted[b] = True
            for i in range(p):
                W[k, i, b] = 0.0
        else:
            for i in range(p):
                W[k, i, b] = V[i, b] / after
    return exhausted


@njit(cache=True, parallel=True)
def refit_coefficients(T, Y, rcond):
    """OLS of Y[:, b] on the K score columns T[:, :, b] (K x n x Bt, Bt = 1 broadcasts): beta (B x K).

    beta = (T'T)^+ T'y with a symmetric pseudo-inverse, so exhausted (zero) score
    columns get a zero coefficient instead of breaking the solve.
    """
    K, n, Bt = T.shape
    B = Y.shape[1]
    beta = np.zeros((B, K))
    basis_of = np.arange(B) if Bt > 1 else np.zeros(B, dtype=np.int64)  # Bt == 1: one basis for all
    for b in prange(B):
        t = basis_of[b]
        G = np.zeros((K, K))
        r = np.zeros(K)
        for a in range(K):
            for c in range(a, K):
                s = 0.0
                for i in range(n):
                    s += T[a, i, t] * T[c, i, t]
                G[a, c] = s
                G[c, a] = s
            s = 0.0
            for i in range(n):
                s += T[a, i, t] * Y[i, b]
            r[a] = s
        vals, vecs = np.linalg.eigh(G)
        top = vals[K - 1]
        for a in range(K):
            if vals[a] > rcond * top and vals[a] > 0.0:
                proj = 0.0
                for c in range(K):
                    proj += vecs[c, a] * r[c]
                proj /= vals[a]
                for c in range(K):
                    beta[b, c] += vecs[c, a] * proj
    return beta


@njit(cache=True, parallel=True)
def combine_scores(S, beta):
    """Predictions yhat[:, b] = sum_k beta[b, k] S[k, :, b] (S is K x n x Bs, Bs = 1 broadcasts)."""
    K, n, Bs = S.shape
    B = beta.shape[0]
    out = np.zeros((n, B))
    basis_of = np.arange(B) if Bs > 1 else np.zeros(B, dtype=np.int64)
    for b in prange(B):
        s_col = basis_of[b]
        for k in range(K):
            c = beta[b, k]
            if c != 0.0:
                for i in range(n):
                    out[i, b] += c * S[k, i, s_col]
    return out


@njit(cache=True, parallel=True)
def pearson_atanh(A, Y, clip, min_var):
    """Column-wise Pearson r between A[:, b] and Y[:, b], z = atanh(clip(r)), and degenerate flags.

    r is 0 (and the column flagged) when either side has variance below `min_var`.
    """
    n, B = A.shape
    r = np.zeros(B)
    z = np.zeros(B)
    bad = np.zeros(B, dtype=np.bool_)
    for b in prange(B):
        ma = 0.0
        my = 0.0
        for i in range(n):
            ma += A[i, b]
            my += Y[i, b]
        ma /= n
        my /= n
        saa = 0.0
        syy = 0.0
        say = 0.0
        for i in range(n):
            da = A[i, b] - ma
            dy = Y[i, b] - my
            saa += da * da
            syy += dy * dy
            say += da * dy
        if saa / n < min_var or syy / n < min_var or not np.isfinite(saa + syy + say):
            bad[b] = True
            continue
        rho = say / np.sqrt(saa * syy)
        rho = min(max(rho, -clip), clip)
        r[b] = rho
        z[b] = np.arctanh(rho)
    return r, z, bad


@njit(cache=True, parallel=True)
def standardize_columns(Ytr, Yte, min_sd):
    """Centre and scale each column of Ytr by its own mean/sd (ddof=1), apply the same map to Yte.

    Returns the two standardised blocks and a flag per column whose train sd is below min_sd.
    """
    n, B = Ytr.shape
    m = Yte.shape[0]
    out_tr = np.empty((n, B))
    out_te = np.empty((m, B))
    flat = np.zeros(B, dtype=np.bool_)
    for b in prange(B):
        mu = 0.0
        for i in range(n):
            mu += Ytr[i, b]
        mu /= n
        ss = 0.0
        for i in range(n):
            d = Ytr[i, b] - mu
            ss += d * d
        sd = np.sqrt(ss / (n - 1))
        if sd < min_sd:
            flat[b] = True
            sd = 1.0
        for i in range(n):
            out_tr[i, b] = (Ytr[i, b] - mu) / sd
        for i in range(m):
            out_te[i, b] = (Yte[i, b] - mu) / sd
    return out_tr, out_te, flat


@njit(cache=True, parallel=True)
def sum_squares_columns(A, Y):
    """Per column: sum (A - Y)^2 and sum Y^2 (PRESS and the total sum of squares about the train mean 0)."""
    n, B = A.shape
    press = np.zeros(B)
    total = np.zeros(B)
    for b in prange(B):
        s1 = 0.0
        s2 = 0.0
        for i in range(n):
            d = A[i, b] - Y[i, b]
            s1 += d * d
            s2 += Y[i, b] * Y[i, b]
        press[b] = s1
        total[b] = s2
    return press, total


# ---------------------------------------------------------------- every split of one y at once (NB)


@njit(cache=True, parallel=True)
def train_moments(X, train, min_rel):
    """Mean and sd (ddof=1, two-pass) of every column of X over each split's train rows: p x J each.

    A column whose sd <= min_rel * max(1, |mean|) is constant on that train half: its sd is
    inf, so 1/sd = 0 drops it from that split (as standardize_split does).
    """
    n, p = X.shape
    J, m = train.shape
    mu = np.zeros((p, J))
    sd = np.zeros((p, J))
    for j in prange(J):
        s = np.zeros(p)
        for t in range(m):
            i = train[j, t]
            for c in range(p):
                s[c] += X[i, c]
        for c in range(p):
            s[c] /= m
        ss = np.zeros(p)
        for t in range(m):
            i = train[j, t]
            for c in range(p):
                d = X[i, c] - s[c]
                ss[c] += d * d
        for c in range(p):
            mu[c, j] = s[c]
            v = np.sqrt(ss[c] / (m - 1))
            sd[c, j] = np.inf if v <= min_rel * max(1.0, abs(s[c])) else v
    return mu, sd


@njit(cache=True, parallel=True)
def heldout_corr(U, Ys, train, test, rcond, clip, min_var):
    """Per split j: OLS of Ys[train_j, j] on the K train scores U[:, train_j, j], predict the test rows,

    Pearson r with Ys[test_j, j], z = atanh(clip(r)), degenerate flag, and held-out R^2 about
    the train mean (Ys is train-standardised). U (K x n x J) holds the scores of every row.
    """
    K, n, J = U.shape
    m1 = train.shape[1]
    m2 = test.shape[1]
    r = np.zeros(J)
    z = np.zeros(J)
    r2 = np.zeros(J)
    bad = np.zeros(J, dtype=np.bool_)
    for j in prange(J):
        G = np.zeros((K, K))
        g = np.zeros(K)
        for a in range(K):
            for c in range(a, K):
                s = 0.0
                for t in range(m1):
                    i = train[j, t]
                    s += U[a, i, j] * U[c, i, j]
                G[a, c] = s
                G[c, a] = s
            s = 0.0
            for t in range(m1):
                i = train[j, t]
                s += U[a, i, j] * Ys[i, j]
            g[a] = s
        vals, vecs = np.linalg.eigh(G)
        beta = np.zeros(K)
        top = vals[K - 1]
        for a in range(K):
            if vals[a] > rcond * top and vals[a] > 0.0:
                proj = 0.0
                for c in range(K):
                    proj += vecs[c, a] * g[c]
                proj /= vals[a]
                for c in range(K):
                    beta[c] += vecs[c, a] * proj
        yhat = np.zeros(m2)
        ma = 0.0
        my = 0.0
        press = 0.0
        total = 0.0
        for t in range(m2):
            i = test[j, t]
            acc = 0.0
            for a in range(K):
                acc += beta[a] * U[a, i, j]
            yhat[t] = acc
            ma += acc
            my += Ys[i, j]
            d = acc - Ys[i, j]
            press += d * d
            total += Ys[i, j] * Ys[i, j]
        r2[j] = 1.0 - press / max(total, 1e-300)
        ma /= m2
        my /= m2
        saa = 0.0
        syy = 0.0
        say = 0.0
        for t in range(m2):
            da = yhat[t] - ma
            dy = Ys[test[j, t], j] - my
            saa += da * da
            syy += dy * dy
            say += da * dy
        if saa / m2 < min_var or syy / m2 < min_var or not np.isfinite(saa + syy + say):
            bad[j] = True
            continue
        rho = say / np.sqrt(saa * syy)
        rho = min(max(rho, -clip), clip)
        r[j] = rho
        z[j] = np.arctanh(rho)
    return r, z, bad, r2


@njit(cache=True)
def lanczos_all_splits(Xc, mu_c, inv, mask, Ys, K, tol):
    """PLS1 bases of every split at once (the NB pass): W (K x p x J), scores U (K x n x J), ranks (J).

    Split j is the 0/1 train mask column mask[:, j]; its standardised X is (Xc - mu_c[:, j]) * inv[:, j].
    Each step is one GEMM X'(mask * u) and one GEMM X (inv * w) over all splits (BLAS), the
    per-column algebra in between is loops; see fused.py for the identities.
    """
    n, p = Xc.shape
    J = mask.shape[1]
    W = np.zeros((K, p, J))
    U = np.zeros((K, n, J))
    ranks = np.full(J, K)
    XcT = Xc.T
    R = mask * Ys
    for k in range(K):
        G = XcT @ R
        colsum = R.sum(axis=0)
        V = np.empty((p, J))
        for c in range(p):
            for j in range(J):
                V[c, j] = inv[c, j] * (G[c, j] - mu_c[c, j] * colsum[j])
        ex = orthonormalize_step(V, W, k, tol)
        for j in range(J):
            if ex[j] and ranks[j] == K:
                ranks[j] = k
        A = inv * W[k]
        H = Xc @ A
        shift = (mu_c * A).sum(axis=0)
        for i in range(n):
            for j in range(J):
                U[k, i, j] = H[i, j] - shift[j]
                R[i, j] = mask[i, j] * U[k, i, j]
    return W, U, ranks
