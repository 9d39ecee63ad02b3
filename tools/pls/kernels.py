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

ORTHO_BLOCK = 64  # columns per parallel block of orthonormalize_step


@njit(cache=True, parallel=True)
def orthonormalize_step(V, W, k, tol):
    """Make column b of V (p x B) orthonormal to W[0..k-1][:, b], normalise it, store it in W[k].

    Two passes of classical Gram-Schmidt (full re-orthogonalisation keeps the Krylov
    basis orthonormal for K up to ~20). A column whose norm collapses below
    `tol` x its norm before projection has exhausted its Krylov space: it becomes zero
    and `exhausted[b]` is set (that right-hand side is truncated to k components).
    The loops run over rows i outside and columns b inside (unit stride in the row-major
    arrays); each column's sums still run over i in order, so the result is that of the
    column-by-column loop, bit for bit (a column-outer loop strode B x 8 bytes per element:
    2.9x slower at p = 401, B = 256).
    """
    p, B = V.shape
    exhausted = np.zeros(B, dtype=np.bool_)
    n_blocks = (B + ORTHO_BLOCK - 1) // ORTHO_BLOCK
    for blk in prange(n_blocks):
        lo = blk * ORTHO_BLOCK
        hi = min(B, lo + ORTHO_BLOCK)
        m = hi - lo
        before = np.zeros(m)
        for i in range(p):
            for b in range(m):
                before[b] += V[i, lo + b] * V[i, lo + b]
        dot = np.empty(m)
        for _ in range(2):
            for j in range(k):
                dot[:] = 0.0
                for i in range(p):
                    for b in range(m):
                        dot[b] += W[j, i, lo + b] * V[i, lo + b]
                for i in range(p):
                    for b in range(m):
                        V[i, lo + b] -= dot[b] * W[j, i, lo + b]
        after = np.zeros(m)
        for i in range(p):
            for b in range(m):
                after[b] += V[i, lo + b] * V[i, lo + b]
        for b in range(m):
            before[b] = np.sqrt(before[b])
            after[b] = np.sqrt(after[b])
            if before[b] == 0.0 or after[b] <= tol * before[b]:
                exhausted[lo + b] = True
                after[b] = 0.0
        for i in range(p):
            for b in range(m):
                W[k, i, lo + b] = V[i, lo + b] / after[b] if after[b] > 0.0 else 0.0
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
        beta[b] = _pinv_solve(G, r, rcond)
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
#
# One function, no threads: the J splits of NB differ only in which rows are train rows, so
# with the train half of split j as a weight column Mw[:, j] (w_i on its train rows, 0 elsewhere)
# every product of the held-out refit is one GEMM over all splits (see fused.py). The loops in
# between run over splits innermost, on contiguous p x J / n x J blocks, so they vectorise.


@njit(cache=True)
def nb_all_splits(X, y, w, train, test, K, zero_sd, flat_y, tol, rcond, clip, min_var):
    """PLS1 held-out refit of y on every split at once (NB-asymptotic's observed pass).

    X (n x p), y (n), w (n) observation weights (ones = unweighted), train (J x m) and test
    (J x m2) row indices. Returns r, z, degenerate, held-out R^2 (J each), the bases W
    (K x p x J, standardised space), the rank reached per split and the dropped columns per split.
    Same numbers as the split-by-split loop (methods.split_pass), up to rounding.
    """
    J = train.shape[0]
    centre, Xc, Mw, S0 = _centred_and_masks(X, w, train)
    mu_c, inv, dropped = _split_moments(centre, Xc, Mw, S0, w, train, zero_sd)
    Ys, flat = _standardised_y(y, w, train, S0, flat_y)
    W, U, ranks, Gtr, gtr = _lanczos(Xc, mu_c, inv, Mw, Ys, K, tol)
    r, z, bad, r2 = _refit_and_score(U, Ys, w, test, Gtr, gtr, rcond, clip, min_var)
    for j in range(J):
        bad[j] = bad[j] or flat[j]
        if bad[j]:
            r[j] = 0.0
            z[j] = 0.0
    return r, z, bad, r2, W, ranks, dropped


@njit(cache=True)
def _centred_and_masks(X, w, train):
    """Global column means, X minus them (keeps the GEMMs well conditioned), Mw and the sum of w per split."""
    n, p = X.shape
    J, m = train.shape
    centre = np.zeros(p)
    for i in range(n):
        for c in range(p):
            centre[c] += X[i, c]
    for c in range(p):
        centre[c] /= n
    Xc = np.empty((n, p))
    for i in range(n):
        for c in range(p):
            Xc[i, c] = X[i, c] - centre[c]
    Mw = np.zeros((n, J))
    S0 = np.zeros(J)
    for j in range(J):
        for t in range(m):
            i = train[j, t]
            Mw[i, j] = w[i]
            S0[j] += w[i]
    return centre, Xc, Mw, S0


