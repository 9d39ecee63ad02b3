"""CUVET-B: a hierarchical Bayesian power law per leaf and the posterior-expected allocation.

theta_k = (log alpha_k, logit beta_k) ~ N(mu, Sigma); dV_kt ~ N(alpha_k dC_kt^beta_k, var_kt).
Each leaf's posterior is a Laplace approximation (Newton with the analytic Hessian), and
mu, Sigma come from empirical Bayes (EM). The allocation maximizes the posterior expected
value: per leaf, E[alpha beta s^(beta-1)] = lam is solved by a safeguarded 1-D Newton over
seeded posterior draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError

EM_ITERS = 20
NEWTON_ITERS = 50
N_DRAWS = 256
BETA_CLIP = (0.05, 0.999)


@dataclass
class LeafData:
    dc: np.ndarray  # incremental cost of the usable arms with dc > 0
    dv: np.ndarray  # incremental value
    var: np.ndarray  # variance of dv


@dataclass
class Posterior:
    mean: np.ndarray  # (L, 2) posterior modes of (log alpha, logit beta)
    cov: np.ndarray  # (L, 2, 2) inverse Hessians
    mu: np.ndarray  # prior mean
    sigma: np.ndarray  # prior covariance

    def to_dict(self) -> dict:
        return {"mean": self.mean, "cov": self.cov, "mu": self.mu, "sigma": self.sigma}

    @classmethod
    def from_dict(cls, d: dict) -> Posterior:
        return cls(*(np.asarray(d[k], float) for k in ("mean", "cov", "mu", "sigma")))


def _sigmoid(u):
    return 1.0 / (1.0 + np.exp(-u))


def _neg_log_post(theta, leaf: LeafData, mu, prec):
    a, u = theta
    beta = _sigmoid(u)
    f = np.exp(a) * leaf.dc**beta
    r = leaf.dv - f
    d = theta - mu
    return 0.5 * np.sum(r * r / leaf.var) + 0.5 * d @ prec @ d


def laplace(leaf: LeafData, mu: np.ndarray, sigma: np.ndarray, start=None) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mode and covariance of theta for one leaf (Newton, analytic Hessian, step halving)."""
    prec = np.linalg.inv(sigma)
    theta = np.array(mu if start is None else start, float)
    if leaf.dc.size == 0:
        return mu.copy(), sigma.copy()
    x = np.log(leaf.dc)
    w = 1.0 / leaf.var
    obj = _neg_log_post(theta, leaf, mu, prec)
    hess = prec
    for _ in range(NEWTON_ITERS):
        a, u = theta
        beta = _sigmoid(u)
        db = beta * (1.0 - beta)  # d beta / d u
        f = np.exp(a) * leaf.dc**beta
        r = leaf.dv - f
        ga = f
        gu = f * x * db
        grad = np.array([-np.sum(w * r * ga), -np.sum(w * r * gu)]) + prec @ (theta - mu)
        # analytic second derivatives of f
        haa = f
        hau = f * x * db
        huu = f * (x * db) ** 2 + f * x * db * (1.0 - 2.0 * beta)
        gn = np.array([[np.sum(w * ga * ga), np.sum(w * ga * gu)], [np.sum(w * ga * gu), np.sum(w * gu * gu)]])
        curv = np.array([[np.sum(w * r * haa), np.sum(w * r * hau)], [np.sum(w * r * hau), np.sum(w * r * huu)]])
        full = gn - curv + prec
        hess = full if np.all(np.linalg.eigvalsh(full) > 1e-10) else gn + prec
        step = np.linalg.solve(hess, grad)
        t = 1.0
        while t > 1e-6:
            cand = theta - t * step
            c_obj = _neg_log_post(cand, leaf, mu, prec)
            if np.isfinite(c_obj) and c_obj <= obj:
                break
            t *= 0.5
        else:
            break
        done = obj - c_obj < 1e-12 * max(1.0, abs(obj))
        theta, obj = cand, c_obj
        if done:
            break
    # covariance from the full Hessian at the mode when it is positive definite
    return theta, np.linalg.inv(hess)


