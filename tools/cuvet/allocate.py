"""The closed-form allocation: equalize marginal cost per unit value across cohorts.

Maximize sum_k n_k alpha_k s_k^beta_k subject to sum_k n_k s_k <= B, 0 <= s_k <= s_max_k.
KKT: alpha_k beta_k s_k^(beta_k - 1) = lam for every interior cohort, so
s_k(lam) = clip((alpha_k beta_k / lam)^(1/(1-beta_k)), 0, s_max_k); the spend is monotone
decreasing in lam and lam comes from bisection in log space.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError

BISECTION_STEPS = 60


@dataclass
class Allocation:
    spend: np.ndarray  # s_k: incremental cost per user of cohort k
    lam: float  # the common marginal value per unit cost (1/lam = marginal cost per unit value)
    total: float  # sum_k n_k s_k
    budget: float  # the budget it was solved for (after clamping)
    clamped: bool  # the budget exceeded the largest useful spend


def spend_at(lam: float, alpha, beta, smax) -> np.ndarray:
    """s_k(lam) for every cohort (vectorised best_spend)."""
    alpha = np.asarray(alpha, float)
    beta = np.asarray(beta, float)
    smax = np.asarray(smax, float)
    out = np.zeros_like(alpha)
    live = (alpha > 0) & (smax > 0)
    lin = live & (beta >= 1.0)
    out[lin] = np.where(alpha[lin] > lam, smax[lin], 0.0)
    cur = live & (beta < 1.0)
    if lam <= 0:
        out[cur] = smax[cur]
    else:
        with np.errstate(over="ignore"):
            s = (alpha[cur] * beta[cur] / lam) ** (1.0 / (1.0 - beta[cur]))
        out[cur] = np.minimum(s, smax[cur])
    return out


def allocate(n, alpha, beta, smax, budget: float, spend_fn=None) -> Allocation:
    """Solve for lam so that sum n_k s_k(lam) = budget (or the budget is not binding).

    `spend_fn(lam) -> s` replaces the closed form (the Bayesian variant passes its own).
    Cohorts with beta = 1 switch on at lam = alpha: the one(s) at the threshold get the
    leftover budget as a fraction of s_max (the LP tie split), so the budget is met exactly.
    """
    n = np.asarray(n, float)
    alpha = np.asarray(alpha, float)
    beta = np.asarray(beta, float)
    smax = np.asarray(smax, float)
    fn = spend_fn or (lambda lam: spend_at(lam, alpha, beta, smax))
    live = (alpha > 0) & (smax > 0)
    if np.any(np.isnan(smax)) or np.any(live & np.isinf(smax) & (beta >= 1.0)):
        # a linear (beta >= 1) response with no cap has no finite optimum: the solver would return NaN/Inf
        raise DataError("allocation: a cohort with beta >= 1 has no s_max cap (or s_max is NaN); give a finite s_max")
    full = np.where(alpha > 0, smax, 0.0)
    max_total = float(n @ full)
    if budget >= max_total:
        return Allocation(full.copy(), 0.0, max_total, max_total, budget > max_total * (1 + 1e-12))
    # bracket: at lo every cohort is at s_max (spend >= B); at hi spend < B
    lo = float(np.min(alpha[live] * beta[live] * smax[live] ** (beta[live] - 1.0))) * 0.5
    hi = float(np.max(alpha[live] * np.maximum(beta[live], 1e-3))) * 2.0
    if not lo > 0:  # an uncapped cohort (s_max = inf) has zero marginal value at s_max: start below hi
        lo = hi * 1e-3
    hi = max(hi, lo * 2.0)
    for _ in range(200):
        if float(n @ fn(hi)) < budget:
            break
        hi *= 10.0
    for _ in range(200):
        if float(n @ fn(lo)) >= budget:
            break
        lo /= 10.0
    log_lo, log_hi = np.log(lo), np.log(hi)
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (log_lo + log_hi)
        if float(n @ fn(np.exp(mid))) >= budget:
            log_lo = mid
        else:
            log_hi = mid
    lam = float(np.exp(log_hi))
    s = fn(lam)
    total = float(n @ s)
    left = budget - total
    if left > 1e-12 * max(budget, 1e-300):
        # cohorts that switch between lo and hi (beta = 1 thresholds) share what is left
        s_lo = fn(float(np.exp(log_lo)))
        gap = n * (s_lo - s)
        if gap.sum() > 0:
            s = s + (s_lo - s) * min(1.0, left / gap.sum())
            total = float(n @ s)
    return Allocation(s, lam, total, budget, False)


def common_beta_spend(n, alpha, beta: float, budget: float) -> np.ndarray:
    """The closed form for a common beta < 1 and no s_max bound: s_k = B a_k / sum_j n_j a_j, a = alpha^(1/(1-beta))."""
    a = np.asarray(alpha, float) ** (1.0 / (1.0 - beta))
    return budget * a / float(np.asarray(n, float) @ a)


def realize(spend: float, frontier_cost, frontier_arms) -> dict[int, float]:
    """Arm probabilities that spend `spend` on the frontier: mix the two bracketing frontier arms."""
    cost = np.asarray(frontier_cost, float)
    arms = list(frontier_arms)
    if spend <= 0 or len(arms) == 1:
        return {int(arms[0]): 1.0}
    if spend >= cost[-1]:
        return {int(arms[-1]): 1.0}
    j = int(np.searchsorted(cost, spend, side="right"))  # cost[j-1] <= spend < cost[j]
    a, b = arms[j - 1], arms[j]
    p_b = (spend - cost[j - 1]) / (cost[j] - cost[j - 1])
    mix = {int(a): 1.0 - p_b, int(b): p_b}
    return {k: v for k, v in mix.items() if v > 0}
