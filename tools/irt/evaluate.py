"""Scoring a fit against the generating truth: scale alignment, then the paper's outcome metrics.

Alignment: a sign check (corr(theta_hat, theta) < 0 -> flip and flag `sign_flip`), then mean-sigma
linking of theta to the truth, theta* = A theta_hat + B, carried to items as b* = A b_hat + B,
a* = a_hat / A (intervals likewise), or Stocking-Lord linking (A, B minimising the squared
distance between the test characteristic curves of the truth and of the linked estimates, over
a N(0, 1)-weighted grid). Fit outputs are never changed: eval reports the flip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError, UsageError

NEAR_TIE = 0.2
TOP_K = 10
LINKINGS = ("mean-sigma", "stocking-lord")
# metrics that do not depend on the linking (predictive ones use the fit's own scale)
LINK_FREE = frozenset({"heldout_cells", "brier", "log_loss", "auc", "rmse_expected_score", "frac_a_nonpositive"})


def _corr(x, y) -> float | None:
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3 or np.std(x[ok]) == 0 or np.std(y[ok]) == 0:
        return None
    return float(np.corrcoef(x[ok], y[ok])[0, 1])


def link(theta_hat, theta):
    """(A, B, flipped): theta* = A * s * theta_hat + B with s = -1 when the scale came out reversed."""
    r = _corr(theta_hat, theta)
    flipped = r is not None and r < 0
    t = -np.asarray(theta_hat, float) if flipped else np.asarray(theta_hat, float)
    sd = t.std()
    A = float(np.std(theta) / sd) if sd > 0 else 1.0
    B = float(np.mean(theta) - A * t.mean())
    return A, B, flipped


@dataclass
class Link:
    A: float
    B: float
    flipped: bool


def _tcc(grid, a, b, c):
    """Test characteristic curve: expected number correct at each grid point."""
    z = np.clip(a[None, :] * (grid[:, None] - b[None, :]), -50, 50)
    return (c[None, :] + (1 - c[None, :]) / (1 + np.exp(-z))).sum(1)


def stocking_lord(est, truth_a, truth_b, truth_c, truth_theta=None, n_grid: int = 41) -> Link:
    """Stocking & Lord (1983): A, B minimising sum_q w_q (TCC_truth(x_q) - TCC_linked(x_q))^2.

    Linked items: a* = s a_hat / A, b* = A s b_hat + B (s = -1 when the scale came out reversed:
    decided from theta when the truth has it, else from the difficulties). Grid: n_grid points on
    [-4, 4] weighted by the N(0, 1) density. Starts from mean-sigma (theta) or (1, 0).
    """
    from scipy import optimize

    a_hat, b_hat = np.asarray(est.a, float), np.asarray(est.b, float)
    c_hat = np.asarray(est.c, float)
    truth_a, truth_b, truth_c = (np.asarray(v, float) for v in (truth_a, truth_b, truth_c))
    if truth_theta is not None:
        start = link(est.theta, truth_theta)
        flipped, A0, B0 = start[2], start[0], start[1]
    else:
        r = _corr(b_hat, truth_b)
        flipped, A0, B0 = bool(r is not None and r < 0), 1.0, 0.0
    s = -1.0 if flipped else 1.0
    grid = np.linspace(-4, 4, n_grid)
    w = np.exp(-0.5 * grid**2)
    w /= w.sum()
    target = _tcc(grid, truth_a, truth_b, truth_c)

    def loss(x):
        A, B = np.exp(x[0]), x[1]
        return float(w @ (target - _tcc(grid, s * a_hat / A, A * s * b_hat + B, c_hat)) ** 2)

    best = None
    for x0 in ([np.log(max(A0, 1e-6)), B0], [0.0, 0.0]):
        res = optimize.minimize(
            loss, np.array(x0), method="Nelder-Mead", options={"xatol": 1e-9, "fatol": 1e-14, "maxiter": 4000}
        )
        if best is None or res.fun < best.fun:
            best = res
    return Link(float(np.exp(best.x[0])), float(best.x[1]), flipped)


def ranking_metrics(theta_hat, theta) -> dict:
    from scipy import stats

    tau = stats.kendalltau(theta_hat, theta).statistic
    rho = stats.spearmanr(theta_hat, theta).statistic
    k = min(TOP_K, len(theta))
    top_hat = set(np.argsort(-np.asarray(theta_hat))[:k])
    top = set(np.argsort(-np.asarray(theta))[:k])
    i, j = np.triu_indices(len(theta), 1)
    gap = theta[i] - theta[j]
    near = np.abs(gap) < NEAR_TIE
    errors = np.sign(theta_hat[i] - theta_hat[j])[near] != np.sign(gap[near])
    return {
        "kendall_tau": float(tau),
        "spearman_rho": float(rho),
        "top10_overlap": len(top & top_hat) / k,
        "near_tie_pairs": int(near.sum()),
        "near_tie_order_error": float(errors.mean()) if near.any() else None,
    }


def _coverage(low, high, truth):
    if low is None or high is None:
        return None
    ok = np.isfinite(low) & np.isfinite(high)
    if not ok.any():
        return None
    return float(np.mean((low[ok] <= truth[ok]) & (truth[ok] <= high[ok])))


def item_metrics(est, truth_a, truth_b, truth_c, A: float, B: float, flipped: bool, model: str) -> dict:
    from scipy import stats

    s = -1.0 if flipped else 1.0
    a_hat = np.asarray(est.a, float)
    b_lin = A * s * np.asarray(est.b, float) + B
    a_lin = s * a_hat / A
    out = {"frac_a_nonpositive": float(np.mean(a_hat <= 0)) if model != "1pl" else 0.0}
    for name, hat, truth in (("a", a_lin, truth_a), ("b", b_lin, truth_b), ("c", np.asarray(est.c, float), truth_c)):
        if truth is None or (name == "a" and model == "1pl") or (name == "c" and model != "3pl"):
            continue
        out[f"corr_{name}"] = _corr(hat, truth)
        out[f"rmse_{name}"] = float(np.sqrt(np.nanmean((hat - truth) ** 2)))
        out[f"bias_{name}"] = float(np.nanmean(hat - truth))
    out["tau_difficulty"] = float(stats.kendalltau(b_lin, truth_b).statistic)
    b_int = est.interval("b")
    if b_int is not None:
        lo, hi = A * s * b_int[0] + B, A * s * b_int[1] + B
        out["coverage_b"] = _coverage(np.minimum(lo, hi), np.maximum(lo, hi), truth_b)
    a_int = est.interval("a")
    if a_int is not None and model != "1pl":
        lo, hi = s * a_int[0] / A, s * a_int[1] / A
        out["coverage_a"] = _coverage(np.minimum(lo, hi), np.maximum(lo, hi), truth_a)
    return out


def predictive_metrics(est, truth_theta, truth_a, truth_b, truth_c, Y_full, mask) -> dict:
    """Brier, log loss, AUC on held-out cells; RMSE of each model's expected score on all items."""
    from sklearn.metrics import roc_auc_score

    from methodkit.tools.irt.models import prob

    P_hat = np.clip(prob(est.theta, est.a, est.b, est.c), 1e-6, 1 - 1e-6)
    out: dict = {}
    if mask is not None and mask.any():
        held = mask & (Y_full != 255)
        y, p = Y_full[held].astype(float), P_hat[held]
        out["heldout_cells"] = int(held.sum())
        out["brier"] = float(np.mean((p - y) ** 2))
        out["log_loss"] = float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
        out["auc"] = float(roc_auc_score(y, p)) if 0 < y.sum() < len(y) else None
    if truth_theta is not None:
        true_score = prob(truth_theta, truth_a, truth_b, truth_c).mean(axis=1)
        out["rmse_expected_score"] = float(np.sqrt(np.mean((P_hat.mean(axis=1) - true_score) ** 2)))
    return out