def empirical_bayes(leaves: list[LeafData], init: np.ndarray) -> Posterior:
    """EM over leaves: mu <- mean of posterior means, Sigma <- their covariance + mean posterior covariance."""
    m = len(leaves)
    mu = init.mean(axis=0)
    sigma = (np.cov(init.T) if m > 2 else np.zeros((2, 2))) + np.diag([1.0, 1.0])
    means = init.copy()
    covs = np.repeat(sigma[None], m, axis=0)
    for _ in range(EM_ITERS):
        for k, leaf in enumerate(leaves):
            means[k], covs[k] = laplace(leaf, mu, sigma, start=means[k])
        mu = means.mean(axis=0)
        spread = np.cov(means.T, bias=True) if m > 1 else np.zeros((2, 2))
        sigma = spread + covs.mean(axis=0) + 1e-6 * np.eye(2)
    for k, leaf in enumerate(leaves):
        means[k], covs[k] = laplace(leaf, mu, sigma, start=means[k])
    return Posterior(means, covs, mu, sigma)


def draws(post: Posterior, seed: int, n_draws: int = N_DRAWS) -> tuple[np.ndarray, np.ndarray]:
    """(alpha, beta) draws of shape (L, S) from each leaf's Laplace posterior (seeded)."""
    rng = np.random.default_rng(seed)
    L = post.mean.shape[0]
    eps = rng.standard_normal((L, n_draws, 2))
    chol = np.linalg.cholesky(post.cov + 1e-12 * np.eye(2))
    theta = post.mean[:, None, :] + np.einsum("lij,lsj->lsi", chol, eps)
    alpha = np.exp(np.clip(theta[..., 0], -50, 50))
    beta = np.clip(_sigmoid(theta[..., 1]), *BETA_CLIP)
    return alpha, beta


def expected_spend(lam: float, alpha: np.ndarray, beta: np.ndarray, smax: np.ndarray) -> np.ndarray:
    """Per leaf, the s in [0, s_max] with E[alpha beta s^(beta-1)] = lam (safeguarded Newton in log s)."""
    if not np.all(np.isfinite(smax)):  # log(inf) would make every bracket inf and the spend NaN
        raise DataError("CUVET-B allocation needs a finite s_max for every leaf; give a finite s_max")
    L = alpha.shape[0]
    out = np.zeros(L)
    if lam <= 0:
        return np.where(smax > 0, smax, 0.0)
    for k in range(L):
        if smax[k] <= 0:
            continue
        a, b = alpha[k], beta[k]

        def g(x, a=a, b=b):  # log of the expected marginal value at s = e^x, and its derivative
            terms = a * b * np.exp((b - 1.0) * x)
            m = terms.mean()
            return np.log(m) - np.log(lam), (terms * (b - 1.0)).mean() / m

        hi = np.log(smax[k])
        if g(hi)[0] >= 0:  # even the largest spend is worth lam
            out[k] = smax[k]
            continue
        lo = hi - 60.0
        if g(lo)[0] <= 0:
            continue
        x = 0.5 * (lo + hi)
        for _ in range(60):
            h, dh = g(x)
            if h > 0:
                lo = x
            else:
                hi = x
            nx = x - h / dh if dh < 0 else 0.5 * (lo + hi)
            if not (lo < nx < hi):
                nx = 0.5 * (lo + hi)
            if abs(nx - x) < 1e-12:
                x = nx
                break
            x = nx
        out[k] = np.exp(x)
    return out


def expected_value(spend: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """E[alpha s^beta] per leaf."""
    return np.mean(alpha * np.power(spend[:, None], beta), axis=1)


def feasibility(
    shares: np.ndarray, mixes: list[dict[int, float]], dc_mean, dc_var, z_var, n_pop: int, budget: float, seed: int
) -> float:
    """P(realized incremental cost per user <= budget) under the posterior predictive.

    Per draw: each leaf-arm cost increment from N(dc, var(dc)), plus the noise of summing
    realized costs over a population of n_pop users.
    """
    rng = np.random.default_rng(seed)
    noise = 0.0
    total = np.zeros(N_DRAWS)
    for k, mix in enumerate(mixes):
        for arm, p in mix.items():
            if arm == 0:
                continue
            d = rng.normal(dc_mean[k][arm], np.sqrt(dc_var[k][arm]), N_DRAWS)
            total += shares[k] * p * d
            noise += shares[k] * p * z_var[k][arm]
    total += rng.standard_normal(N_DRAWS) * np.sqrt(noise / max(n_pop, 1))
    return float(np.mean(total <= budget * (1 + 1e-12)))
