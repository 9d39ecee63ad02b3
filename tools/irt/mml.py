"""Marginal maximum likelihood by EM (Bock & Aitkin 1981), mirt's defaults.

E-step in log space with two GEMMs: LL = Y log P^T + (M - Y) log(1 - P)^T over Q fixed
nodes, posterior W = softmax_q(LL + log pi); expected counts n = M^T W, r = Y^T W. M-step:
J independent Fisher-scoring solves (Numba, prange over items). Latent density N(0, 1) or
an empirical histogram re-estimated and re-standardised each cycle (`latent="ehw"`).
Optional SQUAREM (Varadhan & Roland 2008, scheme S3) extrapolates two EM steps with a
monotonicity check on the marginal log posterior. Abilities: EAP from the last E-step, or MAP
(`scoring="map"`, Fisher scoring with the N(0, 1) prior) given the item estimates.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from methodkit.core.backend import array_module, to_numpy
from methodkit.core.errors import UsageError
from methodkit.tools.irt import kernels
from methodkit.tools.irt.models import MODEL_CODE, sigmoid
from methodkit.tools.irt.result import Clock, Estimate

LATENTS = ("normal", "ehw")
PRIORS = ("none", "weak")
SE_METHODS = ("none", "louis")
ACCELERATIONS = ("none", "squarem")
_SQUAREM_SLACK = 1.0
SCORINGS = ("eap", "map")
# Keep Fisher scoring in a box: a in [0.018, a_max] (a_max at most e^4 = 55); b within the quadrature range (an all-correct or
# all-wrong item has no finite ML difficulty; beyond the nodes there is no information, as girth's
# fminbound(-6, 6)); logit c in [-12, 12].
_LA_BOUND, _LC_BOUND = 4.0, 12.0
A_MIN = float(np.exp(-_LA_BOUND))  # lower end of the box for a
_LOG_TINY = -690.0  # log of the smallest posterior weight kept (e^-690 ~ 1e-300, still a normal float)


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
    accelerate: str = "none"
    scoring: str = "eap"
    # upper end of the box for a, python mirt's: an item whose ML a does not exist (responses separated
    # along the ability order) stops here instead of at e^4 = 55, where 2 such items out of 2000 took
    # corr(a, truth) from 0.85 to 0.29 (N = 200; docs/irt.md); fit.json counts the items at the bound
    a_max: float = 5.0
    device: str = "cpu"  # 'cuda': the E-step GEMMs and softmax on the GPU with CuPy

    def check(self) -> None:
        if self.latent not in LATENTS:
            raise UsageError(f"--latent must be one of {', '.join(LATENTS)}")
        if self.prior not in PRIORS:
            raise UsageError(f"--prior must be one of {', '.join(PRIORS)}")
        if self.se not in SE_METHODS:
            raise UsageError(f"--se must be one of {', '.join(SE_METHODS)}")
        if self.accelerate not in ACCELERATIONS:
            raise UsageError(f"--accelerate must be one of {', '.join(ACCELERATIONS)}")
        if self.scoring not in SCORINGS:
            raise UsageError(f"--scoring must be one of {', '.join(SCORINGS)}")
        if self.n_nodes < 5:
            raise UsageError("--quadrature needs at least 5 nodes")
        if not np.exp(-_LA_BOUND) < self.a_max <= np.exp(_LA_BOUND):
            raise UsageError(f"--a-max must be in ({np.exp(-_LA_BOUND):.3g}, {np.exp(_LA_BOUND):.3g}]")


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


def boundary_items(Y: np.ndarray, params: np.ndarray, bound: float) -> np.ndarray:
    """Hold all-correct / all-wrong items at b = -/+ bound with their start a; returns the mask of them.

    Such an item has no finite ML estimate: its likelihood rises as b -> -/+ infinity and, with b on
    the bound, as a grows without limit. EM would creep along that ridge for hundreds of cycles (setting
    the convergence pace for every other item) towards an arbitrary corner of the box, so these items
    are not estimated: b sits on the quadrature bound (P within 0.0025 of the observed 1 or 0 for
    theta within 0 +- 1), a keeps its start value 1, and fit.json counts them.
    """
    observed = (Y != kernels.MISSING).sum(axis=0)
    correct = (Y == 1).sum(axis=0)
    all_right = (observed > 0) & (correct == observed)
    all_wrong = (observed > 0) & (correct == 0)
    params[all_right, 1] = -bound
    params[all_wrong, 1] = bound
    params[all_right | all_wrong, 0] = 0.0
    return all_right | all_wrong


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


def e_step(Yf, Mf, params, nodes, log_prior, code, dtype, xp=np):
    """Posterior over nodes W (N x Q, on Yf's device) and the marginal log-likelihood.

    `xp` is numpy or cupy (Yf, Mf already on that device); node probabilities (J x Q) are made on
    the host and sent over, the two GEMMs and the log-space softmax run where the data live.
    """
    P = np.clip(node_probs(params, nodes, code), 1e-10, 1 - 1e-10)
    LP, LQ = xp.asarray(np.log(P).astype(dtype)), xp.asarray(np.log1p(-P).astype(dtype))
    LL = Yf @ (LP - LQ) + Mf @ LQ  # the two GEMMs: N x J by J x Q
    LL = LL.astype(xp.float64) + xp.asarray(log_prior)[None, :]
    top = LL.max(axis=1, keepdims=True)
    norm = top[:, 0] + xp.log(xp.exp(LL - top).sum(axis=1))
    log_w = LL - norm[:, None]
    # weights below e^-690 (~1e-300) become exact zeros: exp would give subnormal numbers, which
    # made the count GEMMs (and the M-step) of every cycle about 5x slower on x86 (measured 18 vs 3.8 ms)
    W = xp.exp(xp.where(log_w < _LOG_TINY, -xp.inf, log_w))
    return W, float(norm.sum())


def log_prior_items(params: np.ndarray, code: int, prior: np.ndarray) -> float:
    """The M-step's log prior summed over items (the part of the log posterior EM does not see in LL)."""
    out = 0.0
    if prior[0] > 0 and code > 1:
        out -= 0.5 * float(np.sum(((params[:, 0] - prior[1]) / prior[2]) ** 2))
    if prior[3] > 0:
        out -= 0.5 * float(np.sum(((params[:, 1] - prior[4]) / prior[5]) ** 2))
    if code == 3:
        c = np.clip(sigmoid(params[:, 2]), 1e-10, 1 - 1e-10)
        out += float(np.sum((prior[6] - 1) * np.log(c) + (prior[7] - 1) * np.log1p(-c)))
    return out


class _EMMap:
    """One EM cycle as a map params -> params (with the latent histogram carried along for ehw)."""

    def __init__(self, Y, model, settings, dtype):
        self.code = MODEL_CODE[model]
        self.settings = settings
        self.dtype = dtype
        self.xp = array_module(settings.device)
        self.Yf = self.xp.asarray((Y == 1).astype(dtype))
        self.Mf = self.xp.asarray((Y != kernels.MISSING).astype(dtype))
        self.nodes = np.linspace(-settings.node_range, settings.node_range, settings.n_nodes)
        weights = np.exp(-0.5 * self.nodes**2)
        self.weights = weights / weights.sum()
        self.prior = prior_vector(settings)
        bound = settings.node_range
        self.low = np.array([-_LA_BOUND, -bound, -_LC_BOUND])
        self.high = np.array([np.log(settings.a_max), bound, _LC_BOUND])
        self.evaluations = 0
        self.held = np.zeros(len(Y.T), bool)  # items not estimated (no finite ML): see boundary_items

    def estep(self, params):
        return e_step(self.Yf, self.Mf, params, self.nodes, np.log(self.weights), self.code, self.dtype, self.xp)

    def __call__(self, params):
        """(M-step result, log posterior at `params`, posterior W at `params`)."""
        self.evaluations += 1
        W, loglik = self.estep(params)
        if self.settings.latent == "ehw":
            self.weights = restandardise(to_numpy(W.mean(axis=0)), self.nodes)
        r = to_numpy(self.Yf.T @ W.astype(self.dtype, copy=False)).astype(np.float64)
        n = to_numpy(self.Mf.T @ W.astype(self.dtype, copy=False)).astype(np.float64)
        out = params.copy()
        kernels.mstep(out, r, n, self.nodes, self.code, self.prior, 10, 1e-8, self.low, self.high)
        out[self.held] = params[self.held]
        return out, loglik + log_prior_items(params, self.code, self.prior), W


def _squarem_step(em: _EMMap, p0: np.ndarray):
    """One SQUAREM S3 cycle from p0: (new params, log posterior at p0, the last plain EM step's start).

    Extrapolate p0 - 2 alpha r + alpha^2 v with alpha = -|r|/|v| (at most -1), then one EM step
    from there; when the log posterior at the extrapolated point is more than `_SQUAREM_SLACK`
    below the one at p0 (the SQUAREM package's objfn.inc = 1), pull alpha half-way back towards -1
    (alpha = -1 is the plain double EM step, always accepted).
    """
    p1, lp0, _ = em(p0)
    p2, lp1, _ = em(p1)
    r = p1 - p0
    v = p2 - p1 - r
    vv = float(np.sum(v * v))
    alpha = -np.sqrt(float(np.sum(r * r)) / vv) if vv > 0 else -1.0
    alpha = min(alpha, -1.0)
    while True:
        trial = p0 - 2 * alpha * r + alpha**2 * v
        # an item the extrapolation throws out of the box (an all-correct item creeping to its bound)
        # follows plain EM instead: clipping it would stall the whole step
        outside = ((trial < em.low) | (trial > em.high)).any(axis=1)
        trial[outside] = p2[outside]
        p3, lp_trial, _ = em(trial)
        if alpha == -1.0 or (np.isfinite(lp_trial) and lp_trial >= lp0 - _SQUAREM_SLACK):
            return p3, lp0, trial
        alpha = min((alpha - 1.0) / 2.0, -1.0) if alpha < -1.5 else -1.0


def fit(Y: np.ndarray, model: str, settings: MMLSettings, *, time_limit=None, callback=None) -> Estimate:
    """Fit `model` to the N x J uint8 matrix Y (255 = missing) by MML-EM (optionally SQUAREM-accelerated)."""
    settings.check()
    clock = Clock(time_limit)
    code = MODEL_CODE[model]
    dtype = np.float32 if settings.float32 else np.float64
    em = _EMMap(Y, model, settings, dtype)
    params = start_values(Y, model)
    em.held = boundary_items(Y, params, settings.node_range)
    trace = []
    status, converged, cycle = "ok", False, 0
    last_good = params.copy()
    change = float("nan")
    for cycle in range(1, settings.max_cycles + 1):
        if settings.accelerate == "squarem":
            new, logpost, before = _squarem_step(em, params)
        else:
            new, logpost, _ = em(params)
            before = params
        if not np.isfinite(logpost) or not np.isfinite(new).all():
            status, params = "diverged", last_good
            break
        trace.append(logpost)
        last_good = params = new
        # the change of the last plain EM step (SQUAREM: the stabilising step after the extrapolation)
        change = float(np.max(np.abs(natural(new, code) - natural(before, code))))
        if callback is not None:
            callback("mml-em", cycle, settings.max_cycles)
        if change < settings.tol:
            converged = True
            break
        if clock.expired():
            status = "timeout"
            break
    W, loglik = em.estep(params)
    W = to_numpy(W)
    nodes = em.nodes
    a, b, c = (
        (np.exp(params[:, 0]) if code > 1 else np.ones(len(params))),
        params[:, 1].copy(),
        natural(params, code)[:, 2],
    )
    if settings.scoring == "map":
        theta, theta_sd = map_abilities(Y, a, b, c)
    else:
        theta = W @ nodes
        theta_sd = np.sqrt(np.maximum(W @ nodes**2 - theta**2, 0.0))
    est = Estimate(a=a, b=b, c=c, theta=theta, theta_sd=theta_sd)
    if settings.se == "louis" and status == "ok":
        _louis_intervals(est, Y, W, params, nodes, code, em.prior)
    upper, lower = at_bound(params, em, code)
    est.info = {
        "n_iter": cycle,
        "em_evaluations": em.evaluations,
        "n_unidentified_items": int(em.held.sum()),
        "n_items_at_bound": int((upper | lower).sum()),
        "at_bound": {"a_upper": np.flatnonzero(upper).tolist(), "a_lower": np.flatnonzero(lower).tolist()},
        "converged": converged,
        "convergence": {"last_change": change, "tol": settings.tol, "max_cycles": settings.max_cycles},
        "status": status,
        "loglik": loglik,
        "trace": {"first": trace[0] if trace else None, "last": trace[-1] if trace else None, "n": len(trace)},
        "settings": {**asdict(settings), "c_prior": list(settings.c_prior)},
        "latent_weights": em.weights.tolist() if settings.latent == "ehw" else None,
    }
    return est


def at_bound(params: np.ndarray, em: _EMMap, code: int):
    """Masks of the estimated items whose a ended on the upper / lower end of its box.

    An item whose responses are (nearly) separated along the ability order has no finite ML a:
    the likelihood keeps rising with a, so the estimate is the box's end, not a measurement. Items
    held out of the estimation (all correct or all wrong) are counted apart, as unidentified.
    """
    if code == 1:
        none = np.zeros(len(params), bool)
        return none, none
    free = ~em.held
    upper = free & (params[:, 0] >= em.high[0] - 1e-6)
    lower = free & (params[:, 0] <= em.low[0] + 1e-6)
    return upper, lower


def map_abilities(Y: np.ndarray, a, b, c, *, max_iter: int = 50, tol: float = 1e-8):
    """MAP abilities under theta ~ N(0, 1) given item parameters: Fisher scoring per model.

    Returns (theta, sd) with sd = 1 / sqrt(Fisher information + 1) at the mode. The log posterior is
    concave for the 1PL/2PL; for the 3PL the steps are halved until it rises.
    """
    observed = Y != kernels.MISSING
    y = (Y == 1).astype(np.float64)
    a, b, c = (np.asarray(v, float)[None, :] for v in (a, b, c))

    def logpost(t):
        P = np.clip(c + (1 - c) * sigmoid(a * (t[:, None] - b)), 1e-12, 1 - 1e-12)
        return np.where(observed, y * np.log(P) + (1 - y) * np.log1p(-P), 0.0).sum(1) - 0.5 * t**2

    theta = np.zeros(Y.shape[0])
    current = logpost(theta)
    info = np.ones_like(theta)
    for _ in range(max_iter):
        s = sigmoid(a * (theta[:, None] - b))
        P = np.clip(c + (1 - c) * s, 1e-12, 1 - 1e-12)
        dP = a * (1 - c) * s * (1 - s)
        grad = np.where(observed, (y - P) / (P * (1 - P)) * dP, 0.0).sum(1) - theta
        info = np.where(observed, dP**2 / (P * (1 - P)), 0.0).sum(1) + 1.0
        step = np.clip(grad / info, -2.0, 2.0)
        t = np.ones_like(theta)
        for _h in range(30):
            trial = theta + t * step
            value = logpost(trial)
            worse = value < current - 1e-12
            if not worse.any():
                break
            t = np.where(worse, t / 2, t)
        theta, current = trial, value
        if np.max(np.abs(t * step)) < tol:
            break
    return theta, 1.0 / np.sqrt(info)


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
