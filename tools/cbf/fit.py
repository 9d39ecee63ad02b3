"""Per-subject fitting: gradient models (cbf, kf) by batched per-row L-BFGS, particle filters derivative-free.

Gradient models: every subject x start point is one row of a batch; each row has its own L-BFGS
history and line search (optim.minimize_rows), all pending rows evaluated by one kernel call. The
objective and its exact gradient come from the numba adjoint kernel (or, as the reference, the torch
graph). The CBF is optimised in Beta-shape coordinates where the shape clamp is a box (ShapeSpace);
starts are the model's fixed design plus the best points of a screened grid. Rows L-BFGS leaves
unconverged get damped Newton steps; the Hessian (central differences of the exact gradient) also
gives the Laplace log evidence.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from methodkit.core.errors import RunFailure, UsageError
from methodkit.core.progress import silent
from methodkit.tools.cbf import grid as gridmod
from methodkit.tools.cbf import models, threads
from methodkit.tools.cbf.data import Cohort
from methodkit.tools.cbf.forward import FilterOptions, ResponseModel, filter_predictions, response_loglik
from methodkit.tools.cbf.optim import minimize_rows, projected_gradient

OBJECTIVES = ("responses", "outcomes", "joint")
GRAD_TOL = 1e-2  # a row counts as converged when its gradient norm is below this


@dataclass(frozen=True)
class FitOptions:
    model: str = "cbf"
    grid: gridmod.GridSpec = field(default_factory=gridmod.GridSpec)
    filter: FilterOptions = field(default_factory=FilterOptions)
    response: ResponseModel = field(default_factory=ResponseModel)
    objective: str = "responses"
    restarts: int = 5  # starts from the model's fixed design
    screen: int = 5  # extra starts: the best points of a fixed grid, scored by one forward pass per subject
    max_iter: int = 200
    newton_steps: int = 2
    optimizer_grad: str = "lbfgs-rows"  # per-row batched L-BFGS; "torch-lbfgs" = one L-BFGS on the summed loss
    gradient: str = "adjoint"  # "adjoint": numba forward + reverse-mode kernel; "torch": the autograd reference
    chunk: int = 32
    # particle filters
    particles: int = 1000
    runs: int = 4
    evaluations: int = 60
    optimizer: str = "nelder-mead"
    device: str = "cpu"  # particle filters: "cpu" (Numba) or "cuda" (CuPy whole-array filter)


def grid_nodes_torch(theta, spec: gridmod.GridSpec):
    """(v nodes [N,K], s nodes [N,K], clamped [N] bool) from CBF theta [N,5]; Beta shapes clamped to a safe range."""
    import torch

    mu_v, kappa_v = torch.sigmoid(theta[:, 0]), torch.exp(theta[:, 1])
    mu_s, kappa_s = torch.sigmoid(theta[:, 2]), torch.exp(theta[:, 3])
    out, clamped = [], torch.zeros(theta.shape[0], dtype=torch.bool)
    for mu, kappa, (low, high) in ((mu_v, kappa_v, spec.v_range), (mu_s, kappa_s, spec.s_range)):
        a, b = mu * kappa, (1 - mu) * kappa
        for x in (a, b):
            clamped |= (x < gridmod.SHAPE_MIN) | (x > gridmod.SHAPE_MAX)
        a = a.clamp(gridmod.SHAPE_MIN, gridmod.SHAPE_MAX)
        b = b.clamp(gridmod.SHAPE_MIN, gridmod.SHAPE_MAX)
        u = gridmod.beta_quantile_torch(a, b, spec.k)
        out.append(gridmod.to_range(u, low, high))
    return out[0], out[1], clamped


def model_nodes(model: str, theta, spec: gridmod.GridSpec):
    import torch

    if model == "cbf":
        return grid_nodes_torch(theta, spec)
    return torch.exp(theta[:, 0:1]), torch.exp(theta[:, 1:2]), torch.zeros(theta.shape[0], dtype=torch.bool)


@dataclass
class Batch:
    """Torch tensors of a chunk of subjects, repeated once per restart row."""

    outcome: object
    valid: object
    response: object
    rmask: object


def _batch(cohort: Cohort, index: np.ndarray, repeat: int) -> Batch:
    import torch

    rows = np.repeat(index, repeat)
    resp = np.nan_to_num(cohort.response[rows], nan=0.0)
    return Batch(
        torch.from_numpy(np.ascontiguousarray(cohort.outcome[rows])),
        torch.from_numpy(cohort.valid[rows]),
        torch.from_numpy(np.ascontiguousarray(resp)),
        torch.from_numpy(cohort.response_mask()[rows]),
    )


def row_terms(theta, batch: Batch, opts: FitOptions):
    """(response loglik, observer evidence, log prior, clamped) per row."""
    import torch

    spec = models.GRADIENT_MODELS[opts.model]
    vn, sn, clamped = model_nodes(opts.model, theta, opts.grid)
    pred, logz = filter_predictions(batch.outcome, batch.valid, vn, sn, opts.filter)
    sigma = torch.exp(theta[:, -1])
    ll = response_loglik(pred, batch.response, batch.rmask, sigma, opts.response)
    evidence = logz.sum((-1, -2))
    mean = torch.tensor(spec.prior_mean, dtype=theta.dtype)
    sd = torch.tensor(spec.prior_sd, dtype=theta.dtype)
    z = (theta - mean) / sd
    logprior = (-0.5 * z * z - torch.log(sd) - 0.5 * math.log(2 * math.pi)).sum(-1)
    return ll, evidence, logprior, clamped


def neg_log_posterior(theta, batch, opts: FitOptions):
    """The per-row objective to minimise (responses, outcomes or both) and its parts."""
    ll, evidence, logprior, clamped = row_terms(theta, batch, opts)
    if opts.objective == "responses":
        data = ll
    elif opts.objective == "outcomes":
        data = evidence
    else:
        data = ll + evidence
    return -(data + logprior), ll, evidence, clamped


MIN_ROWS_PER_THREAD = 8  # the adjoint kernel costs ~0.5 ms per row: smaller slices are not worth a thread


class Objective:
    """Per-row negative log posterior and its gradient: by default the numba kernel (forward pass, then a
    hand-written reverse-mode sweep) with the Beta-quantile node derivatives chained on in NumPy.

    Rows are subject x restart; the torch graph (`neg_log_posterior`, `gradient="torch"`) is the reference
    it is tested against and can drive the same fit.
    """

    def __init__(self, cohort: Cohort, rows: np.ndarray, opts: FitOptions):
        self.opts = opts
        self.outcome = np.ascontiguousarray(cohort.outcome[rows], dtype=float)
        self.valid = np.ascontiguousarray(cohort.valid[rows])
        self.response = np.ascontiguousarray(np.nan_to_num(cohort.response[rows], nan=0.0))
        self.rmask = np.ascontiguousarray(cohort.response_mask()[rows])
        spec = models.GRADIENT_MODELS[opts.model]
        self.prior_mean = np.array(spec.prior_mean)
        self.prior_sd = np.array(spec.prior_sd)

    def nodes(self, theta: np.ndarray):
        """(v nodes, s nodes, dv, ds, clamped): nodes [N,K] and their derivatives [N,K,2] w.r.t. theta."""
        N = theta.shape[0]
        if self.opts.model == "kf":
            v, s = np.exp(theta[:, 0:1]), np.exp(theta[:, 1:2])
            dv = np.zeros((N, 1, 2))
            ds = np.zeros((N, 1, 2))
            dv[:, 0, 0] = v[:, 0]
            ds[:, 0, 0] = s[:, 0]
            return v, s, dv, ds, np.zeros(N, dtype=bool)
        spec = self.opts.grid
        out = []
        clamped = np.zeros(N, dtype=bool)
        for col, (low, high) in ((0, spec.v_range), (2, spec.s_range)):
            mu = models.sigmoid(theta[:, col])
            kappa = np.exp(theta[:, col + 1])
            a, b = mu * kappa, (1 - mu) * kappa
            ca = np.clip(a, gridmod.SHAPE_MIN, gridmod.SHAPE_MAX)
            cb = np.clip(b, gridmod.SHAPE_MIN, gridmod.SHAPE_MAX)
            clamped |= (ca != a) | (cb != b)
            u = gridmod.beta_quantiles(ca, cb, spec.k)
            du_da, du_db = gridmod.beta_quantile_grad(ca[:, None], cb[:, None], u)
            du_da = np.where((ca == a)[:, None], du_da, 0.0)
            du_db = np.where((cb == b)[:, None], du_db, 0.0)
            span = np.log(high) - np.log(low)
            node = gridmod.to_range(u, low, high)
            slope = kappa * mu * (1 - mu)
            d_logit = du_da * slope[:, None] - du_db * slope[:, None]
            d_logk = du_da * a[:, None] + du_db * b[:, None]
            out.append((node, np.stack([node * span * d_logit, node * span * d_logk], -1)))
        return out[0][0], out[1][0], out[0][1], out[1][1], clamped

    def parts(self, theta: np.ndarray, rows: np.ndarray | None = None, need_grad: bool = True):
        """(loss, grad, response loglik, observer evidence, clamped) per row (of `rows`, default all).
        Without need_grad the gradient is not computed (returned as zeros)."""
        theta = np.ascontiguousarray(theta, dtype=float)
        if self.opts.gradient == "torch" and need_grad:
            return self._parts_torch(theta, rows)
        from methodkit.tools.cbf import kernels

        pick = slice(None) if rows is None else rows
        N = theta.shape[0]
        v, s, dv, ds, clamped = self.nodes(theta)
        ll, ev, gls = np.empty(N), np.empty(N), np.empty(N)
        gv, gs = np.zeros(v.shape), np.zeros(s.shape)
        w_ll = 0.0 if self.opts.objective == "outcomes" else 1.0
        w_ev = 0.0 if self.opts.objective == "responses" else 1.0
        f, r = self.opts.filter, self.opts.response
        lo, hi = r.clip if r.clip is not None else (-np.inf, np.inf)
        threads.over_rows(
            kernels.cbf_value_adjoint,
            (
                np.ascontiguousarray(self.outcome[pick]),
                np.ascontiguousarray(self.valid[pick]),
                np.ascontiguousarray(self.response[pick]),
                np.ascontiguousarray(self.rmask[pick]),
                np.ascontiguousarray(v),
                np.ascontiguousarray(s),
                np.ascontiguousarray(theta[:, -1]),
            ),
            (
                float(f.m0),
                float(f.w0),
                float(f.switch),
                bool(f.carry_over),
                float(lo),
                float(hi),
                bool(r.censor and r.clip is not None),
                float(r.lapse if r.clip is not None else 0.0),
                w_ll,
                w_ev,
                need_grad,
            ),
            (ll, ev, gv, gs, gls),
            MIN_ROWS_PER_THREAD,
        )
        # chain rule from node adjoints to theta: [d/dv-shape params, d/ds-shape params, d/dlog sigma_r]
        gdata = np.concatenate([np.einsum("nk,nkd->nd", gv, dv), np.einsum("nk,nkd->nd", gs, ds), gls[:, None]], 1)
        data = w_ll * ll + w_ev * ev
        if self.opts.model == "kf":
            gdata = gdata[:, [0, 2, 4]]
        z = (theta - self.prior_mean) / self.prior_sd
        logprior = (-0.5 * z * z - np.log(self.prior_sd) - 0.5 * math.log(2 * math.pi)).sum(-1)
        loss = -(data + logprior)
        grad = -(gdata - z / self.prior_sd)
        bad = ~np.isfinite(loss) | ~np.isfinite(grad).all(-1)
        grad[bad] = 0.0
        return loss, grad, ll, ev, clamped

    def _parts_torch(self, theta: np.ndarray, rows):
        """The reference path: the torch graph of the filter, differentiated by autograd."""
        import torch

        pick = slice(None) if rows is None else rows
        batch = Batch(
            torch.from_numpy(self.outcome[pick]),
            torch.from_numpy(self.valid[pick]),
            torch.from_numpy(self.response[pick]),
            torch.from_numpy(self.rmask[pick]),
        )
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            t = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
            loss, ll, ev, clamped = neg_log_posterior(t, batch, self.opts)
            finite = torch.isfinite(loss)
            torch.where(finite, loss, torch.zeros_like(loss)).sum().backward()
        finally:
            torch.set_default_dtype(previous)
        grad = t.grad.numpy().copy()
        loss = loss.detach().numpy().copy()
        grad[~np.isfinite(loss) | ~np.isfinite(grad).all(-1)] = 0.0
        return loss, grad, ll.detach().numpy().copy(), ev.detach().numpy().copy(), clamped.numpy().copy()

    def __call__(self, theta, rows=None):
        loss, grad, _, _, _ = self.parts(theta, rows)
        return loss, grad


def row_hessians(theta: np.ndarray, objective: Objective, h: float = 1e-4, rows=None) -> np.ndarray:
    """[N, d, d] Hessians of each row's objective (of `rows` when given): central differences of the exact
    gradient. Rows are independent, so perturbing coordinate j of every row at once gives column j of every block.
    """
    N, d = theta.shape
    H = np.empty((N, d, d))
    for j in range(d):
        step = np.zeros(d)
        step[j] = h
        _, gp = objective(theta + step, rows)
        _, gm = objective(theta - step, rows)
        H[:, :, j] = (gp - gm) / (2 * h)
    return 0.5 * (H + H.transpose(0, 2, 1))


class ShapeSpace:
    """The coordinates the CBF is optimised in: y = (log a_v, log b_v, log a_s, log b_s, log sigma_r).

    The Beta shapes are clamped to [SHAPE_MIN, SHAPE_MAX]; beyond the clamp the likelihood is flat, and in
    theta that makes a kink where many subjects' optima sit (the gradient never vanishes there). In shape
    coordinates the clamp is a box, which the optimizer keeps by projection, and the prior (on theta) pulls
    back into the box from every side, so the box minimum is the clamped objective's minimum. kf: y = theta.
    """

    EDGE = 1e-9  # bounds a hair inside the clamp, so that exp(log bound) is never clamped by rounding

    def __init__(self, objective: Objective, model: str):
        self.objective = objective
        self.cbf = model == "cbf"

    def bounds(self, d: int):
        lower, upper = np.full(d, -np.inf), np.full(d, np.inf)
        if self.cbf:
            lower[:4] = math.log(gridmod.SHAPE_MIN) + self.EDGE
            upper[:4] = math.log(gridmod.SHAPE_MAX) - self.EDGE
        return lower, upper

    def to_y(self, theta: np.ndarray) -> np.ndarray:
        if not self.cbf:
            return theta.copy()
        y = theta.copy()
        for col in (0, 2):
            log_mu = -np.logaddexp(0.0, -theta[:, col])
            log_1mu = -np.logaddexp(0.0, theta[:, col])
            y[:, col], y[:, col + 1] = log_mu + theta[:, col + 1], log_1mu + theta[:, col + 1]
        return y

    def to_theta(self, y: np.ndarray) -> np.ndarray:
        if not self.cbf:
            return y.copy()
        theta = y.copy()
        for col in (0, 2):
            theta[:, col], theta[:, col + 1] = y[:, col] - y[:, col + 1], np.logaddexp(y[:, col], y[:, col + 1])
        return theta

    def __call__(self, y: np.ndarray, rows=None):
        theta = self.to_theta(y)
        loss, g = self.objective(theta, rows)
        if not self.cbf:
            return loss, g
        gy = g.copy()
        for col in (0, 2):  # d logit mu / d (log a, log b) = (1, -1); d log kappa / d (log a, log b) = (mu, 1 - mu)
            mu = models.sigmoid(theta[:, col])
            gy[:, col] = g[:, col] + mu * g[:, col + 1]
            gy[:, col + 1] = -g[:, col] + (1 - mu) * g[:, col + 1]
        return loss, gy


def _lbfgs(theta0: np.ndarray, objective: Objective, opts: FitOptions) -> np.ndarray:
    """torch L-BFGS (strong Wolfe) on the summed, block-diagonal objective of all rows."""
    import torch

    theta = torch.tensor(theta0, dtype=torch.float64, requires_grad=True)
    optim = torch.optim.LBFGS(
        [theta],
        lr=1.0,
        max_iter=opts.max_iter,
        history_size=20,
        line_search_fn="strong_wolfe",
        tolerance_grad=1e-6,
        tolerance_change=1e-10,
    )

    def closure():
        optim.zero_grad()
        loss, grad = objective(theta.detach().numpy())
        theta.grad = torch.from_numpy(grad)
        return torch.tensor(float(np.where(np.isfinite(loss), loss, 0.0).sum()), dtype=torch.float64)

    optim.step(closure)
    return theta.detach().numpy().copy()


def _newton(y: np.ndarray, space: ShapeSpace, lower, upper, opts: FitOptions, gtol: float) -> np.ndarray:
    """Damped Newton steps (|eigenvalues| floored, clipped into the box) on the rows L-BFGS left with a
    projected gradient norm above gtol, each step accepted only where the row improves."""
    y = y.copy()
    _, g = space(y)
    rows = np.flatnonzero(np.linalg.norm(projected_gradient(y, g, lower, upper), axis=1) > gtol)
    for _ in range(opts.newton_steps):
        if rows.size == 0:
            break
        x = y[rows]
        loss, g = space(x, rows)
        H = row_hessians(x, space, rows=rows)
        w, V = np.linalg.eigh(H)
        w = np.maximum(np.abs(w), 1e-3)
        step = -np.einsum("nij,nj->ni", V, np.einsum("nji,nj->ni", V, g) / w)
        trial = np.clip(x + np.clip(np.nan_to_num(step), -2.0, 2.0), lower, upper)
        new_loss, _ = space(trial, rows)
        better = np.isfinite(new_loss) & (new_loss < loss)
        y[rows[better]] = trial[better]
        rows = rows[better]
    return y


def screen_starts(objective: Objective, opts: FitOptions, fixed: np.ndarray) -> np.ndarray:
    """[S, opts.screen, d] extra start points per subject (optimizer coordinates): the best-scoring points of a
    fixed grid (`models.screen_grid`), scored by one value-only pass, excluding points of the fixed design."""
    S = objective.outcome.shape[0]
    grid = models.screen_grid(opts.model)
    grid = grid[~(np.abs(grid[:, None, :] - fixed[None]).max(-1) < 1e-9).any(1)]
    k = min(opts.screen, grid.shape[0])
    if k <= 0:
        return np.zeros((S, 0, fixed.shape[1]))
    space = ShapeSpace(objective, opts.model)
    lower, upper = space.bounds(grid.shape[1])
    grid = np.clip(grid, lower, upper)
    rows = np.repeat(np.arange(S), grid.shape[0])
    loss, *_ = objective.parts(space.to_theta(np.tile(grid, (S, 1))), rows, need_grad=False)
    loss = np.where(np.isfinite(loss), loss, np.inf).reshape(S, grid.shape[0])
    order = np.argsort(loss, axis=1, kind="stable")[:, :k]
    return grid[order]


def fit_gradient(cohort: Cohort, opts: FitOptions, progress=silent) -> pd.DataFrame:
    """Fit cbf or kf to every subject; one row per subject (see `fit` for the columns)."""
    spec = models.GRADIENT_MODELS[opts.model]
    starts = np.array(spec.starts[: max(1, opts.restarts)])
    R = len(starts)
    d = starts.shape[1]
    S = cohort.n_subjects
    rows = []
    mask = cohort.response_mask()
    progress(f"fit {opts.model}", 0, S)
    done = 0
    for first in range(0, S, opts.chunk):
        started = time.perf_counter()
        index = np.arange(first, min(S, first + opts.chunk))
        n = index.size
        single = Objective(cohort, index, opts)
        fixed = ShapeSpace(single, opts.model).to_y(starts)
        y0 = np.concatenate([np.tile(fixed[None], (n, 1, 1)), screen_starts(single, opts, fixed)], 1)
        R = y0.shape[1]
        objective = Objective(cohort, np.repeat(index, R), opts)
        space = ShapeSpace(objective, opts.model)
        lower, upper = space.bounds(d)
        if opts.optimizer_grad == "torch-lbfgs":
            y = space.to_y(_lbfgs(space.to_theta(y0.reshape(n * R, d)), objective, opts))
        else:
            y, _, _, _ = minimize_rows(
                space, y0.reshape(n * R, d), max_iter=opts.max_iter, gtol=GRAD_TOL / 10, lower=lower, upper=upper
            )
        y = _newton(y, space, lower, upper, opts, GRAD_TOL / 10)
        loss, _ = space(y)
        loss = np.where(np.isfinite(loss), loss, np.inf).reshape(n, R)
        best_y = y[np.arange(n) * R + loss.argmin(1)]
        best = space.to_theta(best_y)
        final, g, ll, evidence, clamped = single.parts(best)
        _, gy = ShapeSpace(single, opts.model)(best_y)
        pgnorm = np.linalg.norm(projected_gradient(best_y, gy, lower, upper), axis=1)
        at_bound = ((best_y <= lower + 1e-6) | (best_y >= upper - 1e-6)).any(1)
        H = row_hessians(best, single)
        seconds = (time.perf_counter() - started) / n
        values = models.natural(opts.model, best)
        for i, s in enumerate(index):
            n_obs = int(mask[s].sum())
            ok = bool(np.isfinite(final[i]))
            sign, logdet = np.linalg.slogdet(H[i]) if ok else (0.0, np.nan)
            log_evidence = -final[i] + 0.5 * d * math.log(2 * math.pi) - 0.5 * logdet if sign > 0 else np.nan
            gnorm = float(pgnorm[i])
            row = {"subject": cohort.subjects[s], "model": opts.model}
            row.update({k: float(v[i]) for k, v in values.items()})
            if opts.model == "cbf":
                row["omega_v"] = 1.0 / row["kappa_v"]
                row["omega_s"] = 1.0 / row["kappa_s"]
                row["D"] = math.log(row["kappa_v"]) - math.log(row["kappa_s"])
            row.update(
                {
                    "loglik": float(ll[i]) if ok else np.nan,
                    "observer_evidence": float(evidence[i]) if ok else np.nan,
                    "log_evidence": float(log_evidence),
                    "bic": float(-2 * ll[i] + d * math.log(max(n_obs, 1))) if ok else np.nan,
                    "n_trials": n_obs,
                    "n_restarts": R,
                    "converged": bool(ok and gnorm < GRAD_TOL),
                    "grad_norm": gnorm,
                    "boundary": bool(clamped[i] or at_bound[i]),
                    "failed": not ok,
                    "seconds": round(seconds, 4),
                }
            )
            rows.append(row)
        done += n
        progress(f"fit {opts.model}", done, S)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- particle filters, derivative-free


def pf_predictions(
    model: str, cohort: Cohort, values: np.ndarray, opts: FitOptions, seeds: np.ndarray, signals: bool = False
):
    """Mean-over-runs predictions and signals [S, B, T] of a particle model, plus collapse counts [S, R].
    Without `signals` only the predictions are computed (vol/sto/ambiguity come back NaN)."""
    from methodkit.tools.cbf.particles import run_particles

    outs, collapses = run_particles(
        model,
        cohort.outcome,
        cohort.valid,
        values,
        opts.particles,
        seeds,
        opts.filter.m0,
        opts.filter.w0,
        signals,
        opts.device,
    )
    return [o.mean(1) for o in outs], [o for o in outs], collapses


def run_seeds(seed: int, subject: int, evaluation: int, runs: int) -> np.ndarray:
    """Per-run PF seeds for one objective evaluation (fresh particle noise each time, as in the protocol)."""
    ss = np.random.SeedSequence([seed, subject, evaluation])
    return ss.generate_state(runs, dtype=np.uint32).astype(np.int64)[None, :]


def fit_particle(cohort: Cohort, opts: FitOptions, seed: int = 0, progress=silent) -> pd.DataFrame:
    """SSE(predictions, responses) averaged over R particle-filter runs, minimised in the box by Nelder-Mead
    or Bayesian optimisation (Piray & Daw 2024's protocol: 5 seed points, GP surrogate, `--evaluations`)."""
    from methodkit.tools.cbf.derivfree import OPTIMIZERS, minimize_box

    if opts.optimizer not in OPTIMIZERS:
        raise UsageError(f"--optimizer must be one of {', '.join(OPTIMIZERS)}")
    spec = models.PARTICLE_MODELS[opts.model]
    low, high = np.array(spec.low), np.array(spec.high)
    rows = []
    S = cohort.n_subjects
    progress(f"fit {opts.model}", 0, S)
    mask = cohort.response_mask()
    for s in range(S):
        started = time.perf_counter()
        one = cohort.subset([s])
        counter = {"n": 0, "collapse": 0}
        resp = one.response[0]
        m = mask[s]

        def objective(x, one=one, resp=resp, m=m, counter=counter, s=s):
            values = low + (high - low) * np.clip(x, 0.0, 1.0)
            seeds = run_seeds(seed, s, counter["n"], opts.runs)
            counter["n"] += 1
            _, per_run, collapses = pf_predictions(opts.model, one, values[None, :], opts, seeds)
            counter["collapse"] += int(collapses.sum())
            sse = ((per_run[0][0] - resp[None]) ** 2)[:, m].sum(-1)
            return float(sse.mean())

        result = minimize_box(
            objective,
            low.size,
            opts.optimizer,
            opts.evaluations,
            seed=int(np.random.SeedSequence([seed, s]).generate_state(1)[0]),
        )
        values = low + (high - low) * np.clip(result.x, 0.0, 1.0)
        n_obs = int(m.sum())
        sse = float(result.fun)
        row = {"subject": cohort.subjects[s], "model": opts.model}
        row.update({k: float(v) for k, v in zip(spec.names, values)})
        sigma2 = sse / max(n_obs, 1)
        loglik = -0.5 * n_obs * (math.log(2 * math.pi * sigma2) + 1.0)
        row.update(
            {
                "sse": sse,
                "sigma_r": math.sqrt(sigma2),
                "loglik": loglik,
                "log_evidence": np.nan,
                "bic": -2 * loglik + (low.size + 1) * math.log(max(n_obs, 1)),
                "n_trials": n_obs,
                "n_restarts": 1,
                "converged": bool(result.success),
                "grad_norm": np.nan,
                "boundary": bool(np.any(result.x <= 1e-6) or np.any(result.x >= 1.0 - 1e-6)),
                "failed": not np.isfinite(sse),
                "collapses": counter["collapse"],
                "evaluations": counter["n"],
                "seconds": round(time.perf_counter() - started, 3),
            }
        )
        rows.append(row)
        progress(f"fit {opts.model}", s + 1, S)
    return pd.DataFrame(rows)


@dataclass
class FitResult:
    table: pd.DataFrame
    failed: list

    def to_dict(self) -> dict:
        return {"n_subjects": len(self.table), "n_failed": len(self.failed), "failed": self.failed}


def run(cohort: Cohort, opts: FitOptions, *, seed: int = 0, progress=silent, max_failed: float = 0.05) -> FitResult:
    """Fit every subject; raise RunFailure (after the caller may keep the table) when > max_failed fail."""
    if opts.model not in models.MODELS:
        raise UsageError(f"--model must be one of {', '.join(models.MODELS)}")
    if opts.objective not in OBJECTIVES:
        raise UsageError(f"--objective must be one of {', '.join(OBJECTIVES)}")
    if opts.model in models.GRADIENT_MODELS and opts.gradient != "torch" and opts.optimizer_grad != "torch-lbfgs":
        table = fit_gradient(cohort, opts, progress)  # the adjoint path: no torch (its import alone costs ~3 CPU-s)
    elif opts.model in models.GRADIENT_MODELS:
        import torch

        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)  # the reference graph runs in float64; restored after
        try:
            table = fit_gradient(cohort, opts, progress)
        finally:
            torch.set_default_dtype(previous)
    else:
        if opts.objective != "responses":
            raise UsageError(f"--objective {opts.objective} needs a likelihood model (cbf or kf), not {opts.model}")
        table = fit_particle(cohort, opts, seed, progress)
    failed = table.loc[table["failed"], "subject"].astype(str).tolist()
    return FitResult(table, failed)


def check_failures(result: FitResult, max_failed: float = 0.05) -> None:
    if result.failed and len(result.failed) > max_failed * len(result.table):
        shown = ", ".join(result.failed[:10]) + (" ..." if len(result.failed) > 10 else "")
        raise RunFailure(
            f"the fit failed for {len(result.failed)} of {len(result.table)} subjects ({shown}); the others were written"
        )
