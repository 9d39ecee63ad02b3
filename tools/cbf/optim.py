"""Batched L-BFGS over independent rows: each row keeps its own curvature history and step length.

Rows (subject x restart) are independent problems, so one objective call evaluates every pending
row at once. A summed objective under one shared L-BFGS (torch.optim.LBFGS) mixes the rows'
curvature pairs and converged poorly here (median gradient norm 1.6 after 121 evaluations on 80
rows); per-row histories with a backtracking Armijo search reach gradient norms below 1e-2.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Fun = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]  # (theta[rows], rows) -> (f, grad)


def _two_loop(g, S, Y, valid, order):
    """H_k g per row by the L-BFGS two-loop recursion; slots used newest first (`order`)."""
    q = g.copy()
    alphas = []
    for k in order:
        sy = np.einsum("nd,nd->n", S[k], Y[k])
        rho = np.where(valid[k], 1.0 / np.where(valid[k], sy, 1.0), 0.0)
        a = rho * np.einsum("nd,nd->n", S[k], q)
        q -= a[:, None] * Y[k]
        alphas.append((k, rho, a))
    gamma = np.ones(g.shape[0])
    seen = np.zeros(g.shape[0], dtype=bool)
    for k in order:  # initial scaling from each row's newest valid pair
        use = valid[k] & ~seen
        sy = np.einsum("nd,nd->n", S[k], Y[k])
        yy = np.einsum("nd,nd->n", Y[k], Y[k])
        gamma = np.where(use, sy / np.where(use, yy, 1.0), gamma)
        seen |= valid[k]
    gamma = np.where(seen, gamma, 1.0 / np.maximum(1.0, np.linalg.norm(g, axis=1)))
    r = gamma[:, None] * q
    for k, rho, a in reversed(alphas):
        b = rho * np.einsum("nd,nd->n", Y[k], r)
        r += (a - b)[:, None] * S[k]
    return r


def minimize_rows(
    fun: Fun, x0: np.ndarray, *, max_iter: int = 200, memory: int = 10, gtol: float = 1e-3, max_step: float = 2.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Minimise every row of x0 [N, d]; returns (x, f, grad, evaluations of rows)."""
    x = x0.astype(float).copy()
    N, d = x.shape
    all_rows = np.arange(N)
    f, g = fun(x, all_rows)
    evaluated = N
    S = np.zeros((memory, N, d))
    Y = np.zeros((memory, N, d))
    valid = np.zeros((memory, N), dtype=bool)
    slot = 0
    stalled = np.zeros(N, dtype=int)
    for it in range(max_iter):
        active = np.isfinite(f) & (np.linalg.norm(g, axis=1) > gtol) & (stalled < 3)
        if not active.any():
            break
        order = [(slot - 1 - k) % memory for k in range(min(it, memory))]
        direction = -_two_loop(g, S, Y, valid, order)
        slope = np.einsum("nd,nd->n", g, direction)
        bad = ~(slope < 0) | ~np.isfinite(slope)
        direction[bad] = -g[bad]
        slope[bad] = -np.einsum("nd,nd->n", g[bad], g[bad])
        length = np.linalg.norm(direction, axis=1)
        step = np.minimum(1.0, max_step / np.maximum(length, 1e-300))
        pending = np.flatnonzero(active)
        new_x, new_f, new_g = x.copy(), f.copy(), g.copy()
        accepted = np.zeros(N, dtype=bool)
        for _ in range(30):
            if pending.size == 0:
                break
            trial = x[pending] + step[pending, None] * direction[pending]
            ft, gt = fun(trial, pending)
            evaluated += pending.size
            ok = np.isfinite(ft) & (ft <= f[pending] + 1e-4 * step[pending] * slope[pending])
            rows = pending[ok]
            new_x[rows], new_f[rows], new_g[rows] = trial[ok], ft[ok], gt[ok]
            accepted[rows] = True
            step[pending[~ok]] *= 0.5
            pending = pending[~ok]
        s_new = new_x - x
        y_new = new_g - g
        keep = accepted & (np.einsum("nd,nd->n", s_new, y_new) > 1e-10)
        S[slot], Y[slot], valid[slot] = np.where(keep[:, None], s_new, 0.0), np.where(keep[:, None], y_new, 0.0), keep
        slot = (slot + 1) % memory
        improved = accepted & (f - new_f > 1e-9 * (1 + np.abs(f)))
        stalled = np.where(active & ~improved, stalled + 1, 0)
        x, f, g = new_x, new_f, new_g
    return x, f, g, evaluated
