"""One entry point to the particle-filter kernel: builds pf-beta's inverse-CDF tables, allocates outputs."""

from __future__ import annotations

import numpy as np

from methodkit.tools.cbf import models


def run_particles(
    model: str, outcome, valid, matrix, particles: int, seeds, m0: float, w0: float, signals: bool, device: str = "cpu"
):
    """Per-run outputs [S, R, B, T] (pred_mean, vol_mean, sto_mean, ambiguity) and collapses [S, R] of
    `model` ("pf-beta" or "pf-hpl") with natural parameters `matrix` [S, 4] and per-run seeds [S, R].
    device "cpu": the Numba kernel; "cuda": the whole-array filter on CuPy (pf_array; same model, its own
    random stream seeded from `seeds`)."""
    from methodkit.tools.cbf import betatable, kernels

    S, B, T = outcome.shape
    R = seeds.shape[1]
    params = models.kernel_params(model, np.asarray(matrix, float))
    if device == "cuda":
        from methodkit.core.backend import array_module
        from methodkit.tools.cbf.pf_array import pf_filter_array

        seed = int(np.random.SeedSequence(np.asarray(seeds, np.int64).ravel().tolist()).generate_state(1)[0])
        return pf_filter_array(array_module("cuda"), model, outcome, valid, params, particles, seed, R, m0, w0, signals)
    if model == "pf-beta":
        tables, use = betatable.tables_for(params[:, :2])
        kind = kernels.PF_BETA
    else:
        tables, use = np.zeros((S, 2, 1, 4)), np.zeros((S, 2), dtype=np.int64)
        kind = kernels.PF_HPL
    outs = [np.empty((S, R, B, T)) for _ in range(4)]
    collapses = np.zeros((S, R), dtype=np.int64)
    kernels.pf_filter(
        kind,
        np.ascontiguousarray(outcome, dtype=float),
        np.ascontiguousarray(valid),
        params,
        int(particles),
        np.ascontiguousarray(seeds, dtype=np.int64),
        float(m0),
        float(w0),
        *outs,
        collapses,
        bool(signals),
        tables,
        use,
    )
    return outs, collapses
