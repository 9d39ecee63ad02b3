"""Every split of the observed y in one pass: the NB-asymptotic hot path.

The J splits of NB differ only in which rows are train and which are test. Writing the
train half of split j as a 0/1 mask column M[:, j], every per-split product of the
held-out refit becomes one GEMM over all splits at once:
  X_s,j' r = D_j^-1 (X' (M_j * r) - mu_j sum(M_j * r))     (Lanczos step, train rows only)
  X_s,j w  = X (D_j^-1 w) - mu_j' D_j^-1 w                  (scores of train AND test rows)
with mu_j, D_j the train-half column means and sds. So PLS1 with K components costs 2K
GEMMs of n x p x J (BLAS, no Python loop over splits), two Numba kernels (train moments,
and the per-split K x K refit + prediction + Pearson + atanh) and one Gram-Schmidt step per
component. It computes exactly what methods.split_pass computes split by split (tested).
"""

from __future__ import annotations

import numpy as np

from methodkit.tools.pls import batch
from methodkit.tools.pls.methods import SplitPass, Splits

ZERO_SD = 1e-12  # a train column with sd <= ZERO_SD * max(1, |mean|) is constant there (dropped)
FLAT_Y = 1e-12  # a train half of y with sd below this is flat (degenerate split)


def observed_pass(X: np.ndarray, y: np.ndarray, splits: Splits, K: int, ops) -> SplitPass:
    """PLS1 held-out refit of y on every split at once: r, z, flags, held-out R^2 and W per split."""
    xp = ops.xp
    J = splits.train.shape[0]
    n, p = X.shape
    Xd = xp.asarray(np.ascontiguousarray(X, dtype=np.float64))
    train = xp.asarray(splits.train)
    test = xp.asarray(splits.test)
    mu, sd = ops.train_moments(Xd, train, ZERO_SD)  # p x J
    inv = 1.0 / sd  # 0 where a column is constant on the train half
    centre = Xd.mean(axis=0)
    Xc = Xd - centre  # a global shift keeps the GEMMs well conditioned; means follow it
    mu_c = mu - centre[:, None]
    cols = xp.arange(J)[None, :]
    mask = xp.zeros((n, J))
    mask[train.T, cols] = 1.0
    yd = xp.asarray(np.asarray(y, dtype=np.float64))
    ytr = yd[train]
    sdy = ytr.std(axis=1, ddof=1)
    flat = sdy < FLAT_Y
    Ys = (yd[:, None] - ytr.mean(axis=1)) / xp.where(flat, 1.0, sdy)  # n x J, train-standardised
    W, U, ranks = ops.lanczos_all_splits(
        xp.ascontiguousarray(Xc),
        xp.ascontiguousarray(mu_c),
        xp.ascontiguousarray(inv),
        mask,
        Ys,
        K,
        batch.EXHAUSTED_TOL,
    )
    ranks = batch._host(ranks)
    r, z, bad, r2 = (
        batch._host(a)
        for a in ops.heldout_corr(U, xp.ascontiguousarray(Ys), train, test, batch.RCOND, batch.CLIP, batch.MIN_VAR)
    )
    bad = bad | batch._host(flat)
    Wh = batch._host(W)
    return SplitPass(
        r=np.where(bad, 0.0, r)[:, None],
        z=np.where(bad, 0.0, z)[:, None],
        degenerate=bad[:, None],
        truncated=(ranks < K)[:, None],
        dropped=(~np.isfinite(batch._host(sd))).sum(axis=0),
        r2=r2,
        W=[Wh[:, :, j] for j in range(J)],
        n_fits=J,
    )
