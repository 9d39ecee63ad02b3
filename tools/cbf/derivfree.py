"""Derivative-free minimisation in the unit box, for the particle-filter fits (noisy objectives).

- "nelder-mead": scipy's simplex from the box centre (cheap, fixed budget of evaluations).
- "bo": Bayesian optimisation in the style of MATLAB `bayesopt` as used by Piray & Daw 2024
  (`hpl_fit.m`): a few seed points, then a Gaussian-process surrogate (Matern 5/2 plus a learned
  white-noise term, since PF objectives are noisy) and expected improvement, through the
  `bayesian-optimization` package; the answer is the evaluated point with the best GP posterior mean
  (bayesopt's "best estimated point"), not the single luckiest noisy evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import UsageError

OPTIMIZERS = ("nelder-mead", "bo")
ACQ_RANDOM, ACQ_STARTS = 2000, 2


@dataclass
class BoxResult:
    x: np.ndarray  # in [0, 1]^d
    fun: float  # the objective's value observed at x
    evaluations: int
    success: bool


def minimize_box(
    objective: Callable[[np.ndarray], float],
    dim: int,
    method: str,
    evaluations: int,
    *,
    seed: int = 0,
    seed_points: int = 5,
) -> BoxResult:
    if method == "nelder-mead":
        return _nelder_mead(objective, dim, evaluations)
    if method == "bo":
        return _bayesopt(objective, dim, evaluations, seed, seed_points)
    raise UsageError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}")


def _nelder_mead(objective, dim, evaluations) -> BoxResult:
    from scipy.optimize import minimize

    x0 = np.full(dim, 0.5)
    simplex = np.vstack([x0] + [x0 + 0.25 * np.eye(dim)[j] for j in range(dim)])
    result = minimize(
        lambda x: objective(np.clip(x, 0.0, 1.0)),
        x0,
        method="Nelder-Mead",
        options={"maxfev": evaluations, "initial_simplex": simplex, "xatol": 1e-3, "fatol": 1e-3},
    )
    return BoxResult(np.clip(result.x, 0.0, 1.0), float(result.fun), int(result.nfev), bool(result.success))


def _bayesopt(objective, dim, evaluations, seed, seed_points) -> BoxResult:
    try:
        from bayes_opt import BayesianOptimization, acquisition
    except ImportError as exc:  # an optional dependency (the cbf extra)
        raise UsageError(
            "--optimizer bo needs the 'bayesian-optimization' package (pip install 'methodkit[cbf]')"
        ) from exc
    import warnings

    from scipy.stats import qmc
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    names = [f"x{j}" for j in range(dim)]
    opt = BayesianOptimization(
        f=None,
        pbounds={n: (0.0, 1.0) for n in names},
        acquisition_function=acquisition.ExpectedImprovement(xi=0.01, random_state=seed),
        random_state=seed,
        verbose=0,
        allow_duplicate_points=True,
    )
    kernel = ConstantKernel(1.0, (1e-2, 1e2)) * Matern(
        length_scale=np.full(dim, 0.3), length_scale_bounds=(0.02, 5.0), nu=2.5
    ) + WhiteKernel(0.05, (1e-6, 1.0))
    opt.set_gp_params(kernel=kernel, normalize_y=True, n_restarts_optimizer=0)
    rs = np.random.RandomState(seed)

    n_seed = max(1, min(seed_points, evaluations))
    design = qmc.LatinHypercube(d=dim, seed=seed).random(n_seed)
    xs, ys = [], []

    def evaluate(x):
        y = float(objective(x))
        xs.append(np.asarray(x, float))
        ys.append(y)
        # the package maximises; a failed (non-finite) evaluation is registered as the worst value seen
        finite = [v for v in ys if np.isfinite(v)]
        opt.register(dict(zip(names, x)), -(y if np.isfinite(y) else (max(finite) if finite else 1e300)))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)
        for x in design:
            evaluate(x)
        for _ in range(evaluations - n_seed):
            # BayesianOptimization.suggest with a smaller acquisition search (its default 10,000 random
            # points + 10 L-BFGS-B starts costs ~1 s a step; 3 dimensions need far less)
            point = opt.acquisition_function.suggest(
                gp=opt._gp, target_space=opt.space, n_random=ACQ_RANDOM, n_smart=ACQ_STARTS, random_state=rs
            )
            evaluate(np.clip(np.asarray(point, float), 0.0, 1.0))
        finite = np.isfinite(ys)
        if not finite.any():
            return BoxResult(xs[0], float("nan"), len(ys), False)
        mean = np.asarray(opt.predict([dict(zip(names, x)) for x in xs]), float)
    mean[~finite] = -np.inf
    best = int(np.argmax(mean))
    return BoxResult(xs[best], ys[best], len(ys), True)
