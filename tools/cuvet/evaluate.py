"""Off-policy value and cost of a policy on RCT data (IPW), with bootstrap CIs.

V(pi) = (1/n) sum_i pi(T_i|x_i) Y_i / e(T_i), and C(pi) likewise with the cost Z_i;
e(t) are the empirical arm frequencies unless propensities are given. Cost is reported
as incremental over all-control, the quantity the budget bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError
from methodkit.core.rng import chunk_seeds
from methodkit.tools.cuvet import kernels
from methodkit.tools.cuvet.data import RCT

N_BOOT = 200


@dataclass
class PolicyValue:
    value: float
    cost: float  # incremental over control
    value_control: float
    value_ref: float
    cost_ref: float
    uplift_pct: float  # 100 (V - V_ref) / (V_ref - V_control)
    budget: float
    feasible: bool
    value_ci: tuple[float, float]
    cost_ci: tuple[float, float]
    uplift_ci: tuple[float, float]
    value_se: float
    n: int

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def propensities(data: RCT, given: np.ndarray | None = None) -> np.ndarray:
    """e(T_i) per row: the given column, else the arm frequency within the row's stratum (or overall)."""
    if given is not None:
        e = np.asarray(given, float)
        bad = np.flatnonzero(~((e > 0) & (e <= 1)))
        if bad.size:
            raise DataError(f"propensity of row {int(bad[0]) + 1} is {e[bad[0]]!r}; it must be in (0, 1]")
        return e
    if data.strata is None:
        freq = data.arm_counts() / data.n
        return freq[data.t]
    import pandas as pd

    key = pd.DataFrame({"s": data.strata, "t": data.t})
    cell = key.groupby(["s", "t"], dropna=False)["t"].transform("size").to_numpy(float)
    size = key.groupby("s", dropna=False)["t"].transform("size").to_numpy(float)
    return cell / size


def ipw_terms(pi_obs: np.ndarray, data: RCT, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w = pi_obs / e
    return w * data.y, w * data.z


def point(pi: np.ndarray, data: RCT, e: np.ndarray) -> dict:
    """Fast IPW value, incremental cost and their standard errors (no bootstrap)."""
    obs = pi[np.arange(data.n), data.t]
    tv, tc = ipw_terms(obs, data, e)
    ctl = (data.t == 0).astype(float)
    cv, cc = ipw_terms(ctl, data, e)
    dc = tc - cc
    return {
        "value": float(tv.mean()),
        "value_se": float(tv.std(ddof=1) / np.sqrt(data.n)),
        "value_control": float(cv.mean()),
        "cost": float(dc.mean()),
        "cost_se": float(dc.std(ddof=1) / np.sqrt(data.n)),
    }


def evaluate(
    pi: np.ndarray,
    pi_ref: np.ndarray,
    data: RCT,
    budget_per_user: float,
    *,
    e: np.ndarray | None = None,
    seed: int = 0,
    n_boot: int = N_BOOT,
    strict: bool = False,
) -> PolicyValue:
    """IPW value and cost of pi against the budget-matched reference pi_ref, with bootstrap CIs."""
    e = propensities(data) if e is None else e
    rows = np.arange(data.n)
    obs = np.ascontiguousarray(pi[rows, data.t])
    ref = np.ascontiguousarray(pi_ref[rows, data.t])
    ctl = (data.t == 0).astype(np.float64)
    seeds = (chunk_seeds(seed, n_boot) % np.uint64(2**31)).astype(np.int64)
    reps = kernels.ipw_bootstrap(obs, ref, ctl, data.y, data.z, e, seeds)
    v, c = _mean(obs, data, e)
    vr, cr = _mean(ref, data, e)
    v0, c0 = _mean(ctl, data, e)
    denom = vr - v0
    uplift = 100.0 * (v - vr) / denom if denom != 0 else float("nan")
    inc_cost = reps[:, 1] - reps[:, 5]
    with np.errstate(divide="ignore", invalid="ignore"):
        up_reps = 100.0 * (reps[:, 0] - reps[:, 2]) / (reps[:, 2] - reps[:, 4])
    cost_ci = _ci(inc_cost)
    cost = c - c0
    feasible = (cost_ci[1] if strict else cost) <= budget_per_user * (1 + 1e-9)
    return PolicyValue(
        v,
        cost,
        v0,
        vr,
        cr - c0,
        uplift,
        budget_per_user,
        bool(feasible),
        _ci(reps[:, 0]),
        cost_ci,
        _ci(up_reps[np.isfinite(up_reps)]) if np.isfinite(up_reps).any() else (float("nan"), float("nan")),
        float(reps[:, 0].std(ddof=1)),
        data.n,
    )


def _mean(pi_obs, data: RCT, e) -> tuple[float, float]:
    tv, tc = ipw_terms(pi_obs, data, e)
    return float(tv.mean()), float(tc.mean())


def _ci(x: np.ndarray) -> tuple[float, float]:
    return float(np.quantile(x, 0.025)), float(np.quantile(x, 0.975))


def aucc(budgets, gains) -> float:
    """Area under the incremental value vs budget curve from (0, 0), divided by the largest budget (Du et al. 2019)."""
    b = np.concatenate([[0.0], np.asarray(budgets, float)])
    g = np.concatenate([[0.0], np.asarray(gains, float)])
    order = np.argsort(b)
    b, g = b[order], g[order]
    return float(np.sum(0.5 * (g[1:] + g[:-1]) * np.diff(b)) / b[-1]) if b[-1] > 0 else float("nan")
