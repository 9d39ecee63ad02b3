"""The shared primitive: held-out OLS refit of a supervised subspace, for many y columns at once.

One split (train rows, test rows) and a block Y of right-hand sides (the observed y and
its permutations) share the train-standardised X. For every column b:
  1. a direction learner gives a basis W_b (p x K) from the train half,
  2. OLS on the train scores T = X_tr W_b gives beta_b,
  3. yhat_te = X_te W_b beta_b, r_b = corr(yhat_te, y_te), z_b = atanh(clip(r_b)).
For PLS1 the basis is the Krylov space K_K(X'X, X'y), built by Lanczos with full
re-orthogonalisation (Golub-Kahan / Bidiag2 == NIPALS weights up to sign); each step
is one pair of GEMMs over all columns and one Numba column loop.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

CLIP = 0.9999  # Fisher-z clip of the issue: |r| <= 0.9999
MIN_VAR = 1e-15  # a held-out side with variance below this gives r = 0 (degenerate)
EXHAUSTED_TOL = 1e-9  # relative norm left after projection: the Krylov space is exhausted
RCOND = 1e-12


@functools.cache
def operations(device: str = "cpu"):
    """The column kernels and array module for a device: Numba on 'cpu', the CuPy twins on 'cuda'."""
    if device == "cuda":
        import cupy

        from methodkit.tools.pls import kernels_xp

        return SimpleNamespace(xp=cupy, device="cuda", **_table(kernels_xp))
    from methodkit.tools.pls import kernels

    return SimpleNamespace(xp=np, device="cpu", **_table(kernels))


def reference_operations():
    """The vectorised NumPy twins (the reference the Numba kernels are tested against)."""
    from methodkit.tools.pls import kernels_xp

    return SimpleNamespace(xp=np, device="cpu", **_table(kernels_xp))


def _table(module) -> dict:
    names = (
        "orthonormalize_step",
        "refit_coefficients",
        "combine_scores",
        "pearson_atanh",
        "standardize_columns",
        "sum_squares_columns",
        "nb_all_splits",
    )
    return {name: getattr(module, name) for name in names}


@dataclass
class StandardSplit:
    """X of one split standardised with train-half moments; dropped = zero-variance train columns.

    With observation weights w the moments are weighted and the train rows are multiplied
    by sqrt(w), so every unweighted product downstream (X'y, X'X, the OLS refit) is the
    weighted one; test rows stay unscaled and carry w_te for the weighted Pearson / PRESS.
    """

    Xtr: np.ndarray
    Xte: np.ndarray
    scale: np.ndarray  # train sd per column (inf where dropped)
    dropped: int
    w_tr: np.ndarray | None = None
    w_te: np.ndarray | None = None


def weighted_moments(A: np.ndarray, w: np.ndarray | None):
    """Column means and sds (ddof=1 analogue: m/(m-1) x the weighted variance; unit w = plain ddof=1)."""
    if w is None:
        return A.mean(axis=0), A.std(axis=0, ddof=1)
    m = A.shape[0]
    mu = (w @ A) / w.sum()
    var = (w @ (A - mu) ** 2) / w.sum() * m / (m - 1)
    return mu, np.sqrt(var)


def standardize_split(X: np.ndarray, train: np.ndarray, test: np.ndarray, xp=np, w=None) -> StandardSplit:
    Xtr = X[train]
    w_tr = None if w is None else w[train]
    mu, sd = weighted_moments(Xtr, w_tr)
    zero = sd <= 1e-12 * np.maximum(1.0, np.abs(mu))
    sd = np.where(zero, np.inf, sd)
    a = (Xtr - mu) / sd
    if w_tr is not None:
        a = a * np.sqrt(w_tr)[:, None]
    a = np.ascontiguousarray(a)
    b = np.ascontiguousarray((X[test] - mu) / sd)
    w_te = None if w is None else xp.asarray(w[test])
    return StandardSplit(
        xp.asarray(a), xp.asarray(b), sd, int(zero.sum()), None if w_tr is None else xp.asarray(w_tr), w_te
    )


def standardize_y(split: StandardSplit, Ytr, Yte, ops, min_sd: float = 1e-12):
    """Standardise y columns with their train moments (weighted with the split's w; train rows x sqrt(w))."""
    xp = ops.xp
    Ytr = xp.ascontiguousarray(xp.asarray(Ytr))
    Yte = xp.ascontiguousarray(xp.asarray(Yte))
    if split.w_tr is None:
        return ops.standardize_columns(Ytr, Yte, min_sd)
    w = split.w_tr
    m = Ytr.shape[0]
    mu = (w @ Ytr) / w.sum()
    sd = xp.sqrt((w @ (Ytr - mu) ** 2) / w.sum() * m / (m - 1))
    flat = sd < min_sd
    sd = xp.where(flat, 1.0, sd)
    tr = xp.ascontiguousarray((Ytr - mu) / sd * xp.sqrt(w)[:, None])
    return tr, xp.ascontiguousarray((Yte - mu) / sd), flat


def weighted_pearson_atanh(A, Y, w, clip, min_var):
    """Column-wise weighted Pearson r (weights w over rows), z = atanh(clip(r)), degenerate flags."""
    xp = sys.modules["cupy"] if type(A).__module__.startswith("cupy") else np
    sw = w.sum()
    da = A - (w @ A) / sw
    dy = Y - (w @ Y) / sw
    saa = w @ (da * da)
    syy = w @ (dy * dy)
    say = w @ (da * dy)
    bad = (saa / sw < min_var) | (syy / sw < min_var) | ~xp.isfinite(saa + syy + say)
    r = xp.where(bad, 0.0, xp.clip(say / xp.sqrt(xp.where(bad, 1.0, saa * syy)), -clip, clip))
    return r, xp.arctanh(r), bad


def weighted_sum_squares(split: StandardSplit, yhat, Yte_s, ops, center: str = "train"):
    """PRESS and total sum of squares over the test rows (weighted by w_te when the split has weights).

    The total is around the training mean (center="train": the PRESS of predicting the training mean, Wold's
    Q2) or around the test fold's own mean (center="fold", which matches plskit's raw_perm statistic)."""
    xp = ops.xp
    if split.w_te is None:
        press, total = ops.sum_squares_columns(xp.ascontiguousarray(yhat), Yte_s)
        if center == "fold":
            m = Yte_s.shape[0]
            total = total - m * Yte_s.mean(axis=0) ** 2
        return press, total
    w = split.w_te
    press, total = w @ (yhat - Yte_s) ** 2, w @ (Yte_s * Yte_s)
    if center == "fold":
        total = total - (w @ Yte_s) ** 2 / w.sum()
    return press, total


def kish(w: np.ndarray) -> float:
    """Kish effective sample size (sum w)^2 / sum w^2."""
    return float(w.sum() ** 2 / (w * w).sum())


# ---------------------------------------------------------------- direction learners


def pls1_weights(Xtr, Ytr, K: int, ops):
    """PLS1 weight bases for every column of Ytr: W (K x p x B) and the rank reached per column."""
    xp = ops.xp
    n, p = Xtr.shape
    B = Ytr.shape[1]
    W = xp.zeros((K, p, B))
    ranks = np.full(B, K)
    exhausted = np.zeros(B, dtype=bool)
    gram = Xtr.T @ Xtr if n > 2 * p else None  # kernel-PLS route (Dayal-MacGregor) when n >> p
    V = Xtr.T @ Ytr
    for k in range(K):
        if k > 0:
            V = gram @ W[k - 1] if gram is not None else Xtr.T @ (Xtr @ W[k - 1])
        V = xp.ascontiguousarray(V)
        ex = np.asarray(_host(ops.orthonormalize_step(V, W, k, EXHAUSTED_TOL)))
        newly = ex & ~exhausted
        ranks[newly] = k
        exhausted |= ex
    return W, ranks


def spca_weights(Xtr, Ytr, K: int, ops, keep: int):
    """Bair et al. supervised PCA: keep the `keep` columns most correlated with y, top-K PCs of that block."""
    Xh = _host(Xtr)
    Yh = _host(Ytr)
    n, p = Xh.shape
    B = Yh.shape[1]
    keep = int(min(max(keep, K), p))
    scores = np.abs(Xh.T @ Yh)  # proportional to |corr(x_j, y)|: both sides are standardised
    W = np.zeros((K, p, B))
    ranks = np.full(B, K)
    for b in range(B):
        chosen = np.sort(np.argsort(-scores[:, b], kind="stable")[:keep])
        _, s, vt = np.linalg.svd(Xh[:, chosen], full_matrices=False)
        rank = int((s > EXHAUSTED_TOL * s[0]).sum()) if s.size and s[0] > 0 else 0
        use = min(K, rank)
        W[:use, chosen, b] = vt[:use]
        ranks[b] = use
    return ops.xp.asarray(W), ranks


def fixed_weights(W_raw: np.ndarray, split: StandardSplit, K: int, ops):
    """User directions in X's own units, mapped into the split's standardised space (W_std = D W)."""
    scale = np.where(np.isfinite(split.scale), split.scale, 0.0)
    W = (W_raw[:, :K] * scale[:, None]).T[:, :, None]  # K x p x 1: broadcast over columns
    return ops.xp.asarray(np.ascontiguousarray(W)), np.full(1, K)


# ---------------------------------------------------------------- refit and predict


def heldout_predict(Xtr, Ytr, Xte, W, ops):
    """OLS refit of Ytr on X_tr W (per column), predictions X_te W beta (n_te x B)."""
    xp = ops.xp
    K = W.shape[0]
    T = xp.ascontiguousarray(xp.stack([Xtr @ W[k] for k in range(K)]))
    beta = ops.refit_coefficients(T, xp.ascontiguousarray(Ytr), RCOND)
    S = xp.ascontiguousarray(xp.stack([Xte @ W[k] for k in range(K)]))
    return ops.combine_scores(S, beta)


@dataclass
class SplitResult:
    """What one split gives for B columns."""

    r: np.ndarray
    z: np.ndarray
    degenerate: np.ndarray  # r undefined (flat prediction or flat y)
    truncated: np.ndarray  # learner reached fewer than K components
    r2: np.ndarray | None = None  # held-out R^2 about the train mean (standardised y), if asked
    W: np.ndarray | None = None


def pls1_heldout_gram(Xtr, Ytr, Xte, K: int, ops):
    """PLS1 + OLS refit + held-out prediction in sample space, for wide X (p > n_train): (yhat, ranks).

    The Krylov basis W_k = X_tr' A_k is kept by its coefficients A_k (n_tr x B) and its train scores
    U_k = X_tr W_k = G A_k (G = X_tr X_tr'): <W_j, V> = U_j . A_V and |V|^2 = A_V . G A_V, so the two-pass
    Gram-Schmidt of `orthonormalize_step` runs on n_tr-vectors, and the test scores are (X_te X_tr') A_k.
    Every product is n_tr x n_tr x B instead of n_tr x p x B (13x fewer flops at n = 60, p = 401).
    The same fit as pls1_weights + heldout_predict up to rounding (tests: z to 1e-9)."""
    xp = ops.xp
    G = Xtr @ Xtr.T
    H = Xte @ Xtr.T
    B = Ytr.shape[1]
    A, U = [], []
    ranks = np.full(B, K)
    exhausted = np.zeros(B, dtype=bool)
    for k in range(K):
        VA = Ytr if k == 0 else U[k - 1]  # V = X'y, then X'X w_{k-1} = X' u_{k-1}
        GV = G @ VA
        before = xp.sqrt(xp.maximum((VA * GV).sum(axis=0), 0.0))
        for _ in range(2):
            for j in range(k):
                d = (U[j] * VA).sum(axis=0)
                VA = VA - d * A[j]
                GV = GV - d * U[j]
        after = xp.sqrt(xp.maximum((VA * GV).sum(axis=0), 0.0))
        ex = (before == 0.0) | (after <= EXHAUSTED_TOL * before)
        scale = xp.where(ex, 0.0, 1.0 / xp.where(ex, 1.0, after))
        A.append(VA * scale)
        U.append(GV * scale)
        ex = np.asarray(_host(ex))
        ranks[ex & ~exhausted] = k
        exhausted |= ex
    T = xp.ascontiguousarray(xp.stack(U))
    beta = ops.refit_coefficients(T, xp.ascontiguousarray(Ytr), RCOND)
    S = xp.ascontiguousarray(xp.stack([H @ a for a in A]))
    return ops.combine_scores(S, beta), ranks


def split_corr_batch(split: StandardSplit, Ytr, Yte, K: int, learner, ops, *, want_r2=False, keep_w=False):
    """Standardise y columns with train moments, learn W, refit, predict, Pearson, atanh."""
    Ytr_s, Yte_s, flat = standardize_y(split, Ytr, Yte, ops)
    if learner is pls1_weights and not keep_w and split.Xtr.shape[1] > split.Xtr.shape[0]:
        yhat, ranks = pls1_heldout_gram(split.Xtr, Ytr_s, split.Xte, K, ops)
        return _score(split, yhat, Yte_s, flat, ranks < K, ops, want_r2, None)
    W, ranks = learner(split.Xtr, Ytr_s, K, ops)
    yhat = heldout_predict(split.Xtr, Ytr_s, split.Xte, W, ops)
    return _score(split, yhat, Yte_s, flat, ranks < K, ops, want_r2, W if keep_w else None)


def k1_corr_batch(split: StandardSplit, Ytr, Yte, ops):
    """K=1 PLS without a refit: yhat is proportional (positive factor) to X_te X_tr' y_tr, one GEMM pair.

    Correlation ignores the positive scale and y-centring, so this equals the refit route.
    """
    xp = ops.xp
    Ytr_s, Yte_s, flat = standardize_y(split, Ytr, Yte, ops)
    n_tr, p = split.Xtr.shape
    if p > n_tr:  # wide X: (X_te X_tr') Y is n_te x n_tr x B flops instead of (n_te + n_tr) x p x B
        yhat = xp.ascontiguousarray((split.Xte @ split.Xtr.T) @ Ytr_s)
    else:
        yhat = xp.ascontiguousarray(split.Xte @ (split.Xtr.T @ Ytr_s))
    return _score(split, yhat, Yte_s, flat, np.zeros(Ytr.shape[1], dtype=bool), ops, False, None)


def _score(split, yhat, Yte_s, flat, truncated, ops, want_r2, W):
    yhat = ops.xp.ascontiguousarray(yhat)
    if split.w_te is None:
        r, z, bad = ops.pearson_atanh(yhat, Yte_s, CLIP, MIN_VAR)
    else:
        r, z, bad = weighted_pearson_atanh(yhat, Yte_s, split.w_te, CLIP, MIN_VAR)
    bad = _host(bad) | _host(flat)
    r = np.where(bad, 0.0, _host(r))
    z = np.where(bad, 0.0, _host(z))
    r2 = None
    if want_r2:
        press, total = weighted_sum_squares(split, yhat, Yte_s, ops)
        r2 = 1.0 - _host(press) / np.maximum(_host(total), 1e-300)
    return SplitResult(r, z, bad, np.asarray(truncated), r2, None if W is None else _host(W))


def _host(a):
    get = getattr(a, "get", None)
    return get() if callable(get) else np.asarray(a)
