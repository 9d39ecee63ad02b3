"""Tabulated inverse CDF of Beta(a, 1/2): pf-beta's transition noise drawn by inversion of one uniform.

pf-beta draws eps ~ Beta(eta nu, (1 - eta) nu) with eta = 1 - lambda, nu = 0.5 / lambda, i.e. shape
a = (1 - lambda) / (2 lambda) and second shape 1/2 for every lambda. Rejection samplers (gamma ratios)
cost two to four generator calls and a logarithm per draw; inversion costs one uniform and a cubic.

The quantile function Q(u) is tabulated as piecewise cubic Hermite polynomials with exact slopes
dQ/du = 1 / pdf(Q) (values by scipy's betaincinv), so the error shrinks as the fourth power of the cell
width. Cells are uniform in u (width 1/UNIFORM_CELLS) above u = 2^-6; below it, where Q ~ u^(1/a) bends
hardest, each octave [2^(e-1), 2^e) has OCTAVE_CELLS cells of its own, down to 2^-53 (the smallest
non-zero uniform the generator makes). Near u = 1, 1 - Q is analytic in (1 - u) (1 - Q ~ c (1 - u)^2),
so the uniform cells are accurate there too. The table is accurate for a >= MIN_SHAPE (lambda <= 2/3;
tests measure the error); smaller shapes keep the exact gamma-ratio sampler.
"""

from __future__ import annotations

import numpy as np

UNIFORM_CELLS = 1024  # cells of width 1/1024 on [2^-6, 1]
FIRST_UNIFORM = 16  # cell 16 starts at u = 2^-6
OCTAVE_CELLS = 16  # cells per octave below 2^-6
TOP_EXPONENT = -6  # the octave region is u < 2^TOP_EXPONENT
OCTAVES = 47  # octaves [2^(e-1), 2^e) for e = -6 ... -52
N_CELLS = UNIFORM_CELLS + OCTAVES * OCTAVE_CELLS
MIN_SHAPE = 0.25


def _quantile_and_slope(a: float, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from scipy import special

    q = special.betaincinv(a, 0.5, u)
    with np.errstate(divide="ignore", over="ignore"):
        log_pdf = (a - 1.0) * np.log(q) - 0.5 * np.log1p(-q) - special.betaln(a, 0.5)
        slope = np.where(q >= 1.0, 0.0, np.exp(-log_pdf))
    return q, slope


def _hermite(u: np.ndarray, q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Coefficients [..., cell, 4] of y = c0 + t (c1 + t (c2 + t c3)), t in [0, 1) across each cell, from
    values q and slopes d = dy/du at the cell edges u (cells run along the last axis)."""
    h = np.diff(u, axis=-1)
    q0, q1 = q[..., :-1], q[..., 1:]
    hd0, hd1 = h * d[..., :-1], h * d[..., 1:]
    return np.stack([q0, hd0, 3.0 * (q1 - q0) - 2.0 * hd0 - hd1, 2.0 * (q0 - q1) + hd0 + hd1], axis=-1)


def _cells(u: np.ndarray, q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Q's cubic (columns 0-3) and log Q's cubic (columns 4-7; slope dQ/du / Q) per cell."""
    return np.concatenate([_hermite(u, q, d), _hermite(u, np.log(q), d / q)], axis=-1)


def _edges() -> tuple[np.ndarray, np.ndarray]:
    """Cell edges: the uniform region's [UNIFORM_CELLS - FIRST_UNIFORM + 1] and the octaves' [OCTAVES,
    OCTAVE_CELLS + 1] (octave o spans [2^(e-1), 2^e), e = TOP_EXPONENT - o)."""
    uniform = np.arange(FIRST_UNIFORM, UNIFORM_CELLS + 1) / UNIFORM_CELLS
    e = TOP_EXPONENT - np.arange(OCTAVES)[:, None]
    octaves = 2.0 ** (e - 1.0) * (1.0 + np.arange(OCTAVE_CELLS + 1) / OCTAVE_CELLS)
    return uniform, octaves


_UNIFORM_EDGES, _OCTAVE_EDGES = _edges()


def beta_half_table(a: float) -> np.ndarray:
    """[N_CELLS, 8] cubic coefficients of Beta(a, 1/2)'s quantile Q (columns 0-3) and of log Q (4-7, for the
    filters' log-variance signals): rows 0..1023 the uniform cells (rows below FIRST_UNIFORM unused), then
    OCTAVE_CELLS rows per octave, e = -6 first. Every edge goes through scipy in one call: a filter call
    builds its tables each time, so their cost counts (one call per octave cost 4x as much)."""
    if not a >= MIN_SHAPE:
        raise ValueError(f"Beta shape {a} below the tabulated range (>= {MIN_SHAPE})")
    n_uniform = _UNIFORM_EDGES.size
    q, d = _quantile_and_slope(a, np.concatenate([_UNIFORM_EDGES, _OCTAVE_EDGES.ravel()]))
    table = np.zeros((N_CELLS, 8))
    table[FIRST_UNIFORM:UNIFORM_CELLS] = _cells(_UNIFORM_EDGES, q[:n_uniform], d[:n_uniform])
    shape = _OCTAVE_EDGES.shape
    octaves = _cells(_OCTAVE_EDGES, q[n_uniform:].reshape(shape), d[n_uniform:].reshape(shape))
    table[UNIFORM_CELLS:] = octaves.reshape(OCTAVES * OCTAVE_CELLS, 8)
    return table


def shape_of(lam: float) -> float:
    """pf-beta's first Beta shape eta nu = (1 - lambda) / (2 lambda) (the second is always 1/2)."""
    return (1.0 - lam) * 0.5 / lam


def tables_for(lambdas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tables [n, 2, N_CELLS, 8] for the (lambda_v, lambda_s) rows of `lambdas` [n, 2], and flags [n, 2]:
    1 = drawn from the table, 0 = no draw (lambda = 0, a lesion) or the exact sampler (shape < MIN_SHAPE)."""
    lambdas = np.asarray(lambdas, dtype=float)
    n = lambdas.shape[0]
    use = np.zeros((n, 2), dtype=np.int64)
    for i in range(n):
        for j in range(2):
            lam = lambdas[i, j]
            use[i, j] = lam > 0.0 and shape_of(lam) >= MIN_SHAPE
    tables = np.zeros((n, 2, N_CELLS if use.any() else 1, 8))
    cache: dict[float, np.ndarray] = {}
    for i in range(n):
        for j in range(2):
            if use[i, j]:
                a = shape_of(lambdas[i, j])
                if a not in cache:
                    cache[a] = beta_half_table(a)
                tables[i, j] = cache[a]
    return tables, use
