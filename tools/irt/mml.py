"""Marginal maximum likelihood by EM (Bock & Aitkin 1981), mirt's defaults.

E-step in log space with two GEMMs: LL = Y log P^T + (M - Y) log(1 - P)^T over Q fixed
nodes, posterior W = softmax_q(LL + log pi); expected counts n = M^T W, r = Y^T W. M-step:
J independent Fisher-scoring solves (Numba, prange over items). Latent density N(0, 1) or
an empirical histogram re-estimated and re-standardised each cycle (`latent="ehw"`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.special import logsumexp

from methodkit.core.errors import UsageError
from methodkit.tools.irt import kernels
from methodkit.tools.irt.models import MODEL_CODE, sigmoid
from methodkit.tools.irt.result import Clock, Estimate

LATENTS = ("normal", "ehw")
PRIORS = ("none", "weak")
SE_METHODS = ("none", "louis")
# Keep Fisher scoring in a box: a in [0.018, 55]; b within the quadrature range (an all-correct or
# all-wrong item has no finite ML difficulty; beyond the nodes there is no information, as girth's
# fminbound(-6, 6)); logit c in [-12, 12].
_LA_BOUND, _LC_BOUND = 4.0, 12.0


@dataclass
class MMLSettings:
    n_nodes: int = 61
    node_range: float = 6.0
    latent: str = "normal"
    prior: str = "none"
    c_prior: tuple[float, float] = (5.0, 17.0)
    tol: float = 1e-4
    max_cycles: int = 500
    se: str = "none"
    float32: bool = False

    def check(self) -> None:
        if self.latent not in LATENTS:
            raise UsageError(f"--latent must be one of {', '.join(LATENTS)}")
        if self.prior not in PRIORS:
            raise UsageError(f"--prior must be one of {', '.join(PRIORS)}")
        if self.se not in SE_METHODS:
            raise UsageError(f"--se must be one of {', '.join(SE_METHODS)}")
        if self.n_nodes < 5:
            raise UsageError("--quadrature needs at least 5 nodes")


def prior_vector(settings: MMLSettings) -> np.ndarray:
    weak = 1.0 if settings.prior == "weak" else 0.0
    al, be = settings.c_prior
    return np.array([weak, 0.0, 0.5, weak, 0.0, 2.0, al, be], dtype=np.float64)


def start_values(Y: np.ndarray, model: str) -> np.ndarray:
    """(log a, b, logit c) from proportions correct: b = -logit(p), a = 1, c = 0.2 (3PL)."""
    observed = Y != kernels.MISSING
    correct = (Y == 1).sum(axis=0)
    p = (correct + 0.5) / (observed.sum(axis=0) + 1.0)
    params = np.zeros((Y.shape[1], 3))
    params[:, 1] = -np.log(p / (1 - p)) * 1.2
    params[:, 2] = np.log(0.2 / 0.8) if model == "3pl" else 0.0
    return params


def node_probs(params: np.ndarray, nodes: np.ndarray, code: int) -> np.ndarray:
    """P(correct | node q) for each item: J x Q."""
    a = np.exp(params[:, 0]) if code > 1 else np.ones(len(params))
    c = sigmoid(params[:, 2]) if code == 3 else np.zeros(len(params))
    return c[:, None] + (1 - c[:, None]) * sigmoid(a[:, None] * (nodes[None, :] - params[:, 1:2]))


def restandardise(weights: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """An empirical histogram on fixed nodes, moved and rescaled to mean 0, sd 1 (density interpolated)."""
    mean = float(weights @ nodes)
    sd = float(np.sqrt(max(weights @ (nodes - mean) ** 2, 1e-12)))
    step = nodes[1] - nodes[0]
    density = weights / step
    moved = np.interp(mean + sd * nodes, nodes, density, left=0.0, right=0.0) * sd
    moved = np.maximum(moved, 1e-300)
    return moved / moved.sum()


def e_step(Yf, Mf, params, nodes, log_prior, code, dtype):
    P = np.clip(node_probs(params, nodes, code), 1e-10, 1 - 1e-10)
    LP, LQ = np.log(P).astype(dtype), np.log1p(-P).astype(dtype)
    LL = Yf @ (LP - LQ) + Mf @ LQ  # the two GEMMs: N x J by J x Q
    LL = LL.astype(np.float64) + log_prior[None, :]
    norm = logsumexp(LL, axis=1)
    W = np.exp(LL - norm[:, None])
    return W, float(norm.sum())


def fit(Y: np.ndarray, model: str, settings: MMLSettings, *, time_limit=None, callback=None) -> Estimate:
    """Fit `model` to the N x J uint8 matrix Y (255 = missing) by MML-EM."""
    settings.check()
    clock = Clock(time_limit)
    code = MODEL_CODE[model]
    dtype = np.float32 if settings.float32 else np.float64
    observed = Y != kernels.MISSING
    Yf = (Y == 1).astype(dtype)
    Mf = observed.astype(dtype)
    nodes = np.linspace(-settings.node_range, settings.node_range, settings.n_nodes)
    weights = np.exp(-0.5 * nodes**2)
    weights /= weights.sum()
    log_prior = np.log(weights)
    prior = prior_vector(settings)
    params = start_values(Y, model)
    trace = []
    status, converged, cycle = "ok", False, 0
    last_good = params.copy()
    for cycle in range(1, settings.max_cycles + 1):
        W, loglik = e_step(Yf, Mf, params, nodes, log_prior, code, dtype)
        if not np.isfinite(loglik):
            status, params = "diverged", last_good
            break
        trace.append(loglik)
        last_good = params.copy()
        if settings.latent == "ehw":
            weights = restandardise(W.mean(axis=0), nodes)
            log_prior = np.log(weights)
        r = (Yf.T @ W).astype(np.float64)
        n = (Mf.T @ W).astype(np.float64)
        before = natural(params, code)
        kernels.mstep(params, r, n, nodes, code, prior, 10, 1e-8)
        bound = settings.node_range
        np.clip(params, [-_LA_BOUND, -bound, -_LC_BOUND], [_LA_BOUND, bound, _LC_BOUND], out=params)
        if not np.isfinite(params).all():
            status, params = "diverged", last_good
            break
        change = float(np.max(np.abs(natural(params, code) - before)))
        if callback is not None:
            callback("mml-em", cycle, settings.max_cycles)
        if change < settings.tol:
            converged = True
            break
        if clock.expired():
            status = "timeout"
            break
    W, loglik = e_step(Yf, Mf, params, nodes, log_prior, code, dtype)
    theta = W @ nodes
    theta_sd = np.sqrt(np.maximum(W @ nodes**2 - theta**2, 0.0))
    a, b, c = (
        (np.exp(params[:, 0]) if code > 1 else np.ones(len(params))),
        params[:, 1].copy(),
        natural(params, code)[:, 2],
    )
    est = Estimate(a=a, b=b, c=c, theta=theta, theta_sd=theta_sd)
    if settings.se == "louis" and status == "ok":
        _louis_intervals(est, Y, W, params, nodes, code, prior)
    est.info = {
        "n_iter": cycle,
        "converged": converged,
        "status": status,
        "loglik": loglik,
        "trace": {"first": trace[0] if trace else None, "last": loglik, "n": len(trace)},
        "settings": {**asdict(settings), "c_prior": list(settings.c_prior)},
        "latent_weights": weights.tolist() if settings.latent == "ehw" else None,
    }
    return est


def natural(params: np.ndarray, code: int) -> np.ndarray:
    """(a, b, c) from (log a, b, logit c) under the model's constraints."""
    out = np.empty_like(params)
    out[:, 0] = np.exp(params[:, 0]) if code > 1 else 1.0
    out[:, 1] = params[:, 1]
    out[:, 2] = sigmoid(params[:, 2]) if code == 3 else 0.0
    return out


