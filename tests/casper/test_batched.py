"""The batched dense projection (the GPU path) against the CPU projector, run with NumPy as the array module."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.casper.batched import BatchedDenseProjector
from methodkit.tools.casper.builders import compiled
from methodkit.tools.casper.projection import Projector


@pytest.mark.parametrize("kind, size", [("grid", 5), ("sudoku", 4), ("addition", 3)])
def test_batched_dense_projection_equals_the_cpu_projector(kind, size):
    program = compiled(kind, size, False)
    theta = np.random.default_rng(0).normal(size=(5, program.n)) * 0.7 + 0.3
    mu, _ = Projector(program).project(theta)
    newton_mu, states = Projector(program, stall=0).project(theta)  # the same algorithm: Newton alone
    mu_b, states_b = BatchedDenseProjector(program).project(theta)
    np.testing.assert_allclose(mu_b, mu, atol=1e-9)
    np.testing.assert_allclose(mu_b, newton_mu, atol=1e-9)
    assert [s.status for s in states_b] == ["ok"] * 5
    assert [s.iterations for s in states_b] == [s.iterations for s in states]
    assert max(s.residual for s in states_b) <= 1e-10


def test_batched_rows_over_the_step_cap_are_proj_error():
    program = compiled("grid", 5, False)
    theta = np.random.default_rng(1).normal(size=(2, program.n))
    mu, states = BatchedDenseProjector(program, max_iter=1).project(theta)
    capped = [i for i, s in enumerate(states) if s.status == "proj_error"]
    assert capped and np.isnan(mu[capped]).all()


@pytest.mark.gpu
def test_cupy_projection_equals_the_cpu_projector():
    cupy = pytest.importorskip("cupy")
    program = compiled("grid", 12, False)
    theta = np.random.default_rng(2).random((8, program.n))
    mu, _ = Projector(program).project(theta)
    mu_gpu, states = BatchedDenseProjector(program, cupy).project(theta)
    assert all(s.status == "ok" for s in states)
    np.testing.assert_allclose(mu_gpu, mu, atol=1e-8)
