"""The soft output: mu = argmin_{y in P} 1/2 ||y - theta||^2, exact, with its closed-form Jacobian.

P = {y : A y = b, l <= y <= u}. For a dual vector nu the minimiser over the box is
y(nu) = clip(theta - A^T nu, l, u), always optimal for nu; what remains is A y(nu) = b, a
piecewise-linear monotone system. We solve it by semismooth Newton on the concave dual
g(nu) = min_box L(y, nu): the generalised Hessian is -A D A^T with D the free set, the step solves
A (D + kappa (I - D)) A^T dnu = F(nu) (sparse LDL^T on the fixed pattern of A A^T, gram.py; SuperLU
or dense LU for small programs), and an Armijo search on g keeps every step an
ascent. kappa = 1e-2 min(||F||, 1) regularises rows whose variables are all at a bound and vanishes
as F -> 0; at the end one step on the exact A D A^T solves the linear system on the final active
set (the "polish"). Termination: ||A y - b||_inf <= tol, which with y = clip(theta - A^T nu)
is the full KKT certificate. A row that needs more than `max_iter` steps gets status proj_error
and a NaN mu, never a silently inexact one.

Closed-form cases: (i) only disjoint one-hot rows -> per-group sparsemax (Numba); (ii) rows with
disjoint supports (no variable in two rows: exactly_k / at_most_k = a capped simplex, a single
linear row, fixed values, any box) -> per-row sort-and-threshold (threshold_segments: the scalar
multiplier of each row from its sorted breakpoints), certified by the same residual test and handed
to Newton only if that fails; (iii) no bound active at the affine projection
nu0 = (A A^T)^{-1}(A theta - b) -> done at step 0.

Backward: J = D - D A^T (A D A^T)^+ A D (symmetric), applied with the last factorisation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

from methodkit.tools.casper.gram import SparseGram
from methodkit.tools.casper.program import Program, onehot_only, separable_rows

MAX_ITER = 50
TOL = 1e-10
# Termination is ||A y - b||_inf <= TOL + TOL_REL ||theta||_inf: y = clip(theta - A^T nu) carries a
# rounding error of about eps ||theta|| per entry, so an absolute 1e-10 is unreachable once the scores
# are ~1e6 (measured: 30x30 flows with logits ~1e6 stalled at 1e-10..4e-9 and ended proj_error).
TOL_REL = 1e-13
TOL_MAX = 1e-6  # beyond this (scores above ~1e7) a row is proj_error rather than loosely certified
STALL_STEPS = 4  # hand a row to the interior-point safeguard when ||F|| has not halved in this many steps
DENSE_SIZE = 50_000  # m * n below which dense LAPACK beats sparse overhead


class _DenseFactor:
    """LU of a small dense Gram matrix, with splu's .solve interface."""

    def __init__(self, M: np.ndarray):
        import warnings

        from scipy.linalg import lu_factor

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.lu = lu_factor(M, check_finite=False)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        from scipy.linalg import lu_solve

        return lu_solve(self.lu, rhs, check_finite=False)


@dataclass
class RowState:
    """What one instance's projection leaves for the backward pass and the report."""

    status: str  # "ok" or "proj_error"
    method: str  # "sparsemax", "affine" or "newton"
    iterations: int
    residual: float  # ||A mu - b||_inf at the end
    free: np.ndarray | None = None  # bool (n,), variables strictly inside their bounds
    factor: object | None = None  # a factor of A_S A_S^T + delta I with .solve (Newton rows)
    # proj_error rows: the interior-point safeguard's primal point (uncertified), for the hard decode
    fallback: np.ndarray | None = None


