"""The CUVET tree: a decision-focused partition of the user space into cohorts.

A split is scored by gain = L(left; lam) + L(right; lam) - L(parent; lam), with
L(k; lam) = n_k max_s [alpha_k s^beta_k - lam s]: value net of priced cost. Structure
is grown on one half of the rows; the leaves are re-estimated on the other (honesty).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from methodkit.tools.cuvet import kernels
from methodkit.tools.cuvet.binning import N_BINS, Binner

NO_PRIOR_MU = np.zeros(2)
NO_PRIOR_PREC = np.zeros((2, 2))


@dataclass
class TreeParams:
    max_depth: int = 4
    min_leaf: int = 2000
    min_arm: int = 50
    min_gain_frac: float = 1e-3  # gain must exceed this fraction of L(root)
    lookahead: bool = False  # score splits by the best two-level gain they allow (ours)
    prune_scoring: str = "auto"  # honest pruning score: auto, the power-law curve or the raw arm means (prune)
    prune_z: float | None = None  # pruning margin in SE (None: PRUNE_Z)

    def scaled(self, n_struct: int, arm_counts: np.ndarray) -> TreeParams:
        """Scale the size limits to small data (ours): at most n/10 per leaf, 1/4 of the rarest arm per child."""
        min_leaf = int(min(self.min_leaf, max(20, n_struct // 10)))
        min_arm = int(min(self.min_arm, max(10, int(arm_counts.min()) // 4)))
        return replace(self, min_leaf=min_leaf, min_arm=min_arm)


LOOKAHEAD_STEP = 4  # the lookahead's second level tries every 4th threshold of a 64-bin feature


@dataclass
class Node:
    depth: int
    n: int
    feature: int = -1
    bin: int = -1
    left: int = -1
    right: int = -1
    leaf: int = -1
    gain: float = 0.0
    left_bins: tuple[int, ...] | None = None  # categorical: the bins (levels) that go left

    def goes_left(self, codes: np.ndarray) -> np.ndarray:
        if self.left_bins is not None:
            return np.isin(codes, np.asarray(self.left_bins, dtype=codes.dtype))
        return codes <= self.bin


@dataclass
class Tree:
    nodes: list[Node] = field(default_factory=list)

    @property
    def n_leaves(self) -> int:
        return sum(1 for nd in self.nodes if nd.leaf >= 0)

    def leaf_of_codes(self, codes_t: np.ndarray) -> np.ndarray:
        """Leaf index of each column of (d, n) bin codes."""
        n = codes_t.shape[1]
        out = np.full(n, -1, dtype=np.int64)
        stack = [(0, np.arange(n))]
        while stack:
            k, rows = stack.pop()
            nd = self.nodes[k]
            if nd.leaf >= 0:
                out[rows] = nd.leaf
                continue
            go_left = nd.goes_left(codes_t[nd.feature, rows])
            stack.append((nd.left, rows[go_left]))
            stack.append((nd.right, rows[~go_left]))
        return out


def node_level_order(hist_f: np.ndarray, n_levels: int) -> np.ndarray:
    """The levels of a categorical feature in increasing pooled dV/dC at this node (Fisher's ordering).

    Ordered per node, as CART and LightGBM do, because a level's ratio can rank differently
    in different parts of the tree; a global order could leave a cohort's levels apart and
    unreachable by a threshold. Levels without treated or control rows go last.
    """
    n = hist_f[:n_levels, :, 0]
    sy = hist_f[:n_levels, :, 1]
    sz = hist_f[:n_levels, :, 3]
    n0, nt = n[:, 0], n[:, 1:].sum(1)
    ratio = np.full(n_levels, np.inf)
    ok = (n0 > 0) & (nt > 0)
    dv = sy[ok, 1:].sum(1) / nt[ok] - sy[ok, 0] / n0[ok]
    dc = sz[ok, 1:].sum(1) / nt[ok] - sz[ok, 0] / n0[ok]
    ratio[ok] = np.where(dc > 1e-12, dv / np.maximum(dc, 1e-12), np.sign(dv) * 1e12)
    return np.argsort(ratio, kind="stable")


def grow(
    codes_t: np.ndarray,
    n_valid: np.ndarray,
    rows: np.ndarray,
    t: np.ndarray,
    y: np.ndarray,
    z: np.ndarray,
    n_arms: int,
    lam: float,
    params: TreeParams,
    beta_root: float,
    prior_mu: np.ndarray = NO_PRIOR_MU,
    prior_prec: np.ndarray = NO_PRIOR_PREC,
    histogram=None,
    split_finder=None,
    categorical=None,
) -> Tree:
    """Grow the tree depth-first on `rows` at a fixed lam.

    `histogram` and `split_finder` default to the Numba kernels; the benchmark passes the
    pure-NumPy reference to check that it grows the identical tree. With params.lookahead,
    nodes with room for two more levels are split by kernels.lookahead_split instead, and
    a node's recorded gain (and the stopping rule) is its two-level score.
    """
    subtract = histogram is None  # the sibling trick; the reference path computes every histogram
    histogram = histogram or kernels.node_histogram
    split_finder = split_finder or kernels.best_split
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    root_stats = kernels.arm_stats(rows, t, y, z, n_arms)
    a, b, s, _ = kernels.fit_power_law(root_stats, beta_root, prior_mu, prior_prec)
    l_root = kernels.node_value(float(len(rows)), a, b, s, lam)
    min_gain = params.min_gain_frac * max(l_root, 0.0)
    tree = Tree([Node(0, len(rows))])
    stack = [(0, rows, root_stats, None)]
    n_leaves = 0
    cat = np.zeros(codes_t.shape[0], dtype=bool) if categorical is None else np.asarray(categorical, bool)

    def can_split(depth: int, size: int) -> bool:
        return depth < params.max_depth and size >= 2 * params.min_leaf

    while stack:
        k, idx, stats, hist = stack.pop()
        nd = tree.nodes[k]
        f, bin_, gain, orders = -1, -1, 0.0, {}
        if can_split(nd.depth, len(idx)):
            if hist is None:
                hist = histogram(codes_t, idx, t, y, z, N_BINS, n_arms)
            scored = hist
            if cat.any():  # categorical levels in this node's ratio order; the split finder sees them as ordinal
                scored = hist.copy()
                for j in np.flatnonzero(cat):
                    orders[j] = node_level_order(hist[j], int(n_valid[j]))
                    scored[j, : len(orders[j])] = hist[j, orders[j]]
            if params.lookahead and nd.depth + 2 <= params.max_depth and len(idx) >= 4 * params.min_leaf:
                rank = np.tile(np.arange(N_BINS, dtype=np.int64), (codes_t.shape[0], 1))
                for j, order in orders.items():
                    rank[j, order] = np.arange(len(order))
                f, bin_, _, gain = kernels.lookahead_split(
                    codes_t, idx, t, y, z, rank, scored, n_valid, stats, lam, params.min_leaf, params.min_arm,
                    beta_root, prior_mu, prior_prec, LOOKAHEAD_STEP,
                )  # fmt: skip
            else:
                f, bin_, gain = split_finder(
                    scored, n_valid, stats, lam, params.min_leaf, params.min_arm, beta_root, prior_mu, prior_prec
                )
        if f < 0 or gain <= min_gain or gain <= 0:
            nd.leaf = n_leaves
            n_leaves += 1
            continue
        nd.feature, nd.bin, nd.gain = int(f), int(bin_), float(gain)
        if f in orders:
            nd.left_bins = tuple(sorted(int(v) for v in orders[f][: bin_ + 1]))
        left = np.zeros(N_BINS, dtype=np.bool_)
        if nd.left_bins is not None:
            left[list(nd.left_bins)] = True
        else:
            left[: nd.bin + 1] = True
        li, ri = kernels.split_rows(codes_t[f], idx, left)
        ls = kernels.arm_stats(li, t, y, z, n_arms)
        lh = rh = None
        if subtract and (can_split(nd.depth + 1, len(li)) or can_split(nd.depth + 1, len(ri))):
            # histogram the smaller child only; the larger one is the parent's minus it (as LightGBM does)
            if len(li) <= len(ri):
                lh = histogram(codes_t, li, t, y, z, N_BINS, n_arms)
                rh = hist - lh
            else:
                rh = histogram(codes_t, ri, t, y, z, N_BINS, n_arms)
                lh = hist - rh
        nd.left = len(tree.nodes)
        tree.nodes.append(Node(nd.depth + 1, len(li)))
        nd.right = len(tree.nodes)
        tree.nodes.append(Node(nd.depth + 1, len(ri)))
        stack.append((nd.right, ri, stats - ls, rh))
        stack.append((nd.left, li, ls, lh))
    return tree


# ---------------------------------------------------------------- the pure-NumPy reference


def numpy_histogram(codes_t, rows, t, y, z, n_bins, n_arms):
    """Reference for kernels.node_histogram with np.bincount."""
    d = codes_t.shape[0]
    hist = np.zeros((d, n_bins, n_arms, kernels.N_STATS))
    tr, yr, zr = t[rows], y[rows], z[rows]
    weights = [None, yr, yr * yr, zr, zr * zr]
    for f in range(d):
        key = codes_t[f, rows].astype(np.int64) * n_arms + tr
        for s, w in enumerate(weights):
            hist[f, :, :, s] = np.bincount(key, weights=w, minlength=n_bins * n_arms).reshape(n_bins, n_arms)
    return hist


def numpy_split_finder(hist, n_valid, parent, lam, min_leaf, min_arm, beta_root, prior_mu, prior_prec):
    """Reference for kernels.best_split: cumulative sums in NumPy, fits through the kernels' Python bodies."""
    fit = kernels.fit_power_law.py_func
    value = kernels.node_value.py_func
    d = hist.shape[0]
    n_par = parent[:, 0].sum()
    a0, b0, s0, _ = fit(parent, beta_root, prior_mu, prior_prec)
    l_par = value(n_par, a0, b0, s0, lam)
    best = (-1, -1, -np.inf)
    for f in range(d):
        cum = np.cumsum(hist[f], axis=0)
        for b in range(int(n_valid[f]) - 1):
            left = cum[b]
            right = parent - left
            if left[:, 0].min() < min_arm or right[:, 0].min() < min_arm:
                continue
            if left[:, 0].sum() < min_leaf or right[:, 0].sum() < min_leaf:
                continue
            al, bl, sl, _ = fit(left, beta_root, prior_mu, prior_prec)
            ar, br, sr, _ = fit(right, beta_root, prior_mu, prior_prec)
            nl = left[:, 0].sum()
            g = value(nl, al, bl, sl, lam) + value(n_par - nl, ar, br, sr, lam) - l_par
            if g > best[2]:
                best = (f, b, g)
    if best[0] < 0:
        return -1, -1, 0.0
    return best


def describe_split(binner: Binner, features: list[str], levels: dict, nd: Node) -> dict:
    """A split in raw units for model.json: a numeric threshold or the levels that go left."""
    f, b = nd.feature, nd.bin
    name = features[f]
    if binner.edges[f] is not None:
        return {"feature": name, "threshold": float(binner.edges[f][b])}
    order = binner.orders[f]
    labels = levels.get(name, [str(i) for i in range(len(order))])
    left = nd.left_bins if nd.left_bins is not None else range(b + 1)
    return {"feature": name, "left_levels": [labels[i] for i in range(len(order)) if order[i] in set(left)]}


def priced_moments(stats: np.ndarray, cross: np.ndarray | None, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Per arm, the mean and standard deviation of y - lam z (population moments) from the arm sums.

    With `cross` (per-arm sums of y*z) the variance is exact; without it, the bound
    (sd_y + lam sd_z)^2, which holds whatever the correlation.
    """
    n = np.maximum(stats[:, 0], 1.0)
    my, mz = stats[:, 1] / n, stats[:, 3] / n
    vy = np.maximum(stats[:, 2] / n - my**2, 0.0)
    vz = np.maximum(stats[:, 4] / n - mz**2, 0.0)
    if cross is None:
        return my - lam * mz, np.sqrt(vy) + lam * np.sqrt(vz)
    return my - lam * mz, np.sqrt(np.maximum(vy + lam * lam * vz - 2.0 * lam * (cross / n - my * mz), 0.0))


PRUNE_Z = 1.64  # a split must beat its parent on the estimation half by this many SE (ours)
PRUNE_SCORES = ("auto", "curve", "arms")
CURVE_MIN_T = 2.0  # the curve score needs every fitted point's dV >= this many SE; else its variance is infinite


def curve_fit_cov(stats: np.ndarray, beta_root: float, prior_mu, prior_prec) -> tuple[float, float, float, np.ndarray]:
    """(alpha, beta, s_max, covariance of (log alpha, beta)) of a node's power-law fit (kernels.fit_power_law).

    The WLS weights are the inverse delta-method variances of log dV, so the covariance is the
    inverse of the weighted normal matrix (plus the prior's precision); zero when nothing is fitted.
    """
    alpha, beta, smax, npts = kernels.fit_power_law(stats, beta_root, prior_mu, prior_prec)
    if npts == 0 or alpha <= 0:
        return 0.0, beta, 0.0, np.zeros((2, 2))
    dc, dv, var, ok = kernels.increments(stats)
    arms = kernels.frontier(dc, dv, ok)[1:]
    if (dv[arms] < CURVE_MIN_T * np.sqrt(var[arms])).any():  # log dV's delta method needs dV well above its SE
        return alpha, beta, smax, np.full((2, 2), np.inf)
    w = np.clip(dv[arms] ** 2 / var[arms], kernels.W_MIN, kernels.W_MAX)
    x = np.log(dc[arms])
    a = np.array([[w.sum(), (w * x).sum()], [(w * x).sum(), (w * x * x).sum()]]) + np.asarray(prior_prec)
    if npts < 2 and prior_prec[1, 1] <= 0:  # beta fixed at beta_root: only log alpha is uncertain
        return alpha, beta, smax, np.array([[1.0 / a[0, 0], 0.0], [0.0, 0.0]])
    return alpha, beta, smax, np.linalg.pinv(a)


def prune_statistic(
    tree: Tree, struct_stats, est_stats, lam, beta_root, prior_mu, prior_prec, est_cross=None, scoring="auto"
) -> float:
    """The honest pruning statistic of the root split (children's score minus the root's, in SE)."""
    record: dict = {}
    prune(
        tree, struct_stats, est_stats, lam, beta_root, prior_mu, prior_prec,
        est_cross=est_cross, record=record, scoring=scoring,
    )  # fmt: skip
    return float(record[0])


def prune(
    tree: Tree,
    struct_stats: list,
    est_stats: list,
    lam: float,
    beta_root: float,
    prior_mu,
    prior_prec,
    z: float | None = None,
    est_cross: list | None = None,
    record: dict | None = None,
    scoring: str = "auto",
) -> Tree:
    """Honest pruning (ours): undo every split that does not pay off on the estimation half.

    Each node's decision (its spend, and for scoring="arms" its arm mix) is made from its
    structure-half statistics and scored on the estimation half. A split stays only if its
    children's decisions beat the parent's decision, on the same rows, by z standard errors of
    that difference. The plug-in gain alone cannot do this: at a fixed lam, splitting never
    lowers the sum of fitted L, and without the margin noise splits survive half the time.

    scoring="curve": a decision's score on node j is n_j (alpha_j s^beta_j - lam s),
    the power law fitted to j's estimation-half points; its variance by the delta method from
    the fit's covariance (curve_fit_cov). scoring="arms": the model-free score n_est * sum_t
    p_t (dV_t - lam dC_t) from the raw arm means of the mix, its variance closed-form from the arm
    sums and `est_cross` (Var(y - lam z) exact; without it, the bound (sd_y + lam sd_z)^2).
    The arm score is unbiased whatever the curve, but on flat priced-value curves most of a
    split's mix change moves weight between arms of nearly equal value, whose raw means are
    noisy: on the planted design (bench/cuvet/split_study.py) the true split's arm statistic is
    0.6-1.6 SE at 100k estimation rows, its curve statistic 2.6-7.4 SE. With few arms (two
    treated arms, small leaves) the curve's beta is poorly determined and the arm score is the
    tighter one. scoring="auto" (default) tests each split with whichever of the two has the
    smaller variance (chosen by the variance, not by the statistic, so the margin keeps its meaning).
    """
    from methodkit.tools.cuvet.allocate import realize

    if scoring not in PRUNE_SCORES:
        raise ValueError(f"scoring must be one of {PRUNE_SCORES}, got {scoring!r}")
    z = PRUNE_Z if z is None else z
    st: dict[int, np.ndarray] = {}
    es: dict[int, np.ndarray] = {}
    ex: dict[int, np.ndarray | None] = {}

    def total(k: int) -> None:
        nd = tree.nodes[k]
        if nd.leaf >= 0:
            st[k], es[k] = struct_stats[nd.leaf], est_stats[nd.leaf]
            ex[k] = None if est_cross is None else est_cross[nd.leaf]
            return
        total(nd.left)
        total(nd.right)
        st[k], es[k] = st[nd.left] + st[nd.right], es[nd.left] + es[nd.right]
        ex[k] = None if est_cross is None else ex[nd.left] + ex[nd.right]

    def spend_of(k: int) -> float:
        a, b, smax, _ = kernels.fit_power_law(st[k], beta_root, prior_mu, prior_prec)
        return float(kernels.best_spend(a, b, smax, lam))

    def decision(k: int) -> np.ndarray:
        """The arm mix node k's structure-half statistics choose at lam."""
        spend = spend_of(k)
        dc, dv, _, ok = kernels.increments(st[k])
        arms = kernels.frontier(dc, dv, ok)
        w = np.zeros(st[k].shape[0])
        for x, p in realize(spend, [dc[x] if x else 0.0 for x in arms], arms).items():
            w[x] = p
        return w

    def score(k: int, w: np.ndarray) -> tuple[float, float]:
        """(honest score of mix w on node k's estimation rows, its variance)."""
        e = es[k]
        n = np.maximum(e[:, 0], 1.0)
        mean, sd = priced_moments(e, ex[k], lam)
        treated = w.copy()
        treated[0] = 0.0
        treated[e[:, 0] < 1.0] = 0.0
        diff = float(treated @ (mean - mean[0]))
        var = float((treated**2 * sd**2 / n).sum() + treated.sum() ** 2 * sd[0] ** 2 / n[0])
        ne = float(e[:, 0].sum())
        return ne * diff, ne * ne * var

    fits: dict[int, tuple] = {}

    def curve_gain(j: int, s_new: float, s_old: float) -> tuple[float, float]:
        """(score of spend s_new minus s_old on node j's estimation curve, its delta-method variance)."""
        if j not in fits:
            fits[j] = curve_fit_cov(es[j], beta_root, prior_mu, prior_prec)
        alpha, beta, smax, cov = fits[j]
        ne = float(es[j][:, 0].sum())

        def parts(s: float) -> tuple[float, np.ndarray]:
            s_eff = min(s, smax)
            if alpha <= 0 or s_eff <= 0:
                return -lam * s, np.zeros(2)
            v = alpha * s_eff**beta
            return v - lam * s, v * np.array([1.0, np.log(s_eff)])

        f1, g1 = parts(s_new)
        f0, g0 = parts(s_old)
        g = ne * (g1 - g0)
        if not np.isfinite(cov).all():
            return ne * (f1 - f0), np.inf
        return ne * (f1 - f0), float(g @ cov @ g)

    total(0)
    keep: dict[int, bool] = {}

    def best(k: int) -> list[tuple[int, np.ndarray, float]]:
        """The (leaf node, arm mix, spend) triples of the best pruned subtree rooted at k."""
        nd = tree.nodes[k]
        w, s_k = decision(k), spend_of(k)
        if nd.leaf >= 0:
            return [(k, w, s_k)]
        parts = best(nd.left) + best(nd.right)
        tests = {}
        if scoring in ("arms", "auto"):
            # children's mixes minus the parent's on the same rows: per part, the mix w_j - w
            tests["arms"] = (sum(score(j, wj)[0] for j, wj, _ in parts) - score(k, w)[0],
                             sum(score(j, wj - w)[1] for j, wj, _ in parts))  # fmt: skip
        if scoring in ("curve", "auto"):
            diffs = [curve_gain(j, s_j, s_k) for j, _, s_j in parts]
            tests["curve"] = (sum(d for d, _ in diffs), sum(v for _, v in diffs))
        _decide(k, *min(tests.values(), key=lambda dv: dv[1]))  # auto: the score with the smaller variance
        return parts if keep[k] else [(k, w, s_k)]

    def _decide(k: int, diff: float, var: float) -> None:
        keep[k] = diff > z * np.sqrt(max(var, 0.0))
        if record is not None:  # the split's statistic in SE, for diagnosis
            record[k] = diff / np.sqrt(var) if var > 0 else np.inf * np.sign(diff)

    best(0)
    out = Tree([])

    def copy(k: int, depth: int) -> int:
        nd = tree.nodes[k]
        idx = len(out.nodes)
        out.nodes.append(Node(depth, nd.n))
        if nd.leaf < 0 and keep.get(k, False):
            new = out.nodes[idx]
            new.feature, new.bin, new.gain, new.left_bins = nd.feature, nd.bin, nd.gain, nd.left_bins
            new.left = copy(nd.left, depth + 1)
            new.right = copy(nd.right, depth + 1)
        else:
            out.nodes[idx].leaf = sum(1 for x in out.nodes if x.leaf >= 0)
        return idx

    copy(0, 0)
    return out
