"""Threshold-crossing search (`--search threshold`, ours): move rows across the victim's split thresholds.

A GBDT only notices a move when a value crosses one of its split thresholds, so the
Gaussian finite-difference probes of ZO-PSGD waste most evaluations (J is flat between
crossings; 2q = 8 probes in B·k dimensions). This search uses the trees instead:

1. anchor model = the victim retrained on the current iterate; its numerical split
   thresholds cut each poisoned row's coordinate line into intervals;
2. probes: for every row and chosen column, one point in each interval that the
   coordinate line reaches inside the row's ellipsoid ∩ box (the row's other columns
   stay put; the nearest `MAX_PER_AXIS` intervals), projected by P_i like every probe;
3. each probe is scored by the first-order change of the validation loss it causes
   through the anchor's leaf values (kernels.move_scores: the BoostIn approximation
   applied to a row changing leaves), and each row keeps its best improving probe;
4. line search: the rows' moves, best first, are applied in the fractions
   `LINE_FRACTIONS` (all, half, ...), each evaluated by the oracle (a true retrain by
   default); the best becomes the next iterate, and accept-best keeps the best visited.

Every iterate is a set of projected probes, so it stays inside E_i ∩ box ∩ lattice.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from methodkit.tools.gbdt import kernels
from methodkit.tools.gbdt.feasible import Region
from methodkit.tools.gbdt.influence import LAMBDA_FLOOR
from methodkit.tools.gbdt.victim import Trees, leaf_indices

LINE_FRACTIONS = (1.0, 0.5, 0.25, 0.125)
MAX_PER_AXIS = 24  # intervals tried per row and column, the nearest to the current value


def split_thresholds(trees: Trees) -> dict[int, np.ndarray]:
    """Sorted distinct numerical thresholds of the model, per feature."""
    out: dict[int, set[float]] = {}
    for f, thr, _ in trees.splits:
        out.setdefault(f, set()).add(thr)
    return {f: np.array(sorted(v)) for f, v in out.items()}


def coordinate_segments(region: Region, Z: np.ndarray, precision: np.ndarray):
    """(lo, hi), each (B,k): how far each row may move along each of its axes from Z inside E_i ∩ box.

    precision: (B,k,k) inverse covariances. Along axis a the ellipsoid condition is the quadratic
    A t² + 2 b t + c <= 0 in the offset t, A = P_aa, b = (P d)_a, c = d'P d − eps².
    """
    d = Z - region.x0
    Pd = np.einsum("bij,bj->bi", precision, d)
    A = np.einsum("bii->bi", precision)
    c = np.einsum("bi,bi->b", d, Pd) - region.eps**2
    root = np.sqrt(np.maximum(Pd**2 - A * c[:, None], 0.0))
    lo = np.maximum(Z + (-Pd - root) / A, region.lo)
    hi = np.minimum(Z + (-Pd + root) / A, region.hi)
    pinned = region.lo == region.hi
    return np.where(pinned, Z, lo), np.where(pinned, Z, np.maximum(hi, lo))


def _axis_to_orig(z, mean, sd, logmask):
    v = z * sd + mean
    return np.expm1(v) if logmask else v


def _axis_to_std(v, mean, sd, logmask):
    return ((np.log1p(v) if logmask else v) - mean) / sd


def interval_points(thresholds: np.ndarray, lo: float, hi: float, current: float, integer: bool) -> list[float]:
    """One value (original units) in each threshold interval of [lo, hi] other than the current one.

    LightGBM sends x <= threshold left, so interval i is (θ_{i-1}, θ_i]; the value is its midpoint
    (robust to the victim re-binning), or the integer nearest to it for integer columns.
    """
    inside = thresholds[(thresholds > lo) & (thresholds < hi)]
    here = int(np.searchsorted(inside, current, side="left"))
    edges = np.concatenate([[lo], inside, [hi]])
    order = sorted(range(len(edges) - 1), key=lambda i: (abs(i - here), i))
    out = []
    for i in order:
        if i == here:
            continue
        left, right = edges[i], edges[i + 1]
        if integer:
            first = np.floor(left) + 1 if i > 0 else np.ceil(left - 1e-9)
            last = np.floor(right) if i < len(inside) else np.floor(right + 1e-9)
            if first > last:
                continue
            value = float(np.clip(np.round(0.5 * (left + right)), first, last))
        else:
            value = 0.5 * (left + right)
        out.append(value)
        if len(out) >= MAX_PER_AXIS:
            break
    return out


def probes(region: Region, Z: np.ndarray, precision: np.ndarray, thresholds: dict[int, np.ndarray]):
    """(owner row b of each probe, projected probe points (C,k)) for the coordinate moves of every row."""
    lo, hi = coordinate_segments(region, Z, precision)
    owner, points = [], []
    B, k = Z.shape
    for b in range(B):
        for a in range(k):
            j = int(region.dims[b, a])
            thr = thresholds.get(j)
            if j < 0 or thr is None or hi[b, a] <= lo[b, a]:
                continue
            m, s, log = region.mean[b, a], region.sd[b, a], bool(region.logmask[b, a])
            values = interval_points(
                thr,
                _axis_to_orig(lo[b, a], m, s, log),
                _axis_to_orig(hi[b, a], m, s, log),
                _axis_to_orig(Z[b, a], m, s, log),
                bool(region.int_mask[b, a]),
            )
            for value in values:
                point = Z[b].copy()
                point[a] = _axis_to_std(value, m, s, log)
                owner.append(b)
                points.append(point)
    if not owner:
        return np.zeros(0, dtype=np.int64), np.zeros((0, k))
    owner = np.asarray(owner, dtype=np.int64)
    return owner, rows_of(region, owner).project(np.asarray(points))


def rows_of(region: Region, owner: np.ndarray) -> Region:
    """The region of the rows `owner` (repeats allowed): one row per probe, for projection and units."""
    return replace(
        region,
        rows=region.rows[owner],
        dims=region.dims[owner],
        x0=region.x0[owner],
        U=region.U[owner],
        s=region.s[owner],
        lo=region.lo[owner],
        hi=region.hi[owner],
        int_mask=region.int_mask[owner],
        mean=region.mean[owner],
        sd=region.sd[owner],
        logmask=region.logmask[owner],
        eps=region.eps[owner],
    )


def precisions(region: Region) -> np.ndarray:
    """(B,k,k) inverse covariances U diag(1/s) U'."""
    return np.einsum("bij,bj,bkj->bik", region.U, 1.0 / region.s, region.U)


