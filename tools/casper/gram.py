"""Sparse LDL^T (QDLDL) of the Newton Gram matrices A diag(w) A^T + delta I, pattern analysed once.

Every Newton step of the projection factors A diag(w) A^T for new positive weights w. The sparsity
pattern is that of A A^T whatever w is, so the (row, row, variable) triples that make each entry
are listed once per program: assembling the matrix is one bincount into a fixed upper-triangular CSC
pattern (a Numba loop), and QDLDL (the OSQP team's quasi-definite LDL^T, AMD ordering) refactors it numerically
in place, with no symbolic analysis, fill-reducing ordering or pivot search per step. Measured on
one core (CPU time per factorisation): 30x30 flow (1,799 rows) 2.2 ms against 11 ms for SuperLU
with COLAMD; MNIST-add N=1024 (5,123 rows) 0.14 ms against about 8 ms including the sparse products.

The matrix is positive definite for the soft steps (w >= kappa > 0, A of full row rank), so LDL^T
without pivoting is stable; for the polish (w in {0, 1}, delta 1e-14) it can be nearly singular.
Each factorisation is checked by its backward error on a probe right-hand side; a failed one
returns None and the caller falls back to SuperLU's pivoting LU.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

MAX_TRIPLES = 20_000_000  # sum over variables of (rows it appears in)^2, bounded for memory
BACKWARD_ERROR = 1e-9  # max |M x - r| / (max|M| max|x| + max|r|) accepted from a factorisation


class SparseGram:
    """Assembles and factors A diag(w) A^T + delta I on a fixed pattern."""

    def __init__(self, A: sp.spmatrix, qdldl):
        self.qdldl = qdldl
        self.m = m = A.shape[0]
        A = sp.csc_matrix(A, copy=True)
        A.sum_duplicates()
        counts = np.diff(A.indptr).astype(np.int64)
        sq = counts**2
        # All (i, j) row pairs of each column k; row pair (i, j) gets A[i,k] A[j,k] w_k.
        var = np.repeat(np.arange(A.shape[1], dtype=np.int64), sq)
        local = np.arange(len(var), dtype=np.int64) - np.repeat(np.cumsum(sq) - sq, sq)
        width = np.maximum(np.repeat(counts, sq), 1)
        start = np.repeat(A.indptr[:-1].astype(np.int64), sq)
        ii, jj = start + local // width, start + local % width
        upper = A.indices[ii] <= A.indices[jj]  # symmetric: keep the upper triangle
        ii, jj, var = ii[upper], jj[upper], var[upper]
        keys = A.indices[jj].astype(np.int64) * m + A.indices[ii]  # column-major order = CSC order
        diag = np.arange(m, dtype=np.int64) * (m + 1)
        pattern = np.unique(np.r_[keys, diag])
        self.indptr = np.r_[0, np.cumsum(np.bincount(pattern // m, minlength=m))].astype(np.int32)
        self.indices = (pattern % m).astype(np.int32)
        order = np.argsort(keys, kind="stable")  # triples in storage order: the assembly writes sequentially
        self.pos = np.searchsorted(pattern, keys[order]).astype(np.int64)
        self.coef = np.ascontiguousarray((A.data[ii] * A.data[jj])[order], dtype=np.float64)
        self.var = np.ascontiguousarray(var[order], dtype=np.int64)
        self.diag_pos = np.searchsorted(pattern, diag).astype(np.int64)
        self.probe = np.linspace(1.0, 2.0, m)  # a fixed right-hand side for the backward-error check
        self.work = None  # the solver refactored in place for transient (per-step) factorisations

    @classmethod
    def build(cls, A: sp.spmatrix) -> SparseGram | None:
        """The assembler for A, or None when qdldl is missing, A has no rows or the triple list is too long."""
        try:
            import qdldl
        except ImportError:
            return None
        counts = np.diff(sp.csc_matrix(A).indptr).astype(np.int64)
        if A.shape[0] == 0 or int(np.sum(counts**2)) > MAX_TRIPLES:
            return None
        return cls(A, qdldl)

    def matrix(self, weight: np.ndarray, delta: float) -> sp.csc_matrix:
        """The upper triangle of A diag(weight) A^T + delta I, on the fixed pattern (zeros kept)."""
        from methodkit.tools.casper.kernels import gram_assemble

        weight = np.ascontiguousarray(weight, dtype=np.float64)
        data = gram_assemble(self.pos, self.coef, self.var, weight, self.diag_pos, float(delta), len(self.indices))
        return sp.csc_matrix((data, self.indices, self.indptr), shape=(self.m, self.m))

    def factor(self, weight: np.ndarray, delta: float, *, keep: bool) -> GramFactor | None:
        """LDL^T of A diag(weight) A^T + delta I, or None if its backward error is too large.

        keep=False refactors one shared solver in place (valid until the next transient factor: a
        Newton step uses it once); keep=True builds its own, for factors kept for the backward pass.
        """
        upper = self.matrix(weight, delta)
        try:
            if keep or self.work is None:
                solver = self.qdldl.Solver(upper, upper=True)
                if not keep:
                    self.work = solver
            else:
                solver = self.work
                solver.update(upper, upper=True)
        except (RuntimeError, ValueError):  # "not quasi-definite": a zero pivot
            if not keep:
                self.work = None
            return None
        factor = GramFactor(solver, upper)
        if not factor.accurate(self.probe):
            if not keep:
                self.work = None  # its in-place update may have left it stale
            return None
        return factor


class GramFactor:
    """A QDLDL factor with splu's .solve interface (1-D or 2-D right-hand sides)."""

    def __init__(self, solver, upper: sp.csc_matrix):
        self.solver = solver
        self.upper = upper

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        rhs = np.asarray(rhs, dtype=np.float64)
        if rhs.ndim == 1:
            return self.solver.solve(rhs)
        return np.stack([self.solver.solve(np.ascontiguousarray(col)) for col in rhs.T], axis=1)

    def accurate(self, rhs: np.ndarray) -> bool:
        """Backward-error test on one solve. It also catches a stale factor: after an in-place update
        that meets a zero pivot, QDLDL raises nothing and keeps solving with the previous values."""
        from methodkit.tools.casper.kernels import symmetric_upper_matvec

        x = self.solver.solve(rhs)
        if not np.all(np.isfinite(x)):
            return False
        U = self.upper
        Mx = symmetric_upper_matvec(U.indptr, U.indices, U.data, x)
        scale = np.max(np.abs(U.data), initial=0.0) * np.max(np.abs(x)) + np.max(np.abs(rhs))
        return bool(np.max(np.abs(Mx - rhs)) <= BACKWARD_ERROR * scale)
