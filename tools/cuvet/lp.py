"""The multiple-choice knapsack LP every method's estimates are turned into a policy with.

max sum_it x_it v_it  s.t.  sum_it x_it c_it <= B,  sum_t x_it = 1,  x >= 0.
One coupling constraint, so the Lagrangian is exact: each user takes argmax_t v - lam c,
lam comes from bisection, and the users whose choice flips at lam* (the ties) get the
two choices mixed so that the budget is met with equality.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.tools.cuvet import kernels

BISECTION_STEPS = 100
REL_TOL = 1e-13


@dataclass
class LPSolution:
    pi: np.ndarray  # (n, K+1) arm probabilities
    lam: float
    value: float
    cost: float


def _one_hot(arm: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((len(arm), k))
    out[np.arange(len(arm)), arm] = 1.0
    return out


def solve(v: np.ndarray, c: np.ndarray, budget: float, choice=None) -> LPSolution:
    """Exact LP by Lagrangian bisection. `budget` is the total over users; `choice` swaps the per-user kernel."""
    v = np.ascontiguousarray(v, dtype=np.float64)
    c = np.ascontiguousarray(c, dtype=np.float64)
    choice = choice or kernels.lagrangian_choice
    n, k = v.shape
    arm0 = choice(v, c, 0.0)
    tv0, tc0 = kernels.gather_totals(v, c, arm0)
    if tc0 <= budget:
        return LPSolution(_one_hot(arm0, k), 0.0, tv0, tc0)
    dv = v - v[np.arange(n), np.argmin(c, axis=1)][:, None]
    dc = c - c.min(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(dc > 0, dv / dc, 0.0)
    lo, hi = 0.0, float(max(ratio.max(), 0.0)) * 2.0 + 1.0
    arm_hi = choice(v, c, hi)
    tv_hi, tc_hi = kernels.gather_totals(v, c, arm_hi)
    if tc_hi > budget:  # even the cheapest choice is over budget: take it (infeasible budget)
        return LPSolution(_one_hot(arm_hi, k), hi, tv_hi, tc_hi)
    arm_lo, tc_lo = arm0, tc0
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi or hi - lo <= REL_TOL * hi:
            break  # breakpoints closer than this are ties; the mix below resolves them exactly
        arm = choice(v, c, mid)
        tv, tc = kernels.gather_totals(v, c, arm)
        if tc > budget:
            lo, arm_lo, tc_lo = mid, arm, tc
        else:
            hi, arm_hi, tv_hi, tc_hi = mid, arm, tv, tc
    pi = _one_hot(arm_hi, k)
    theta = (budget - tc_hi) / (tc_lo - tc_hi) if tc_lo > tc_hi else 0.0
    flip = np.flatnonzero(arm_lo != arm_hi)
    pi[flip, arm_hi[flip]] -= theta
    pi[flip, arm_lo[flip]] += theta
    value = float((pi * v).sum())
    cost = float((pi * c).sum())
    return LPSolution(pi, hi, value, cost)


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
