"""The learner models: parameter names, transforms, priors and start designs.

Gradient-fitted models (cbf, kf) work on an unconstrained vector theta with a Gaussian prior;
particle filters (pf-beta, pf-hpl) are fitted derivative-free inside box bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MODELS = ("cbf", "kf", "pf-beta", "pf-hpl")


@dataclass(frozen=True)
class GradientModel:
    name: str
    theta_names: tuple[str, ...]
    prior_mean: tuple[float, ...]
    prior_sd: tuple[float, ...]
    starts: tuple[tuple[float, ...], ...]  # a fixed design of start points (restarts)


# theta = (logit mu_v, log kappa_v, logit mu_s, log kappa_s, log sigma_r); priors from the issue.
CBF = GradientModel(
    "cbf",
    ("logit_mu_v", "log_kappa_v", "logit_mu_s", "log_kappa_s", "log_sigma_r"),
    (0.0, math.log(4.0), 0.0, math.log(4.0), math.log(5.0)),
    (1.5, 1.5, 1.5, 1.5, 1.0),
    (
        (0.0, math.log(4.0), 0.0, math.log(4.0), math.log(5.0)),  # the prior mean
        (0.0, math.log(60.0), 0.0, math.log(1.5), math.log(5.0)),  # volatility-blind corner
        (0.0, math.log(1.5), 0.0, math.log(60.0), math.log(5.0)),  # stochasticity-blind corner
        (-1.0, math.log(15.0), 1.0, math.log(15.0), math.log(8.0)),  # narrow, low v / high s
        (1.0, math.log(1.5), -1.0, math.log(1.5), math.log(3.0)),  # broad, high v / low s
    ),
)
# Plain Kalman filter: theta = (log v, log s, log sigma_r); weak priors centred on the task's range (ours).
KF = GradientModel(
    "kf",
    ("log_v", "log_s", "log_sigma_r"),
    (math.log(10.0), math.log(30.0), math.log(5.0)),
    (2.0, 2.0, 1.0),
    (
        (math.log(10.0), math.log(30.0), math.log(5.0)),
        (math.log(2.0), math.log(100.0), math.log(5.0)),
        (math.log(50.0), math.log(5.0), math.log(5.0)),
        (math.log(5.0), math.log(10.0), math.log(8.0)),
        (math.log(30.0), math.log(60.0), math.log(3.0)),
    ),
)
GRADIENT_MODELS = {"cbf": CBF, "kf": KF}


def screen_grid(model: str) -> np.ndarray:
    """Candidate start points in optimizer coordinates (see fit.ShapeSpace), sigma_r = 5.
    cbf: each Beta shape (log a_v, log b_v, log a_s, log b_s) at 0.05 (the clamp), 0.7 or 10, 81 points;
    kf: (log v, log s) on {1, 10, 100}^2, 9 points."""
    if model == "cbf":
        levels = np.log([0.05, 0.7, 10.0])
        mesh = np.meshgrid(levels, levels, levels, levels, indexing="ij")
    else:
        levels = np.log([1.0, 10.0, 100.0])
        mesh = np.meshgrid(levels, levels, indexing="ij")
    pts = np.stack([m.ravel() for m in mesh], 1)
    return np.concatenate([pts, np.full((pts.shape[0], 1), math.log(5.0))], 1)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def logit(p):
    return np.log(p) - np.log1p(-p)


def natural(model: str, theta: np.ndarray) -> dict[str, np.ndarray]:
    """Named parameters on their natural scale from theta [N, d]."""
    theta = np.atleast_2d(theta)
    if model == "cbf":
        return {
            "mu_v": sigmoid(theta[:, 0]),
            "kappa_v": np.exp(theta[:, 1]),
            "mu_s": sigmoid(theta[:, 2]),
            "kappa_s": np.exp(theta[:, 3]),
            "sigma_r": np.exp(theta[:, 4]),
        }
    if model == "kf":
        return {"v": np.exp(theta[:, 0]), "s": np.exp(theta[:, 1]), "sigma_r": np.exp(theta[:, 2])}
    raise KeyError(model)


def theta_from_natural(model: str, values: dict) -> np.ndarray:
    """Inverse of `natural` (columns of a params table -> theta [N, d])."""
    if model == "cbf":
        cols = [
            logit(values["mu_v"]),
            np.log(values["kappa_v"]),
            logit(values["mu_s"]),
            np.log(values["kappa_s"]),
            np.log(values["sigma_r"]),
        ]
    elif model == "kf":
        cols = [np.log(values["v"]), np.log(values["s"]), np.log(values["sigma_r"])]
    else:
        raise KeyError(model)
    return np.column_stack([np.asarray(c, float) for c in cols])


# ---------------------------------------------------------------- particle-filter models


@dataclass(frozen=True)
class ParticleModel:
    name: str
    names: tuple[str, ...]  # fitted parameters, in kernel order
    low: tuple[float, ...]
    high: tuple[float, ...]


# pf-hpl (Piray & Daw 2024 hpl_fit.m): jump probabilities and the jump sd; v = s = 1 at block start.
PF_HPL = ParticleModel("pf-hpl", ("mu_v", "mu_s", "sigma"), (0.01, 0.01, 0.05), (1.0, 1.0, 1.0))
# pf-beta (Piray & Daw 2021): precision diffusion rates and initial variances.
PF_BETA = ParticleModel(
    "pf-beta", ("lambda_v", "lambda_s", "v0", "s0"), (0.0, 0.0, 0.5, 0.5), (0.95, 0.95, 200.0, 400.0)
)
PARTICLE_MODELS = {"pf-hpl": PF_HPL, "pf-beta": PF_BETA}
HPL_INIT = 1.0  # v = s = 1 at the start of each block (hpl_model.m)


def kernel_params(model: str, values: np.ndarray) -> np.ndarray:
    """[S, 4] kernel parameters from fitted values [S, d]."""
    values = np.atleast_2d(np.asarray(values, float))
    out = np.zeros((values.shape[0], 4))
    if model == "pf-beta":
        out[:] = values[:, :4]
    else:
        out[:, :3] = values[:, :3]
        out[:, 3] = HPL_INIT
    return out


def blindness(model: str, table) -> np.ndarray:
    """Phenotype index, higher = more volatility-blind: D = log kappa_v - log kappa_s for the CBF;
    mu_s - mu_v (pf-hpl) or lambda_s - lambda_v (pf-beta): less volatility learning than stochasticity learning."""
    if model == "cbf":
        return np.log(table["kappa_v"].to_numpy(float)) - np.log(table["kappa_s"].to_numpy(float))
    if model == "pf-hpl":
        return table["mu_s"].to_numpy(float) - table["mu_v"].to_numpy(float)
    if model == "pf-beta":
        return table["lambda_s"].to_numpy(float) - table["lambda_v"].to_numpy(float)
    if model == "kf":
        return np.log(table["s"].to_numpy(float)) - np.log(table["v"].to_numpy(float))
    raise KeyError(model)