@njit(cache=True)
def _split_moments(centre, Xc, Mw, S0, w, train, zero_sd):
    """Weighted train-half mean (of Xc) and 1/sd of every column on every split, p x J each.

    sd is m/(m-1) x the weighted variance (unit weights: ddof=1). Sums come from two GEMMs;
    where the one-pass variance loses more than three digits to cancellation (a column
    (nearly) constant on that train half) it is recomputed two-pass over the train rows. A
    column with sd <= zero_sd x max(1, |mean|) is constant there: 1/sd = 0 drops it.
    """
    n, p = Xc.shape
    J, m = train.shape
    S1 = np.dot(Xc.T, Mw)
    S2 = np.dot((Xc * Xc).T, Mw)
    mu_c = np.empty((p, J))
    inv = np.empty((p, J))
    dropped = np.zeros(J, dtype=np.int64)
    for c in range(p):
        for j in range(J):
            mu = S1[c, j] / S0[j]
            ss = S2[c, j] - S0[j] * mu * mu
            if ss <= 1e-3 * S2[c, j]:
                ss = 0.0
                for t in range(m):
                    i = train[j, t]
                    d = Xc[i, c] - mu
                    ss += w[i] * d * d
            sd = np.sqrt(ss / S0[j] * m / (m - 1))
            mu_c[c, j] = mu
            if sd <= zero_sd * max(1.0, abs(mu + centre[c])):
                inv[c, j] = 0.0
                dropped[j] += 1
            else:
                inv[c, j] = 1.0 / sd
    return mu_c, inv, dropped


@njit(cache=True)
def _standardised_y(y, w, train, S0, flat_y):
    """y standardised with each split's weighted train mean and sd (n x J); flags flat train halves."""
    n = y.shape[0]
    J, m = train.shape
    Ys = np.empty((n, J))
    flat = np.zeros(J, dtype=np.bool_)
    for j in range(J):
        mu = 0.0
        for t in range(m):
            i = train[j, t]
            mu += w[i] * y[i]
        mu /= S0[j]
        ss = 0.0
        for t in range(m):
            i = train[j, t]
            d = y[i] - mu
            ss += w[i] * d * d
        sd = np.sqrt(ss / S0[j] * m / (m - 1))
        if sd < flat_y:
            flat[j] = True
            sd = 1.0
        for i in range(n):
            Ys[i, j] = (y[i] - mu) / sd
    return Ys, flat


@njit(cache=True)
def _lanczos(Xc, mu_c, inv, Mw, Ys, K, tol):
    """Golub-Kahan / Lanczos PLS1 on every split: W (K x p x J), scores U (K x n x J) of every row, ranks,
    and the weighted train Gram of the scores Gtr (K x K x J) and their products with y gtr (K x J).

    Split j's standardised X is (Xc - mu_c[:, j]) * inv[:, j]; its weighted X'(w u) over the train
    rows is inv * (Xc'(Mw u) - mu_c sum(Mw u)), and its scores X w are Xc (inv w) - mu_c'(inv w).
    """
    n, p = Xc.shape
    J = Mw.shape[1]
    W = np.zeros((K, p, J))
    U = np.empty((K, n, J))
    Gtr = np.zeros((K, K, J))
    gtr = np.zeros((K, J))
    ranks = np.full(J, K)
    R = Mw * Ys
    G = np.empty((p, J))
    H = np.empty((n, J))
    V = np.empty((p, J))
    A = np.empty((p, J))
    before = np.zeros(J)
    dot = np.zeros(J)
    colsum = np.zeros(J)  # sum of R per split (0 up to rounding: train rows are centred)
    shift = np.zeros(J)
    for i in range(n):
        for j in range(J):
            colsum[j] += R[i, j]
    for k in range(K):
        np.dot(Xc.T, R, G)
        before[:] = 0.0
        for c in range(p):
            for j in range(J):
                v = inv[c, j] * (G[c, j] - mu_c[c, j] * colsum[j])
                V[c, j] = v
                before[j] += v * v
        for _ in range(2):  # classical Gram-Schmidt twice: full re-orthogonalisation
            for a in range(k):
                dot[:] = 0.0
                for c in range(p):
                    for j in range(J):
                        dot[j] += W[a, c, j] * V[c, j]
                for c in range(p):
                    for j in range(J):
                        V[c, j] -= dot[j] * W[a, c, j]
        after = np.zeros(J)
        for c in range(p):
            for j in range(J):
                after[j] += V[c, j] * V[c, j]
        for j in range(J):
            b = np.sqrt(before[j])
            after[j] = np.sqrt(after[j])
            if b == 0.0 or after[j] <= tol * b:  # Krylov space exhausted: zero direction, rank k
                after[j] = 0.0
                if ranks[j] == K:
                    ranks[j] = k
            else:
                after[j] = 1.0 / after[j]
        shift[:] = 0.0
        for c in range(p):
            for j in range(J):
                wk = V[c, j] * after[j]
                W[k, c, j] = wk
                A[c, j] = inv[c, j] * wk
                shift[j] += mu_c[c, j] * A[c, j]
        np.dot(Xc, A, H)
        colsum[:] = 0.0
        for i in range(n):  # one sweep: scores, next right-hand side, and the train Gram column k
            for j in range(J):
                u = H[i, j] - shift[j]
                U[k, i, j] = u
                r = Mw[i, j] * u
                R[i, j] = r
                colsum[j] += r
                gtr[k, j] += r * Ys[i, j]
            for a in range(k + 1):
                for j in range(J):
                    Gtr[a, k, j] += R[i, j] * U[a, i, j]
    return W, U, ranks, Gtr, gtr


