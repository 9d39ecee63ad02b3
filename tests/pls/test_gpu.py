"""The CuPy twins on a CUDA device agree with the Numba path (skipped without CuPy and a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def test_cuda_split_statistics_match_cpu():
    from methodkit.core.backend import cuda_available

    if not cuda_available():
        pytest.skip("no CuPy or no CUDA device")
    from methodkit.tools.pls import batch

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 30))
    Y = rng.normal(size=(80, 64)) + X[:, :1]
    tr, te = np.arange(40), np.arange(40, 80)
    cpu = batch.operations("cpu")
    gpu = batch.operations("cuda")
    a = batch.split_corr_batch(batch.standardize_split(X, tr, te), Y[tr], Y[te], 3, batch.pls1_weights, cpu)
    b = batch.split_corr_batch(
        batch.standardize_split(X, tr, te, gpu.xp), gpu.xp.asarray(Y[tr]), gpu.xp.asarray(Y[te]), 3,
        batch.pls1_weights, gpu,
    )  # fmt: skip
    np.testing.assert_allclose(a.z, b.z, atol=1e-9)
