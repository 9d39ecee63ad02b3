"""The array-module (CuPy) twin of the per-stage aggregation, run with NumPy on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.backend import cuda_available
from methodkit.tools.concord import aggregate_xp, kernels, search
from methodkit.tools.concord.search import plan

PROG = "concord-plan"


def _instance(seed, size=400, units=42):
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(0, s, (size, units)) for s in (0.02, 1e8, 1e8, 1.0, 1e-3)]
    p2p = rng.uniform(0, 1e-3, size)
    pp = rng.choice([1, 2, 4, 8], size).astype(np.int64)
    vpp = rng.choice([1, 2, 4], size).astype(np.int64)
    micro = rng.choice([2, 8, 64], size).astype(np.int64)
    bounds = np.zeros((size, int((pp * vpp).max()) + 1), dtype=np.int64)
    limit = np.full(size, np.inf)
    # searched (uneven) partitions, not only the uniform split
    kernels.partition_min_bottleneck(arrays[0], arrays[1], arrays[2], p2p, pp, vpp, micro, limit, bounds, 100, 1e-9)
    return arrays, p2p, pp, vpp, micro, bounds


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numpy_twin_gives_the_kernels_bits(seed):
    arrays, p2p, pp, vpp, micro, bounds = _instance(seed)
    n_stages = int(pp.max())
    ref = [np.zeros((len(pp), n_stages)) for _ in range(4)]
    kernels.stage_aggregate(*arrays, p2p, pp, vpp, micro, bounds, *ref)
    ours = aggregate_xp.stage_aggregate(np, *arrays, p2p, pp, vpp, micro, bounds, n_stages)
    for a, b in zip(ref, ours):
        assert np.array_equal(a, b)
    assert (ref[0] > 0).any() and (ref[1] > 0).any()


def test_inflight_matches_the_kernel():
    pp = np.array([1, 4, 4, 8], dtype=np.int64)
    vpp = np.array([1, 1, 2, 4], dtype=np.int64)
    micro = np.array([3, 2, 16, 64], dtype=np.int64)
    got = aggregate_xp.inflight(np, pp, vpp, micro, 32)
    for i in range(4):
        for c in range(int(pp[i] * vpp[i])):
            assert got[i, c] == kernels.inflight.py_func(c, pp[i], vpp[i], micro[i])


def test_plan_on_the_array_module_path_equals_the_cpu_plan(small, monkeypatch):
    """device='cuda' runs the array-module path; with NumPy standing in for CuPy the plan is identical."""
    model, cluster, space = small()
    cpu = plan(model, cluster, space, mode="cold", top_k=5).to_dict()
    monkeypatch.setattr(search, "array_module", lambda device: np)
    xp = plan(model, cluster, space, mode="cold", top_k=5, device="cuda").to_dict()
    assert xp == cpu


@pytest.mark.gpu
@pytest.mark.skipif(not cuda_available(), reason="needs CuPy and a CUDA device")
def test_cupy_agrees_with_the_kernel():
    import cupy

    arrays, p2p, pp, vpp, micro, bounds = _instance(3, size=2000, units=98)
    n_stages = int(pp.max())
    ref = [np.zeros((len(pp), n_stages)) for _ in range(4)]
    kernels.stage_aggregate(*arrays, p2p, pp, vpp, micro, bounds, *ref)
    moved = [cupy.asarray(a) for a in (*arrays, p2p, pp, vpp, micro, bounds)]
    ours = aggregate_xp.stage_aggregate(cupy, *moved, n_stages)
    for a, b in zip(ref, ours):
        np.testing.assert_allclose(cupy.asnumpy(b), a, rtol=1e-12, atol=0)


@pytest.mark.skipif(cuda_available(), reason="checks the no-GPU message")
def test_device_cuda_without_a_gpu_is_a_one_line_failure(run_cli, one_line_error, tmp_path):
    import json

    from .conftest import SMALL_CLUSTER, SMALL_MODEL

    (tmp_path / "m.json").write_text(json.dumps(SMALL_MODEL))
    (tmp_path / "c.json").write_text(json.dumps(SMALL_CLUSTER))
    proc = run_cli([PROG, "plan", "m.json", "c.json", "--device", "cuda"], cwd=tmp_path)
    one_line_error(proc, PROG, "--device cuda", code=1)