def evaluate(est, data, model: str, *, Y_full=None, mask=None, linking: str = "mean-sigma") -> dict:
    """All metrics of one fit against the truth carried by `data` (a ResponseData with theta, a, b, c)."""
    if linking not in LINKINGS:
        raise UsageError(f"--linking must be one of {', '.join(LINKINGS)}")
    if not data.has_truth():
        raise DataError("the truth file has no generating theta/b (irt-sim draw output carries them)")
    theta = np.asarray(data.theta, float)
    if len(est.theta) != len(theta) or len(est.b) != len(data.b):
        raise DataError(
            f"the fit has {len(est.theta)} models x {len(est.b)} items but the truth has {len(theta)} x {len(data.b)}"
        )
    truth_c = data.c if data.c is not None else np.zeros(len(data.b))
    truth_a = data.a if data.a is not None else np.ones(len(data.b))
    if linking == "stocking-lord":
        sl = stocking_lord(est, truth_a, data.b, truth_c, theta)
        A, B, flipped = sl.A, sl.B, sl.flipped
    else:
        A, B, flipped = link(est.theta, theta)
    theta_lin = A * (-1 if flipped else 1) * np.asarray(est.theta, float) + B
    out = {"sign_flip": flipped, "linking": linking, "link_A": A, "link_B": B}
    out.update(ranking_metrics(theta_lin, theta))
    out["corr_theta"] = _corr(theta_lin, theta)
    out["rmse_theta"] = float(np.sqrt(np.mean((theta_lin - theta) ** 2)))
    out.update(item_metrics(est, truth_a, data.b, truth_c, A, B, flipped, model))
    out.update(predictive_metrics(est, theta, truth_a, data.b, truth_c, data.Y if Y_full is None else Y_full, mask))
    return out
