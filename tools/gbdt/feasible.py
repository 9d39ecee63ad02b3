"""The feasible region of each poisoned row (issue §2.3): class-shaped ellipsoid ∩ data box ∩ lattice.

Everything happens in standardised coordinates (per-column mean/sd of the train
part D, after an optional log1p for heavy-tailed non-negative columns). Row i with
label c and dims S_i may move inside {x : (x-x_i)' Sigma_c^-1 (x-x_i) <= eps^2},
Sigma_c the Ledoit-Wolf covariance of class-c rows on S_i, clipped to the box of
the train data, with integer columns rounded in original units.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from methodkit.tools.gbdt import kernels

TRANSFORMS = ("none", "log1p")
COVARIANCES = ("class", "pooled")
SKEW_FOR_LOG = 1.0  # --transform log1p acts on non-negative columns at least this right-skewed (ours)
DYKSTRA_ITERS = 50
DYKSTRA_TOL = 1e-9


@dataclass
class Standardizer:
    """Per-feature maps original <-> standardised for the mutable columns (others unused)."""

    mean: np.ndarray  # (p,) over all features; only mutable entries are meaningful
    sd: np.ndarray
    logmask: np.ndarray  # bool (p,)
    lo: np.ndarray  # box of D in standardised units
    hi: np.ndarray

    @classmethod
    def fit(cls, X_tr: np.ndarray, mutable_idx: list[int], transform: str) -> Standardizer:
        p = X_tr.shape[1]
        mean, sd = np.zeros(p), np.ones(p)
        logmask = np.zeros(p, dtype=bool)
        lo, hi = np.zeros(p), np.zeros(p)
        for j in mutable_idx:
            col = X_tr[:, j]
            col = col[np.isfinite(col)]
            if col.size == 0:
                continue
            if transform == "log1p" and col.min() >= 0 and _skewness(col) >= SKEW_FOR_LOG:
                logmask[j] = True
                col = np.log1p(col)
            mean[j] = col.mean()
            sd[j] = col.std() if col.std() > 0 else 1.0
            lo[j], hi[j] = (col.min() - mean[j]) / sd[j], (col.max() - mean[j]) / sd[j]
        return cls(mean, sd, logmask, lo, hi)

    def to_std(self, values: np.ndarray, cols: np.ndarray) -> np.ndarray:
        v = np.array(values, dtype=np.float64)
        mask = np.broadcast_to(self.logmask[cols], v.shape)
        v[mask] = np.log1p(np.maximum(v[mask], 0))
        return (v - self.mean[cols]) / self.sd[cols]

    def to_orig(self, z: np.ndarray, cols: np.ndarray) -> np.ndarray:
        v = np.array(z * self.sd[cols] + self.mean[cols], dtype=np.float64)
        mask = np.broadcast_to(self.logmask[cols], v.shape)
        v[mask] = np.expm1(v[mask])
        return v


def _skewness(x: np.ndarray) -> float:
    sd = x.std()
    return float(np.mean(((x - x.mean()) / sd) ** 3)) if sd > 0 else 0.0


def shrunk_covariance(Z: np.ndarray) -> np.ndarray:
    """Ledoit-Wolf covariance of the rows of Z (complete rows only)."""
    from sklearn.covariance import LedoitWolf

    Z = Z[np.all(np.isfinite(Z), axis=1)]
    if len(Z) < 2:
        return np.eye(Z.shape[1])
    return LedoitWolf().fit(Z).covariance_


@dataclass
class Region:
    """Per-row data for the projection kernel; B rows, k dims each (padded dims are pinned)."""

    rows: np.ndarray  # positions in D
    dims: np.ndarray  # (B,k) feature indices
    x0: np.ndarray  # (B,k) standardised clean values
    U: np.ndarray  # (B,k,k)
    s: np.ndarray  # (B,k)
    lo: np.ndarray
    hi: np.ndarray
    int_mask: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    logmask: np.ndarray
    eps: np.ndarray  # (B,)
    dropped: list[str] = field(default_factory=list)  # warnings about singular dims

    def project(self, Y: np.ndarray) -> np.ndarray:
        """P(Y): each row onto its ellipsoid ∩ box ∩ lattice."""
        return kernels.project_rows(
            np.ascontiguousarray(Y, dtype=np.float64),
            self.x0,
            self.U,
            self.s,
            self.eps,
            self.lo,
            self.hi,
            self.int_mask,
            self.mean,
            self.sd,
            self.logmask,
            DYKSTRA_ITERS,
            DYKSTRA_TOL,
        )

    def radius(self, Z: np.ndarray) -> np.ndarray:
        """Mahalanobis distance of each row of Z from its clean point."""
        return kernels.mahalanobis_rows(np.ascontiguousarray(Z - self.x0), self.U, self.s)

    def norm(self, D: np.ndarray) -> np.ndarray:
        """Row-wise Mahalanobis norm of offsets D."""
        return kernels.mahalanobis_rows(np.ascontiguousarray(D, dtype=np.float64), self.U, self.s)

    def directions(self, rng: np.random.Generator) -> np.ndarray:
        """u_i ~ N(0, Sigma_i) for every row, scaled so the mean Mahalanobis norm is 1."""
        xi = rng.standard_normal(self.x0.shape)
        u = np.einsum("bij,bj->bi", self.U, np.sqrt(self.s) * xi)
        return u / max(float(np.mean(np.linalg.norm(xi, axis=1))), 1e-300)

    def inside(self, Z: np.ndarray, tol: float = 1e-6) -> np.ndarray:
        """Which rows of Z lie in their ellipsoid ∩ box (tolerance tol) and on the lattice."""
        ok = self.radius(Z) <= self.eps * (1 + tol) + tol
        ok &= np.all((Z >= self.lo - tol) & (Z <= self.hi + tol), axis=1)
        orig = self.to_orig(Z)
        on_lattice = np.where(self.int_mask, np.abs(orig - np.round(orig)) <= 1e-6 * np.maximum(1, np.abs(orig)), True)
        return ok & np.all(on_lattice, axis=1)

    def to_orig(self, Z: np.ndarray) -> np.ndarray:
        v = Z * self.sd + self.mean
        v[self.logmask] = np.expm1(v[self.logmask])
        return v

    def to_std(self, X: np.ndarray) -> np.ndarray:
        v = np.array(X, dtype=np.float64)
        v[self.logmask] = np.log1p(np.maximum(v[self.logmask], 0))
        return (v - self.mean) / self.sd


def build_region(
    X_tr: np.ndarray,
    y_tr: np.ndarray,
    std: Standardizer,
    rows: np.ndarray,
    dims: np.ndarray,
    eps: float,
    cov: str,
    integer_idx: set[int],
    feature_names: list[str],
) -> Region:
    """Region of rows `rows` (positions in D) moving along `dims` (B,k), -1 = a padded, pinned slot."""
    B, k = dims.shape
    safe = np.where(dims < 0, 0, dims)
    x0 = np.zeros((B, k))
    U = np.zeros((B, k, k))
    s = np.ones((B, k))
    lo, hi = np.zeros((B, k)), np.zeros((B, k))
    mean, sd = std.mean[safe], std.sd[safe]
    logmask = std.logmask[safe] & (dims >= 0)
    int_mask = np.array([[d in integer_idx for d in row] for row in dims], dtype=bool).reshape(B, k)
    cache: dict[tuple, tuple[np.ndarray, np.ndarray, list[int]]] = {}
    dropped: list[str] = []
    for b in range(B):
        i = rows[b]
        active = [a for a in range(k) if dims[b, a] >= 0]
        cols = dims[b, active]
        group = int(y_tr[i]) if cov == "class" else -1
        key = (group, tuple(cols))
        if key not in cache:
            members = np.flatnonzero(y_tr == group) if group >= 0 else np.arange(len(y_tr))
            Z = std.to_std(X_tr[np.ix_(members, cols)], cols)
            cache[key] = _eigen(Z, [feature_names[c] for c in cols], group, dropped)
        vecs, vals, kept = cache[key]
        x0[b, active] = std.to_std(X_tr[i, cols], cols)
        lo[b, active], hi[b, active] = std.lo[cols], std.hi[cols]
        pinned = [active[a] for a in range(len(active)) if a not in kept]
        live = [active[a] for a in kept]
        if live:
            U[b][np.ix_(live, live)] = vecs
            s[b, live] = vals
        for a in pinned + [a for a in range(k) if dims[b, a] < 0]:
            U[b, a, a] = 1.0
            lo[b, a] = hi[b, a] = x0[b, a]
    return Region(
        rows=np.asarray(rows),
        dims=dims,
        x0=x0,
        U=U,
        s=s,
        lo=lo,
        hi=hi,
        int_mask=int_mask,
        mean=np.ascontiguousarray(mean),
        sd=np.ascontiguousarray(sd),
        logmask=np.ascontiguousarray(logmask),
        eps=np.full(B, float(eps)),
        dropped=sorted(set(dropped)),
    )


def _eigen(Z: np.ndarray, names: list[str], group: int, dropped: list[str]):
    """Eigenvectors/values of the shrunk covariance; dims with no spread in the group are dropped."""
    finite = Z[np.all(np.isfinite(Z), axis=1)]
    spread = finite.std(axis=0) if len(finite) > 1 else np.zeros(Z.shape[1])
    kept = [a for a in range(Z.shape[1]) if spread[a] > 1e-12]
    for a in range(Z.shape[1]):
        if a not in kept:
            dropped.append(f"column '{names[a]}' is constant within class {group}; not perturbed there")
    if not kept:
        return np.zeros((0, 0)), np.zeros(0), kept
    cov = shrunk_covariance(finite[:, kept])
    vals, vecs = np.linalg.eigh(cov)
    vals = np.maximum(vals, 1e-12 * max(vals.max(), 1e-300))
    return vecs, vals, kept


# ---------------------------------------------------------------- plausibility (issue §2.7)


def implausible_fraction(X_tr, y_tr, X_new_rows, rows, numeric_idx: list[int], std: Standardizer) -> dict:
    """Share of poisoned rows whose class-conditional Mahalanobis distance on all numeric columns
    exceeds the 99th percentile of the clean rows of that class."""
    cols = np.asarray(numeric_idx)
    if len(rows) == 0 or cols.size == 0:
        return {"fraction": 0.0, "threshold_by_class": {}}
    scale = np.nanstd(X_tr[:, cols], axis=0)
    scale[~(scale > 0)] = 1.0
    centre = np.nanmean(X_tr[:, cols], axis=0)
    Z = (X_tr[:, cols] - centre) / scale
    Z_new = (X_new_rows[:, cols] - centre) / scale
    flagged = np.zeros(len(rows), dtype=bool)
    thresholds = {}
    for c in (0, 1):
        members = np.flatnonzero(y_tr == c)
        clean = Z[members]
        mu = np.nanmean(clean, axis=0)
        cov = shrunk_covariance(np.where(np.isfinite(clean), clean, mu))
        inv = np.linalg.pinv(cov)

        def dist(A, mu=mu, inv=inv):
            A = np.where(np.isfinite(A), A, mu) - mu
            return np.sqrt(np.einsum("ij,jk,ik->i", A, inv, A))

        cut = float(np.quantile(dist(clean), 0.99))
        thresholds[str(c)] = cut
        mine = y_tr[rows] == c
        flagged[mine] = dist(Z_new[mine]) > cut
    return {"fraction": float(flagged.mean()), "threshold_by_class": thresholds, "flagged": flagged}