@njit(cache=True)
def _refit_and_score(U, Ys, w, test, Gtr, gtr, rcond, clip, min_var):
    """Per split: beta = Gtr^+ gtr (symmetric pseudo-inverse), predict the test rows, weighted Pearson r,
    z = atanh(clip(r)), degenerate flag, and the weighted held-out R^2 about the train mean (Ys is
    train-standardised)."""
    K, n, J = U.shape
    m2 = test.shape[1]
    r = np.zeros(J)
    z = np.zeros(J)
    r2 = np.zeros(J)
    bad = np.zeros(J, dtype=np.bool_)
    G = np.empty((K, K))
    yhat = np.empty(m2)
    for j in range(J):
        for a in range(K):
            for c in range(a, K):
                G[a, c] = Gtr[a, c, j]
                G[c, a] = Gtr[a, c, j]
        beta = _pinv_solve(G, gtr[:, j], rcond)
        sw = 0.0
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
            wi = w[i]
            sw += wi
            ma += wi * acc
            my += wi * Ys[i, j]
            d = acc - Ys[i, j]
            press += wi * d * d
            total += wi * Ys[i, j] * Ys[i, j]
        r2[j] = 1.0 - press / max(total, 1e-300)
        ma /= sw
        my /= sw
        saa = 0.0
        syy = 0.0
        say = 0.0
        for t in range(m2):
            i = test[j, t]
            da = yhat[t] - ma
            dy = Ys[i, j] - my
            saa += w[i] * da * da
            syy += w[i] * dy * dy
            say += w[i] * da * dy
        if saa / sw < min_var or syy / sw < min_var or not np.isfinite(saa + syy + say):
            bad[j] = True
            continue
        rho = say / np.sqrt(saa * syy)
        rho = min(max(rho, -clip), clip)
        r[j] = rho
        z[j] = np.arctanh(rho)
    return r, z, bad, r2


@njit(cache=True)
def _pinv_solve(G, g, rcond):
    """G^+ g for a small symmetric PSD G (K x K): eigenvalues <= rcond x the largest count as zero.

    The eigen-decomposition is cyclic Jacobi (`_sym_eig`): for K of a few, a LAPACK call
    from Numba costs more in set-up than the whole rotation sweep.
    """
    K = G.shape[0]
    vals, vecs = _sym_eig(G)
    top = 0.0
    for a in range(K):
        top = max(top, vals[a])
    beta = np.zeros(K)
    for a in range(K):
        if vals[a] > rcond * top and vals[a] > 0.0:
            proj = 0.0
            for c in range(K):
                proj += vecs[c, a] * g[c]
            proj /= vals[a]
            for c in range(K):
                beta[c] += vecs[c, a] * proj
    return beta


