"""The CuPy twin of the LP on a real GPU (skipped without CuPy and a CUDA device)."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cupy():
    cp = pytest.importorskip("cupy")
    if cp.cuda.runtime.getDeviceCount() < 1:
        pytest.skip("no CUDA device")
    return cp


def test_cupy_lp_matches_numba(cupy):
    from methodkit.tools.cuvet import lp

    rng = np.random.default_rng(0)
    n = 200_000
    c = np.column_stack([np.zeros(n), rng.uniform(0.1, 4, (n, 4))])
    v = np.column_stack([np.zeros(n), np.round(rng.uniform(-0.005, 0.02, (n, 4)), 3)])  # ties on purpose
    for frac in (0.05, 0.3, 0.9):
        budget = frac * c.max(1).sum()
        cpu = lp.solve(v, c, budget)
        gpu = lp.solve(cupy.asarray(v), cupy.asarray(c), budget, xp=cupy)
        assert gpu.value == pytest.approx(cpu.value, rel=1e-9)
        assert gpu.lam == pytest.approx(cpu.lam, rel=1e-12)
        assert np.abs(cupy.asnumpy(gpu.pi) - cpu.pi).max() < 1e-6


def test_bench_on_cuda_equals_cpu(cupy):
    from methodkit.tools.cuvet import compare, synth
    from methodkit.tools.cuvet.data import CostSpec, load_rct

    costs = CostSpec(arm_costs=[0, 1, 2, 3, 4], on_outcome=True)
    tr, truth = synth.synthetic(20_000, 1)
    te, _ = synth.synthetic(20_000, 2, truth)
    split = compare.Split(
        load_rct(tr, "treatment", "conversion", costs), load_rct(te, "treatment", "conversion", costs), te, 0, 0
    )
    methods = ["cuvet-lp", "oracle"]
    cpu = compare.run_split(split, methods, [0.3], truth)
    gpu = compare.run_split(split, methods, [0.3], truth, xp=cupy)
    for a, b in zip(cpu, gpu):
        assert a["true_value"] == pytest.approx(b["true_value"], rel=1e-9)