def probe_rows(region: Region, X: np.ndarray, owner: np.ndarray, points: np.ndarray) -> np.ndarray:
    """The train rows of the probes: row region.rows[owner[c]] of X with its moved cells at points[c]."""
    X_probe = X[region.rows[owner]].copy()
    values = rows_of(region, owner).to_orig(points)
    for a in range(region.dims.shape[1]):
        cols = region.dims[owner, a]
        live = cols >= 0
        X_probe[np.flatnonzero(live), cols[live]] = values[live, a]
    return X_probe


def score_probes(anchor, trees: Trees, X: np.ndarray, y_tr, X_v, y_v, region: Region, owner, points, lam):
    """First-order gain in validation logloss of each probe under the anchor model (larger = better).

    trees: the anchor parsed (victim.parse_trees); X: the train matrix at the current iterate."""
    X_probe = probe_rows(region, X, owner, points)
    return score_rows(anchor, trees, X, y_tr, X_v, y_v, region.rows, owner, X_probe, lam)


def score_rows(anchor, trees: Trees, X: np.ndarray, y_tr, X_v, y_v, rows, owner, X_probe, lam):
    """First-order gain in validation logloss when train row rows[owner[c]] becomes X_probe[c]."""
    L = leaf_indices(anchor, X)
    G, H = kernels.staged_leaf_sums(L, trees.leaf_values, np.asarray(y_tr, dtype=np.float64), trees.b0)
    L_v = leaf_indices(anchor, X_v)
    g_v = (anchor.predict(X_v) - y_v) / len(y_v)
    Gv = np.zeros_like(G)
    for t in range(L_v.shape[1]):
        Gv[t] = np.bincount(L_v[:, t], g_v, minlength=G.shape[1])
    L_probe = leaf_indices(anchor, X_probe) if len(owner) else np.zeros((0, L.shape[1]), dtype=np.int64)
    scores = kernels.move_scores(
        np.ascontiguousarray(L[rows]),
        L_probe,
        np.asarray(owner, dtype=np.int64),
        np.asarray(y_tr[rows], dtype=np.float64),
        G,
        H,
        Gv,
        trees.leaf_values,
        trees.learning_rate,
        max(float(lam), LAMBDA_FLOOR),
        trees.b0,
    )
    return scores


def best_moves(owner: np.ndarray, scores: np.ndarray, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row the probe with the largest positive score: (rows that improve, best first; their probe)."""
    best = np.full(n_rows, -1, dtype=np.int64)
    gain = np.zeros(n_rows)
    for c in np.lexsort((np.arange(len(scores)), -scores)):
        if scores[c] <= 0:
            break
        if best[owner[c]] < 0:
            best[owner[c]] = c
            gain[owner[c]] = scores[c]
    movers = np.flatnonzero(best >= 0)
    movers = movers[np.lexsort((movers, -gain[movers]))]
    return movers, best[movers]
