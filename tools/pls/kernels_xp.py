"""Vectorised twins of kernels.py for any array module (NumPy on the CPU, CuPy on CUDA).

Same inputs, same outputs, written with whole-array operations so that CuPy can run
them on a GPU; with NumPy they are the reference the Numba kernels are tested against.
"""

from __future__ import annotations


def _xp(array):
    import numpy

    module = type(array).__module__.split(".")[0]
    if module == "cupy":
        import cupy

        return cupy
    return numpy


def orthonormalize_step(V, W, k, tol):
    xp = _xp(V)
    before = xp.sqrt((V * V).sum(axis=0))
    for _ in range(2):
        for j in range(k):
            V -= (W[j] * V).sum(axis=0) * W[j]
    after = xp.sqrt((V * V).sum(axis=0))
    exhausted = (before == 0) | (after <= tol * before)
    safe = xp.where(exhausted, 1.0, after)
    W[k] = xp.where(exhausted, 0.0, V / safe)
    return exhausted


def refit_coefficients(T, Y, rcond):
    xp = _xp(T)
    K, n, Bt = T.shape
    B = Y.shape[1]
    if Bt == 1:
        T = xp.broadcast_to(T, (K, n, B))
    G = xp.einsum("aib,cib->bac", T, T)
    r = xp.einsum("aib,ib->ba", T, Y)
    vals, vecs = xp.linalg.eigh(G)
    keep = (vals > rcond * vals[:, -1:]) & (vals > 0)
    inv = xp.where(keep, 1.0 / xp.where(keep, vals, 1.0), 0.0)
    proj = xp.einsum("bca,bc->ba", vecs, r) * inv
    return xp.einsum("bca,ba->bc", vecs, proj)


def combine_scores(S, beta):
    xp = _xp(S)
    K, n, Bs = S.shape
    if Bs == 1:
        return S[:, :, 0].T @ beta.T
    return xp.einsum("kib,bk->ib", S, beta)


def pearson_atanh(A, Y, clip, min_var):
    xp = _xp(A)
    da = A - A.mean(axis=0)
    dy = Y - Y.mean(axis=0)
    n = A.shape[0]
    saa = (da * da).sum(axis=0)
    syy = (dy * dy).sum(axis=0)
    say = (da * dy).sum(axis=0)
    bad = (saa / n < min_var) | (syy / n < min_var) | ~xp.isfinite(saa + syy + say)
    denom = xp.sqrt(xp.where(bad, 1.0, saa * syy))
    r = xp.where(bad, 0.0, xp.clip(say / denom, -clip, clip))
    return r, xp.arctanh(r), bad


def standardize_columns(Ytr, Yte, min_sd):
    xp = _xp(Ytr)
    mu = Ytr.mean(axis=0)
    sd = Ytr.std(axis=0, ddof=1)
    flat = sd < min_sd
    sd = xp.where(flat, 1.0, sd)
    return (Ytr - mu) / sd, (Yte - mu) / sd, flat


def sum_squares_columns(A, Y):
    return ((A - Y) ** 2).sum(axis=0), (Y * Y).sum(axis=0)


def nb_all_splits(X, y, w, train, test, K, zero_sd, flat_y, tol, rcond, clip, min_var):
    xp = _xp(X)
    n, p = X.shape
    J, m = train.shape
    cols = xp.arange(J)[None, :]
    centre = X.mean(axis=0)
    Xc = X - centre
    Mw = xp.zeros((n, J))
    Mw[train.T, cols] = w[train.T]
    S0 = Mw.sum(axis=0)
    # weighted train moments, two-pass
    mu_c = (Xc.T @ Mw) / S0
    rows = Xc[train]  # J x m x p
    dev = rows - mu_c.T[:, None, :]
    ss = xp.einsum("jm,jmp->pj", w[train], dev * dev)
    sd = xp.sqrt(ss / S0 * m / (m - 1))
    zero = sd <= zero_sd * xp.maximum(1.0, xp.abs(mu_c + centre[:, None]))
    inv = xp.where(zero, 0.0, 1.0 / xp.where(zero, 1.0, sd))
    # y standardised per split
    wt = w[train]
    my = (wt * y[train]).sum(axis=1) / S0
    sdy = xp.sqrt((wt * (y[train] - my[:, None]) ** 2).sum(axis=1) / S0 * m / (m - 1))
    flat = sdy < flat_y
    Ys = (y[:, None] - my) / xp.where(flat, 1.0, sdy)
    # Lanczos over all splits
    W = xp.zeros((K, p, J))
    U = xp.zeros((K, n, J))
    ranks = xp.full(J, K)
    R = Mw * Ys
    for k in range(K):
        V = xp.ascontiguousarray(inv * (Xc.T @ R - mu_c * R.sum(axis=0)))
        ex = orthonormalize_step(V, W, k, tol)
        ranks = xp.where(ex & (ranks == K), k, ranks)
        A = inv * W[k]
        U[k] = Xc @ A - (mu_c * A).sum(axis=0)
        R = Mw * U[k]
    # weighted OLS refit on the train scores, prediction and weighted Pearson on the test rows
    Ttr = U[:, train.T, cols] * xp.sqrt(w[train.T])  # K x m x J
    beta = refit_coefficients(xp.ascontiguousarray(Ttr), Ys[train.T, cols] * xp.sqrt(w[train.T]), rcond)
    yhat = combine_scores(xp.ascontiguousarray(U[:, test.T, cols]), beta)
    yte = Ys[test.T, cols]
    wte = w[test.T]
    sw = wte.sum(axis=0)
    da = yhat - (wte * yhat).sum(axis=0) / sw
    dy = yte - (wte * yte).sum(axis=0) / sw
    saa, syy, say = (wte * da * da).sum(axis=0), (wte * dy * dy).sum(axis=0), (wte * da * dy).sum(axis=0)
    bad = (saa / sw < min_var) | (syy / sw < min_var) | ~xp.isfinite(saa + syy + say) | flat
    r = xp.where(bad, 0.0, xp.clip(say / xp.sqrt(xp.where(bad, 1.0, saa * syy)), -clip, clip))
    r2 = 1.0 - (wte * (yhat - yte) ** 2).sum(axis=0) / xp.maximum((wte * yte * yte).sum(axis=0), 1e-300)
    return r, xp.arctanh(r), bad, r2, W, ranks, zero.sum(axis=0)
