"""Plain NumPy references of the Numba kernels (tests and benchmarks compare against them)."""

from __future__ import annotations

import numpy as np

from methodkit.tools.irt.models import sigmoid


def cell_loglik_matrix(Y, theta, params, code):
    """log P(Y | theta, items) per cell (0 where missing): N x J."""
    a = np.exp(params[:, 0]) if code > 1 else np.ones(len(params))
    c = sigmoid(params[:, 2]) if code == 3 else np.zeros(len(params))
    z = a[None, :] * (theta[:, None] - params[None, :, 1])
    if code < 3:
        ll = np.where(Y == 1, -np.logaddexp(0, -z), -np.logaddexp(0, z))
    else:
        p = np.clip(c[None, :] + (1 - c[None, :]) * sigmoid(z), 1e-10, 1 - 1e-10)
        ll = np.where(Y == 1, np.log(p), np.log1p(-p))
    return np.where(Y == 255, 0.0, ll)


def mh_theta(Y, theta, params, code, step, z, logu):
    """Vectorised twin of kernels.mh_theta; returns (new theta, accepted)."""
    prop = theta + step * z
    delta = 0.5 * (theta**2 - prop**2)
    delta += cell_loglik_matrix(Y, prop, params, code).sum(1) - cell_loglik_matrix(Y, theta, params, code).sum(1)
    accept = logu < delta
    return np.where(accept, prop, theta), accept.astype(np.int8)


def item_log_prior(params, code, prior):
    out = -0.5 * ((params[:, 1] - prior[2]) / prior[3]) ** 2
    if code > 1:
        out += -0.5 * ((params[:, 0] - prior[0]) / prior[1]) ** 2
    if code == 3:
        out += prior[4] * -np.logaddexp(0, -params[:, 2]) + prior[5] * -np.logaddexp(0, params[:, 2])
    return out


def mh_items(Y, theta, params, code, step, z, logu, prior):
    """Vectorised twin of kernels.mh_items; returns (new params, accepted)."""
    prop = params.copy()
    prop[:, 1] += step * z[:, 1]
    if code > 1:
        prop[:, 0] += step * z[:, 0]
    if code == 3:
        prop[:, 2] += step * z[:, 2]
    delta = item_log_prior(prop, code, prior) - item_log_prior(params, code, prior)
    delta += cell_loglik_matrix(Y, theta, prop, code).sum(0) - cell_loglik_matrix(Y, theta, params, code).sum(0)
    accept = logu < delta
    return np.where(accept[:, None], prop, params), accept.astype(np.int8)
