"""Pre-binning of features for the histogram split finder.

Numeric features get <= 64 quantile bins; a categorical feature is ordered by its
per-level ratio dV/dC (treated arms pooled against control) and then treated as ordinal.
NaN always lands in its own last bin, which the split finder sends right.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_BINS = 64
NAN_BIN = MAX_BINS  # bins 0..63 hold values, 64 holds NaN
N_BINS = MAX_BINS + 1


@dataclass
class Binner:
    edges: list[np.ndarray | None]  # numeric: upper bin edges (x <= edges[b] <-> code <= b)
    orders: list[np.ndarray | None]  # categorical: bin of each level code

    def codes(self, X: np.ndarray) -> np.ndarray:
        """(d, n) uint8 bin codes, feature-major for the histogram kernel."""
        n, d = X.shape
        out = np.full((d, n), NAN_BIN, dtype=np.uint8)
        for j in range(d):
            x = X[:, j]
            ok = np.isfinite(x)
            if self.edges[j] is not None:
                out[j, ok] = np.searchsorted(self.edges[j], x[ok], side="left")
            else:
                order = self.orders[j]
                lev = x[ok].astype(np.int64)
                known = (lev >= 0) & (lev < len(order))
                idx = np.flatnonzero(ok)
                out[j, idx[known]] = order[lev[known]]
        return out

    def n_valid(self) -> np.ndarray:
        """Number of non-NaN bins per feature."""
        out = []
        for e, o in zip(self.edges, self.orders):
            out.append(len(e) + 1 if e is not None else (int(o.max()) + 1 if len(o) else 1))
        return np.asarray(out, dtype=np.int64)


def level_ratio(x, t, y, z) -> tuple[np.ndarray, np.ndarray]:
    """Per-level (codes 0..m-1) pooled-treatment ratio dV/dC; levels without both groups get -inf."""
    m = int(np.nanmax(x)) + 1 if np.isfinite(x).any() else 0
    ratio = np.full(m, -np.inf)
    for lev in range(m):
        sel = x == lev
        tr, ct = sel & (t > 0), sel & (t == 0)
        if tr.sum() == 0 or ct.sum() == 0:
            continue
        dv = y[tr].mean() - y[ct].mean()
        dc = z[tr].mean() - z[ct].mean()
        ratio[lev] = dv / dc if dc > 1e-12 else np.sign(dv) * 1e12
    return ratio, np.arange(m)


def fit_binner(X, categorical: list[bool], t, y, z) -> Binner:
    edges: list = []
    orders: list = []
    qs = np.linspace(0, 1, MAX_BINS + 1)[1:-1]
    for j, is_cat in enumerate(categorical):
        x = X[:, j]
        if is_cat:
            ratio, _ = level_ratio(x, t, y, z)
            rank = np.empty(len(ratio), dtype=np.int64)
            rank[np.argsort(ratio, kind="stable")] = np.arange(len(ratio))
            if len(ratio) > MAX_BINS:  # merge neighbours in the ratio order
                rank = rank * MAX_BINS // len(ratio)
            edges.append(None)
            orders.append(rank.astype(np.uint8))
        else:
            finite = x[np.isfinite(x)]
            e = np.unique(np.quantile(finite, qs)) if finite.size else np.zeros(0)
            if e.size and e[-1] >= finite.max():
                e = e[:-1]  # the top edge would leave an empty last bin
            edges.append(e.astype(np.float64))
            orders.append(None)
    return Binner(edges, orders)