class Projector:
    """Exact Euclidean projection onto a program's polytope, batched over instances."""

    def __init__(self, program: Program, *, max_iter: int = MAX_ITER, tol: float = TOL, stall: int = STALL_STEPS):
        self.program = program
        self.max_iter = max_iter
        self.stall = stall  # 0: Newton keeps its first half of the budget even without progress
        self.tol = tol
        self.n = program.n
        self.lower = program.lower
        self.upper = program.upper
        self.A = program.A.tocsc()
        self.At = program.A.T.tocsr()
        self.Ar = program.A.tocsr()
        self.b = program.b
        self.dense = program.m * program.n <= DENSE_SIZE
        if self.dense:
            self.Ad = program.A.toarray()
            self.Ar = self.Ad
            self.At = np.ascontiguousarray(self.Ad.T)
        # Large programs: LDL^T refactored on the fixed pattern of A A^T (gram.py); SuperLU is the fallback.
        self.gram = None if self.dense or onehot_only(program) else SparseGram.build(program.A)
        self.sparsemax = onehot_only(program)
        self.threshold = not self.sparsemax and separable_rows(program)
        if self.sparsemax or self.threshold:
            rows = np.full(self.n, -1, dtype=np.int64)
            coo = program.A.tocoo()
            rows[coo.col] = coo.row
            in_group = rows >= 0
            order = np.flatnonzero(in_group)
            order = order[np.argsort(rows[order], kind="stable")]
            self.group_order = order
            self.group_ptr = np.r_[0, np.cumsum(np.bincount(rows[order], minlength=program.m))].astype(np.int64)
            self.group_of = rows
            self.loose = np.flatnonzero(~in_group)
            self.coef = np.zeros(self.n)
            self.coef[coo.col] = coo.data
            self.group_coef = np.ascontiguousarray(self.coef[order])
            # groups laid out in place, none empty: gathers and group sums need no index arrays
            self.in_place = bool(np.array_equal(order, np.arange(self.n)) and np.all(np.diff(self.group_ptr) > 0))
        if self.sparsemax:
            self.full_factor = None
        else:
            self.full_factor = self._factor(np.ones(self.n, dtype=bool), 0.0) if program.m else None

    # ---- helpers
    def _factor(self, free: np.ndarray, delta: float):
        """A factorisation of A_S A_S^T + delta I (S = free) with a .solve method."""
        if self.dense:
            A_s = self.Ad[:, free]
            M = A_s @ A_s.T
            M[np.diag_indices_from(M)] += delta
            return _DenseFactor(M)
        if self.gram is not None:
            factor = self.gram.factor(free.astype(np.float64), delta, keep=True)
            if factor is not None:  # None: a (nearly) zero pivot; SuperLU's pivoting LU handles it
                return factor
        return splu(self._gram(free, delta))

    def _soft_factor(self, free: np.ndarray, kappa: float):
        """A (D + kappa (I - D)) A^T: clipped variables keep a small weight while far from the solution,
        so rows whose variables are all at a bound get steps of the right scale (kappa -> 0 as F -> 0)."""
        weight = np.where(free, 1.0, kappa)
        if self.dense:
            M = (self.Ad * weight) @ self.Ad.T
            M[np.diag_indices_from(M)] += 1e-12
            return _DenseFactor(M)
        if self.gram is not None:
            factor = self.gram.factor(weight, 1e-12, keep=False)  # used once, for this step
            if factor is not None:
                return factor
        M = (self.A @ sp.diags(weight) @ self.A.T).tocsc() + 1e-12 * sp.identity(self.program.m, format="csc")
        return splu(sp.csc_matrix(M))

    def _gram(self, free: np.ndarray, delta: float):
        A_s = self.A[:, free]
        M = (A_s @ A_s.T).tocsc()
        if delta:
            M = M + delta * sp.identity(M.shape[0], format="csc")
        return sp.csc_matrix(M)

    def _respond(self, theta, nu):
        z = theta - self.At @ nu
        y = np.clip(z, self.lower, self.upper)
        F = self.Ar @ y - self.b
        return z, y, F

    def _dual(self, theta, y, F, nu) -> float:
        d = y - theta
        return 0.5 * float(d @ d) + float(nu @ F)

    # ---- forward
    def project(self, theta: np.ndarray, lower=None, upper=None) -> tuple[np.ndarray, list[RowState]]:
        """theta (batch, n) -> mu (batch, n) float64 and one RowState per row.

        `lower`/`upper` (batch, n) optionally replace the program's bounds per row (clamping
        observed variables, as weak supervision does).
        """
        from threadpoolctl import threadpool_limits

        if self.sparsemax and lower is None and upper is None:  # no BLAS call: skip the thread limit's cost
            return self._project_sparsemax(np.ascontiguousarray(theta, dtype=np.float64))
        with threadpool_limits(limits=1, user_api="blas"):  # small systems: threads only contend
            return self._project(np.ascontiguousarray(theta, dtype=np.float64), lower, upper)

    def _project(self, theta, lower, upper):
        if self.sparsemax and lower is None and upper is None:
            return self._project_sparsemax(theta)
        mu = np.empty_like(theta)
        states: list = [None] * theta.shape[0]
        todo = range(theta.shape[0])
        if self.threshold:
            todo = self._project_threshold(theta, lower, upper, mu, states)
        for i in todo:
            self.lower = self.program.lower if lower is None else lower[i]
            self.upper = self.program.upper if upper is None else upper[i]
            try:
                mu[i], state = self._project_one(theta[i])
            finally:
                self.lower, self.upper = self.program.lower, self.program.upper
            states[i] = state
        return mu, states

    def _project_threshold(self, theta, lower, upper, mu, states) -> list:
        """Rows with disjoint supports: the closed form per row; returns the instances it did not certify."""
        from methodkit.tools.casper.kernels import threshold_segments

        count = theta.shape[0]
        lo = np.broadcast_to(self.program.lower if lower is None else lower, theta.shape)
        hi = np.broadcast_to(self.program.upper if upper is None else upper, theta.shape)
        order = self.group_order
        y, fine = threshold_segments(
            np.ascontiguousarray(theta[:, order]),
            self.group_coef,
            np.ascontiguousarray(lo[:, order]),
            np.ascontiguousarray(hi[:, order]),
            self.b,
            self.group_ptr,
        )
        mu[:, order] = y
        mu[:, self.loose] = np.clip(theta[:, self.loose], lo[:, self.loose], hi[:, self.loose])
        left = []
        for i in range(count):
            tol = min(self.tol + TOL_REL * float(np.max(np.abs(theta[i]), initial=0.0)), max(self.tol, TOL_MAX))
            residual = float(np.max(np.abs(self.Ar @ mu[i] - self.b), initial=0.0))
            if not fine[i] or not np.all(np.isfinite(mu[i])) or residual > tol:
                left.append(i)
                continue
            free = (mu[i] > lo[i]) & (mu[i] < hi[i])
            states[i] = RowState("ok", "threshold", 0, residual, free)
        return left

    def _project_sparsemax(self, theta):
        from methodkit.tools.casper.kernels import sparsemax_segments

        program_A = self.program.A
        if self.in_place:
            mu = sparsemax_segments(theta, self.group_ptr)
        else:
            mu = np.empty_like(theta)
            mu[:, self.group_order] = sparsemax_segments(np.ascontiguousarray(theta[:, self.group_order]), self.group_ptr)
            mu[:, self.loose] = np.clip(theta[:, self.loose], 0.0, 1.0)
        free = (mu > 0) & (mu < 1)
        if self.in_place:
            residual = np.max(np.abs(np.add.reduceat(mu, self.group_ptr[:-1], axis=1) - self.b), axis=1, initial=0.0)
        else:
            free[:, self.loose] = (theta[:, self.loose] > 0) & (theta[:, self.loose] < 1)
            residual = np.max(np.abs(program_A @ mu.T - self.b[:, None]), axis=0, initial=0.0)
        return mu, [RowState("ok", "sparsemax", 0, float(r), f) for r, f in zip(residual, free)]

    def _project_one(self, theta: np.ndarray):
        self.row_tol = min(self.tol + TOL_REL * float(np.max(np.abs(theta), initial=0.0)), max(self.tol, TOL_MAX))
        if self.full_factor is None:  # no rows: the box alone
            free = (theta > self.lower) & (theta < self.upper)
            return np.clip(theta, self.lower, self.upper), RowState("ok", "affine", 0, 0.0, free)
        nu = self.full_factor.solve(self.Ar @ theta - self.b)
        first = self.max_iter // 2  # the step budget is shared: at most half before the safeguard, the rest after
        out, steps, F = self._newton(theta, nu, budget=first, stall=self.stall)
        if out is not None:
            return out
        # Safeguard: from scores far outside P (e.g. all raw logits < -2 on a flow) the Newton path
        # can stall. An interior-point QP (Clarabel) supplies a dual point near the solution; Newton
        # restarted there finishes it, and the same residual test certifies the result.
        nu_ipm, y_ipm = self._interior_point(theta)
        if nu_ipm is not None:
            out, more, F = self._newton(theta, nu_ipm, budget=self.max_iter - steps, method="newton+ipm", offset=steps)
            if out is not None:
                return out
            steps += more
        nan = np.full(self.n, np.nan)
        fallback = None if y_ipm is None else np.clip(y_ipm, self.lower, self.upper)
        return nan, RowState("proj_error", "newton", steps, float(np.max(np.abs(F))), None, None, fallback)

    def _newton(self, theta, nu, *, budget, method="newton", offset=0, stall=0):
        """Semismooth Newton from nu: ((mu, RowState), steps, F) when it certifies, else (None, steps, F).

        With `stall` > 0 it gives up early when ||F||_inf has not halved over the last `stall` steps:
        from raw scores far outside P (Warcraft cell logits) the free set wanders for dozens of steps
        without progress (measured: 30x30 maps never converged within 25 steps, 12x12 maps took 12-25),
        while converging rows shrink F geometrically; the caller then restarts from the safeguard's dual.
        """
        z, y, F = self._respond(theta, nu)
        g = self._dual(theta, y, F, nu)
        norms = []
        for it in range(budget + 1):
            norm = float(np.max(np.abs(F), initial=0.0))
            norms.append(norm)
            if norm <= self.row_tol:
                return self._finish(theta, nu, z, y, F, it + offset, method), it, F
            if it == budget or (stall and it >= stall and norm > 0.5 * norms[it - stall]):
                return None, it, F
            free = (z > self.lower) & (z < self.upper)
            factor = self._soft_factor(free, 1e-2 * min(norm, 1.0))
            step = factor.solve(F)
            slope = float(F @ step)
            t = 1.0
            for _ in range(40):  # Armijo on the concave dual
                nu_t = nu + t * step
                z_t, y_t, F_t = self._respond(theta, nu_t)
                g_t = self._dual(theta, y_t, F_t, nu_t)
                if g_t >= g + 1e-4 * t * slope - 1e-13 * max(1.0, abs(g)):
                    break
                t *= 0.5
            nu, z, y, F, g = nu_t, z_t, y_t, F_t, g_t
        return None, budget, F  # not reached: the loop returns at it == budget

    def _interior_point(self, theta):
        """(nu, y): the equality multipliers and the primal point of min 1/2||y - theta||^2 on P from
        Clarabel, or (None, None) if it fails."""
        try:
            import clarabel
        except ImportError:
            return None, None
        n, m = self.n, self.program.m
        finite = np.flatnonzero(np.isfinite(self.upper))
        lower_finite = np.flatnonzero(np.isfinite(self.lower))
        eye = sp.identity(n, format="csc")
        A = sp.vstack([self.program.A.tocsc(), -eye[lower_finite], eye[finite]]).tocsc()
        b = np.r_[self.b, -self.lower[lower_finite], self.upper[finite]]
        cones = [clarabel.ZeroConeT(m), clarabel.NonnegativeConeT(len(lower_finite) + len(finite))]
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-10
        solution = clarabel.DefaultSolver(eye, -np.asarray(theta, dtype=float), A, b, cones, settings).solve()
        if str(solution.status) not in ("Solved", "AlmostSolved"):
            return None, None
        # KKT: y - theta + A^T nu - z_l + z_u = 0
        return np.asarray(solution.z[:m], dtype=float), np.asarray(solution.x, dtype=float)

    def _finish(self, theta, nu, z, y, F, iterations, method="newton"):
        """Polish: one exact step on the final free set, kept if it lowers the residual."""
        free = (z > self.lower) & (z < self.upper)
        factor = self._factor(free, 1e-14)
        norm = float(np.max(np.abs(F), initial=0.0))
        if norm > 0.0:
            nu_p = nu + factor.solve(F)
            z_p, y_p, F_p = self._respond(theta, nu_p)
            free_p = (z_p > self.lower) & (z_p < self.upper)
            norm_p = float(np.max(np.abs(F_p), initial=0.0))
            if norm_p < norm and np.array_equal(free_p, free):
                y, norm = y_p, norm_p
        method = "affine" if iterations == 0 else method
        return y, RowState("ok", method, iterations, norm, free, factor)

    # ---- backward
    def vjp(self, states: list[RowState], grad: np.ndarray) -> np.ndarray:
        """J g per row, J = D - D A^T (A D A^T)^+ A D."""
        grad = np.asarray(grad, dtype=np.float64)
        out = np.zeros_like(grad)
        closed = [i for i, st in enumerate(states) if st.status == "ok" and st.method in ("sparsemax", "threshold")]
        if closed:  # disjoint rows, all instances at once: per row r, g_S - a_S (a_S . g_S) / (a_S . a_S)
            free = np.stack([states[i].free for i in closed])
            g = np.where(free, grad[closed], 0.0)
            if self.in_place:
                starts = self.group_ptr[:-1]
                sums = np.add.reduceat(g * self.coef, starts, axis=1)
                counts = np.add.reduceat(free * (self.coef * self.coef), starts, axis=1)
                mean = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
                g -= np.where(free, self.coef * np.repeat(mean, np.diff(self.group_ptr), axis=1), 0.0)
            else:
                A = self.program.A.tocsr()
                sums = (A @ g.T).T
                counts = (A.multiply(A) @ free.T.astype(np.float64)).T
                mean = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
                in_group = self.group_of >= 0
                g[:, in_group] -= np.where(free[:, in_group], self.coef[in_group] * mean[:, self.group_of[in_group]], 0.0)
            out[closed] = g
        for i, state in enumerate(states):
            if state.status != "ok" or state.method in ("sparsemax", "threshold"):
                continue
            g = np.where(state.free, grad[i], 0.0)
            if state.factor is None:
                out[i] = g
                continue
            A_s = self.Ad[:, state.free] if self.dense else self.A[:, state.free]
            rhs = A_s @ g[state.free]
            lam = state.factor.solve(rhs)
            g[state.free] -= A_s.T @ lam
            out[i] = g
        return out


def make_torch_layer(projector: Projector):
    """A differentiable torch function (theta (batch, n), optional bounds) -> mu (batch, n)."""
    import torch

    class CasperProjection(torch.autograd.Function):
        @staticmethod
        def forward(ctx, theta, lower=None, upper=None):
            mu, states = projector.project(theta.detach().cpu().double().numpy(), lower, upper)
            ctx.states = states
            bad = [i for i, s in enumerate(states) if s.status != "ok"]
            mu = torch.from_numpy(mu).to(theta.dtype).to(theta.device)
            ctx.bad = bad
            return mu

        @staticmethod
        def backward(ctx, grad):
            g = projector.vjp(ctx.states, grad.detach().cpu().double().numpy())
            return torch.from_numpy(g).to(grad.dtype).to(grad.device), None, None

    return CasperProjection.apply
