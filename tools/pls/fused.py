"""Every split of the observed y in one pass: the NB-asymptotic hot path.

The J splits of NB differ only in which rows are train and which are test. Writing the
train half of split j as a weight column Mw[:, j] (the observation weight w_i on its train
rows, 0 elsewhere; w = 1 unweighted), every per-split product of the held-out refit becomes
one GEMM over all splits at once:
  X_s,j' diag(Mw_j) r = D_j^-1 (X' (Mw_j * r) - mu_j sum(Mw_j * r))   (Lanczos step, train rows)
  X_s,j w             = X (D_j^-1 w) - mu_j' D_j^-1 w                  (scores of train AND test rows)
with mu_j, D_j the (weighted) train-half column means and sds, which are two more GEMMs
X'Mw and (X*X)'Mw. So PLS1 with K components costs 2K + 2 GEMMs of n x p x J (BLAS, no
Python loop over splits) and one Numba function (kernels.nb_all_splits, no threads) for the
column algebra, the K x K weighted OLS refit, prediction, Pearson, atanh and held-out R^2
of every split. It computes what methods.split_pass computes split by split (tested, weighted too).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from methodkit.tools.pls import batch
from methodkit.tools.pls.methods import SplitPass, Splits

ZERO_SD = 1e-12  # a train column with sd <= ZERO_SD * max(1, |mean|) is constant there (dropped)
FLAT_Y = 1e-12  # a train half of y with sd below this is flat (degenerate split)


class _Bases(Sequence):
    """W[:, :, j] per split (K x p), made on access: most runs look at one or none of them."""

    def __init__(self, W: np.ndarray):
        self.W = W

    def __len__(self) -> int:
        return self.W.shape[2]

    def __getitem__(self, j):
        if isinstance(j, slice):
            return [self[i] for i in range(*j.indices(len(self)))]
        if not -len(self) <= j < len(self):
            raise IndexError(j)
        return self.W[:, :, j]


def observed_pass(X: np.ndarray, y: np.ndarray, splits: Splits, K: int, ops, w: np.ndarray | None = None) -> SplitPass:
    """PLS1 held-out refit of y on every split at once: r, z, flags, held-out R^2 and W per split."""
    xp = ops.xp
    n = X.shape[0]
    r, z, bad, r2, W, ranks, dropped = (
        batch._host(a)
        for a in ops.nb_all_splits(
            xp.asarray(np.ascontiguousarray(X, dtype=np.float64)),
            xp.asarray(np.ascontiguousarray(y, dtype=np.float64)),
            xp.asarray(np.ones(n) if w is None else np.ascontiguousarray(w, dtype=np.float64)),
            xp.asarray(splits.train),
            xp.asarray(splits.test),
            K,
            ZERO_SD,
            FLAT_Y,
            batch.EXHAUSTED_TOL,
            batch.RCOND,
            batch.CLIP,
            batch.MIN_VAR,
        )
    )
    return SplitPass(
        r=r[:, None],
        z=z[:, None],
        degenerate=bad[:, None],
        truncated=(ranks < K)[:, None],
        dropped=dropped,
        r2=r2,
        W=_Bases(W),
        n_fits=len(r),
    )
