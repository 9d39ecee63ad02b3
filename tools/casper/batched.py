"""The same exact projection, batched and dense, on any array module (NumPy, or CuPy on a GPU).

The CPU Projector solves one instance at a time with sparse factorisations. Here every instance of the batch
takes its semismooth Newton steps in lockstep: the regularised Gram matrices
A (D_b + kappa_b (I - D_b)) A^T + 1e-12 I are formed per instance and solved together by one
batched dense solve (cuSOLVER through cupy.linalg.solve on a GPU), the Armijo search runs on all
unfinished rows at once, and finished rows are frozen. Same steps, same termination test
(||A y - b||_inf <= tol, the KKT certificate), same polish and the same proj_error status after
`max_iter` steps as projection.py, so the results agree to solver precision. Dense: meant for
programs of at most MAX_ROWS rows (the 30x30 grid flow has about 1.8k).
"""

from __future__ import annotations

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.tools.casper.program import Program
from methodkit.tools.casper.projection import MAX_ITER, TOL, TOL_MAX, TOL_REL, RowState

MAX_ROWS = 4096


class BatchedDenseProjector:
    """Projection of a batch of theta onto P = {A y = b, l <= y <= u}, with array module `xp`."""

    def __init__(self, program: Program, xp=np, *, max_iter: int = MAX_ITER, tol: float = TOL):
        if program.m > MAX_ROWS:
            raise UsageError(
                f"the batched dense projection handles programs of at most {MAX_ROWS} rows; this one has "
                f"{program.m} (use --device cpu)"
            )
        self.xp, self.program, self.max_iter, self.tol = xp, program, max_iter, tol
        self.A = xp.asarray(program.A.toarray())
        self.b = xp.asarray(program.b)
        self.lower = xp.asarray(program.lower)
        self.upper = xp.asarray(program.upper)
        self.eye = xp.eye(program.m)

    def _respond(self, theta, nu):
        z = theta - nu @ self.A
        y = self.xp.clip(z, self.lower, self.upper)
        return z, y, y @ self.A.T - self.b

    def _dual(self, theta, y, F, nu):
        return 0.5 * ((y - theta) ** 2).sum(1) + (nu * F).sum(1)

    def _solve(self, weights, F, delta):
        """Solve (A diag(w_b) A^T + delta I) x_b = F_b for every row b of the batch."""
        xp = self.xp
        M = xp.stack([(self.A * w) @ self.A.T for w in weights]) + delta * self.eye
        return xp.linalg.solve(M, F[:, :, None])[:, :, 0]

    def project(self, theta) -> tuple[np.ndarray, list[RowState]]:
        """theta (batch, n) -> mu (batch, n) as a NumPy array, and one RowState per row (no factor kept)."""
        xp = self.xp
        theta = xp.asarray(theta, dtype=xp.float64)
        batch = theta.shape[0]
        nu = self._solve(xp.ones((batch, self.program.n)), theta @ self.A.T - self.b, 1e-12)
        z, y, F = self._respond(theta, nu)
        g = self._dual(theta, y, F, nu)
        done = xp.zeros(batch, dtype=bool)
        steps = xp.zeros(batch, dtype=xp.int64)
        row_tol = xp.minimum(self.tol + TOL_REL * xp.abs(theta).max(1), max(self.tol, TOL_MAX))  # relative, capped
        for _ in range(self.max_iter + 1):
            norm = xp.abs(F).max(1)
            done = done | (norm <= row_tol)
            active = xp.flatnonzero(~done)
            if active.size == 0 or int(steps.max()) >= self.max_iter:
                break
            th, za, Fa, nua, ga = theta[active], z[active], F[active], nu[active], g[active]
            free = (za > self.lower) & (za < self.upper)
            kappa = 1e-2 * xp.minimum(norm[active], 1.0)
            step = self._solve(xp.where(free, 1.0, kappa[:, None]), Fa, 1e-12)
            slope = (Fa * step).sum(1)
            t = xp.ones(active.size)
            accepted = xp.zeros(active.size, dtype=bool)
            new = [nua, za, za, Fa, ga]
            for _ in range(40):  # Armijo on the concave dual, all unfinished rows together
                nu_t = nua + t[:, None] * step
                z_t, y_t, F_t = self._respond(th, nu_t)
                g_t = self._dual(th, y_t, F_t, nu_t)
                ok = (g_t >= ga + 1e-4 * t * slope - 1e-13 * xp.maximum(1.0, xp.abs(ga))) & ~accepted
                for k, value in enumerate((nu_t, z_t, y_t, F_t, g_t)):
                    mask = ok[:, None] if value.ndim == 2 else ok
                    new[k] = xp.where(mask, value, new[k])
                accepted = accepted | ok
                if bool(accepted.all()):
                    break
                t = xp.where(accepted, t, 0.5 * t)
            last = ~accepted  # no acceptable step: take the last trial, as the CPU loop does
            for k, value in enumerate((nu_t, z_t, y_t, F_t, g_t)):
                mask = last[:, None] if value.ndim == 2 else last
                new[k] = xp.where(mask, value, new[k])
            nu[active], z[active], y[active], F[active], g[active] = new
            steps[active] += 1
        return self._finish(theta, nu, z, y, F, done, steps)

    def _finish(self, theta, nu, z, y, F, done, steps):
        """Polish every converged row with one exact step on its free set, kept where it helps."""
        from methodkit.core.backend import to_numpy

        xp = self.xp
        free = (z > self.lower) & (z < self.upper)
        norm = xp.abs(F).max(1)
        nu_p = nu + self._solve(free.astype(xp.float64), F, 1e-14)
        z_p, y_p, F_p = self._respond(theta, nu_p)
        norm_p = xp.abs(F_p).max(1)
        same = ((z_p > self.lower) & (z_p < self.upper) == free).all(1)
        better = done & (norm_p < norm) & same & xp.isfinite(norm_p)
        y = xp.where(better[:, None], y_p, y)
        norm = xp.where(better, norm_p, norm)
        mu = xp.where(done[:, None], y, xp.nan)
        mu, done, steps, norm, free = (to_numpy(a) for a in (mu, done, steps, norm, free))
        states = [
            RowState("ok", "affine" if steps[i] == 0 else "newton", int(steps[i]), float(norm[i]), free[i])
            if done[i]
            else RowState("proj_error", "newton", int(steps[i]), float(norm[i]))
            for i in range(len(done))
        ]
        return np.asarray(mu), states
