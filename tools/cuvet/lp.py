"""The multiple-choice knapsack LP every method's estimates are turned into a policy with.

max sum_it x_it v_it  s.t.  sum_it x_it c_it <= B,  sum_t x_it = 1,  x >= 0.
One coupling constraint, so the Lagrangian dual is exact: each user takes argmax_t v - lam c.
That choice only changes where lam crosses a slope of the user's upper concave (cost, value)
hull, so lam* is found exactly, without bisection: collect every hull segment (slope, cost
step), pick by weighted selection the slope at which the cumulative cost step reaches the
budget, and take the segments tied at that slope fractionally so the budget binds.
O(n K^2) for the hulls plus expected O(n K) for the selection.

Two implementations with the same semantics: Numba kernels (CPU, the default) and a
vectorized array-module version (`xp` = numpy or cupy) for --device cuda.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.tools.cuvet import kernels


@dataclass
class LPSolution:
    pi: np.ndarray  # (n, K+1) arm probabilities (a cupy array on the cuda path)
    lam: float  # the dual price of the budget
    value: float
    cost: float


def solve(v, c, budget: float, xp=None) -> LPSolution:
    """Exact LP. `budget` is the total over users; `xp` = an array module selects the vectorized path."""
    if xp is not None:
        return solve_array(v, c, budget, xp)
    v = np.ascontiguousarray(v, dtype=np.float64)
    c = np.ascontiguousarray(c, dtype=np.float64)
    hull, size, slope, step = kernels.hull_segments(v, c)
    lam, theta = kernels.dual_price(c, hull, size, slope, step, float(budget))
    pi, value, cost = kernels.threshold_policy(v, c, hull, size, slope, lam, theta)
    return LPSolution(pi, float(lam), float(value), float(cost))


def hull_segments_array(v, c, xp):
    """kernels.hull_segments, vectorized over users (K is small: the loops run over arms)."""
    n, k = v.shape
    rows = xp.arange(n)
    # rank of each arm in (cost asc, value desc, index asc) order, then the sorted arm per rank
    rank = xp.zeros((n, k), dtype=xp.int64)
    for a in range(k):
        for b in range(k):
            if a != b:
                before = (c[:, b] < c[:, a]) | (
                    (c[:, b] == c[:, a]) & ((v[:, b] > v[:, a]) | ((v[:, b] == v[:, a]) & (b < a)))
                )
                rank[:, a] += before
    order = xp.zeros((n, k), dtype=xp.int64)
    for a in range(k):
        order[rows, rank[:, a]] = a
    hull = xp.zeros((n, k), dtype=xp.int64)
    hull[:, 0] = order[:, 0]
    size = xp.ones(n, dtype=xp.int64)
    for j in range(1, k):
        p = order[:, j]
        cp, vp = c[rows, p], v[rows, p]
        top = hull[rows, size - 1]
        take = (vp > v[rows, top]) & (cp > c[rows, top])
        for _ in range(j):  # pop vertices on or under the chord to p
            q0 = hull[rows, xp.maximum(size - 2, 0)]
            q1 = hull[rows, size - 1]
            under = (v[rows, q1] - v[rows, q0]) * (cp - c[rows, q1]) <= (vp - v[rows, q1]) * (c[rows, q1] - c[rows, q0])
            size = size - (take & (size >= 2) & under)
        hull[rows[take], size[take]] = p[take]
        size = size + take
    slope = xp.zeros((n, max(k - 1, 1)))
    step = xp.zeros((n, max(k - 1, 1)))
    for j in range(k - 1):
        ok = j < size - 1
        a0, a1 = hull[:, j], hull[:, j + 1]
        dc = xp.where(ok, c[rows, a1] - c[rows, a0], 1.0)
        step[:, j] = xp.where(ok, dc, 0.0)
        slope[:, j] = xp.where(ok, (v[rows, a1] - v[rows, a0]) / dc, 0.0)
    return hull, size, slope, step


def solve_array(v, c, budget: float, xp) -> LPSolution:
    """The same LP with array operations only (NumPy or CuPy): hulls, one sort, one cumulative sum."""
    v = xp.asarray(v, dtype=xp.float64)
    c = xp.asarray(c, dtype=xp.float64)
    n, k = v.shape
    rows = xp.arange(n)
    hull, size, slope, step = hull_segments_array(v, c, xp)
    need = budget - float(c[rows, hull[:, 0]].sum())
    valid = xp.arange(slope.shape[1])[None, :] < (size - 1)[:, None]
    s, w = slope[valid], step[valid]
    total = float(w.sum())
    theta = 0.0
    if need >= total:
        lam = 0.0
    elif need <= 0.0:
        lam = float(s.max()) if s.size else 0.0
    else:
        order = xp.argsort(-s)
        s_sorted = s[order]
        reach = xp.cumsum(w[order])
        first = int(xp.searchsorted(reach, xp.asarray([need]))[0])  # first segment whose cumulative step reaches need
        lam_arr = s_sorted[min(first, s_sorted.shape[0] - 1)]
        above = float(w[s > lam_arr].sum())
        tied = float(w[s == lam_arr].sum())
        lam = float(lam_arr)
        theta = min(max((need - above) / tied, 0.0), 1.0)
    steeper = valid & (slope > lam)
    j = steeper.sum(axis=1)
    a = hull[rows, j]
    pi = xp.zeros((n, k))
    pi[rows, a] = 1.0
    at = xp.minimum(j, k - 2) if k > 1 else j
    mix = (j < size - 1) & (slope[rows, at] == lam) & (theta > 0.0)
    if bool(mix.any()):
        b = hull[rows[mix], j[mix] + 1]
        pi[rows[mix], a[mix]] = 1.0 - theta
        pi[rows[mix], b] = theta
    value = float((pi * v).sum())
    cost = float((pi * c).sum())
    return LPSolution(pi, lam, value, cost)


def solve_highs(v: np.ndarray, c: np.ndarray, budget: float) -> LPSolution:
    """The same LP with scipy's HiGHS (the reference; slow beyond ~1e5 users)."""
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix, vstack

    n, k = v.shape
    cols = np.arange(n * k)
    eq = csr_matrix((np.ones(n * k), (np.repeat(np.arange(n), k), cols)), shape=(n, n * k))
    ub = csr_matrix(c.reshape(1, -1))
    res = linprog(
        -v.ravel(),
        A_ub=ub,
        b_ub=[budget],
        A_eq=vstack([eq]),
        b_eq=np.ones(n),
        bounds=(0, None),
        method="highs",
    )
    if res.status != 0:
        raise RuntimeError(f"HiGHS failed: {res.message}")
    pi = res.x.reshape(n, k)
    return LPSolution(pi, float(-res.ineqlin.marginals[0]), float(-res.fun), float((pi * c).sum()))