def _louis_intervals(est: Estimate, Y, W, params, nodes, code, prior) -> None:
    """Standard errors from the Louis information (plus the prior's curvature), Wald 95% intervals."""
    info = kernels.louis_information(np.ascontiguousarray(Y.T), W, params, nodes, code)
    free = [1] if code == 1 else ([0, 1] if code == 2 else [0, 1, 2])
    se = np.full((len(params), 3), np.nan)
    for j in range(len(params)):
        block = info[j][np.ix_(free, free)].copy()
        if prior[0] > 0 and code > 1:
            block[free.index(0), free.index(0)] += 1 / prior[2] ** 2
        if prior[3] > 0:
            block[free.index(1), free.index(1)] += 1 / prior[5] ** 2
        if code == 3:
            cj = sigmoid(params[j, 2])
            block[2, 2] += max(prior[6] + prior[7] - 2, 0) * cj * (1 - cj)
        try:
            cov = np.linalg.inv(block)
            se[j, free] = np.sqrt(np.where(np.diag(cov) > 0, np.diag(cov), np.nan))
        except np.linalg.LinAlgError:
            pass
    z = 1.959963984540054
    se = np.minimum(se, 50.0)  # an unidentified item (huge SE) still gets a finite, uninformative interval
    est.b_sd = se[:, 1]
    est.b_low, est.b_high = params[:, 1] - z * se[:, 1], params[:, 1] + z * se[:, 1]
    if code > 1:
        est.a_sd = est.a * se[:, 0]  # delta method
        est.a_low, est.a_high = np.exp(params[:, 0] - z * se[:, 0]), np.exp(params[:, 0] + z * se[:, 0])
    if code == 3:
        est.c_sd = est.c * (1 - est.c) * se[:, 2]
        est.c_low, est.c_high = sigmoid(params[:, 2] - z * se[:, 2]), sigmoid(params[:, 2] + z * se[:, 2])