@njit(cache=True)
def _sym_eig(G):
    """Eigenvalues (unsorted) and eigenvectors (columns) of a small symmetric matrix, cyclic Jacobi.

    Rotations (Golub & Van Loan, Algorithm 8.5.2) until the off-diagonal mass is below
    1e-32 of the total (quadratic convergence: a handful of sweeps for K <= 20).
    """
    K = G.shape[0]
    A = G.copy()
    V = np.eye(K)
    total = 0.0
    for a in range(K):
        for c in range(K):
            total += A[a, c] * A[a, c]
    for _ in range(100):
        off = 0.0
        for a in range(K):
            for c in range(a + 1, K):
                off += A[a, c] * A[a, c]
        if off <= 1e-32 * total:
            break
        for a in range(K - 1):
            for c in range(a + 1, K):
                apq = A[a, c]
                if apq == 0.0:
                    continue
                tau = (A[c, c] - A[a, a]) / (2.0 * apq)
                t = 1.0 / (tau + np.sqrt(1.0 + tau * tau)) if tau >= 0 else -1.0 / (-tau + np.sqrt(1.0 + tau * tau))
                cs = 1.0 / np.sqrt(1.0 + t * t)
                sn = t * cs
                for i in range(K):  # A <- A J
                    x = A[i, a]
                    v = A[i, c]
                    A[i, a] = cs * x - sn * v
                    A[i, c] = sn * x + cs * v
                for i in range(K):  # A <- J' A
                    x = A[a, i]
                    v = A[c, i]
                    A[a, i] = cs * x - sn * v
                    A[c, i] = sn * x + cs * v
                for i in range(K):  # V <- V J
                    x = V[i, a]
                    v = V[i, c]
                    V[i, a] = cs * x - sn * v
                    V[i, c] = sn * x + cs * v
    vals = np.empty(K)
    for a in range(K):
        vals[a] = A[a, a]
    return vals, V


# ---------------------------------------------------------------- the gate's stable rank


@njit(cache=True)
def gate_standardised(X, w):
    """The standardised X of the gate (n x q) and its ||X_s||_F^2.

    Column moments are weighted with w (population: divided by sum w), rows are scaled by
    sqrt(w), columns with sd 0 are dropped (q = the columns kept).
    """
    n, p = X.shape
    sw = 0.0
    for i in range(n):
        sw += w[i]
    mu = np.zeros(p)
    for i in range(n):
        for c in range(p):
            mu[c] += w[i] * X[i, c]
    for c in range(p):
        mu[c] /= sw
    ss = np.zeros(p)
    for i in range(n):
        for c in range(p):
            d = X[i, c] - mu[c]
            ss[c] += w[i] * d * d
    kept = np.zeros(p, dtype=np.int64)
    q = 0
    for c in range(p):
        if ss[c] > 0.0:
            kept[q] = c
            ss[q] = 1.0 / np.sqrt(ss[c] / sw)
            q += 1
    Xs = np.empty((n, q))
    frobenius = 0.0
    for i in range(n):
        root = np.sqrt(w[i])
        for t in range(q):
            c = kept[t]
            v = (X[i, c] - mu[c]) * ss[t] * root
            Xs[i, t] = v
            frobenius += v * v
    return Xs, frobenius


@njit(cache=True)
def power_top_singular(A, max_iter, rtol):
    """sigma_max(A)^2 = the top eigenvalue of A'A by power iteration on A itself (two GEMVs a step).

    Same start and stopping rule as power_top_eigenvalue on A'A, without forming it: cheap when
    the top eigenvalue dominates (NIR spectra converge in a few steps). Returns (value, converged).
    """
    n, q = A.shape
    ones = np.ones(q)
    v = A.T @ (A @ ones)
    for c in range(q):
        for i in range(n):
            v[c] += A[i, c] * A[i, c]
    norm = np.sqrt((v * v).sum())
    if not norm > 0.0:
        return 0.0, False
    v /= norm
    for _ in range(max_iter):
        u = A.T @ (A @ v)
        value = (v * u).sum()
        if not value > 0.0:
            return 0.0, False
        res = 0.0
        for c in range(q):
            d = u[c] - value * v[c]
            res += d * d
        if np.sqrt(res) <= rtol * value:
            return value, True
        v = u / np.sqrt((u * u).sum())
    return 0.0, False


@njit(cache=True)
def power_top_eigenvalue(S, max_iter, rtol):
    """Largest eigenvalue of a PSD matrix by power iteration, and whether it converged.

    Starts from S 1 + diag(S) (positive, weighted to the dominant directions); accepted once
    ||S v - lambda v|| <= rtol lambda, where the Rayleigh quotient is exact to ~1e-16 relative.
    """
    m = S.shape[0]
    v = np.zeros(m)
    for a in range(m):
        for c in range(m):
            v[a] += S[a, c]
        v[a] += S[a, a]
    norm = np.sqrt((v * v).sum())
    if not norm > 0.0:
        return 0.0, m == 0 or np.abs(S).max() == 0.0
    v /= norm
    for _ in range(max_iter):
        u = S @ v
        value = (v * u).sum()
        if not value > 0.0:
            return 0.0, False
        res = 0.0
        for a in range(m):
            d = u[a] - value * v[a]
            res += d * d
        if np.sqrt(res) <= rtol * value:
            return value, True
        v = u / np.sqrt((u * u).sum())
    return 0.0, False
