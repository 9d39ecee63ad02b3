"""clapping's CuPy kernels: their algorithm mirrored with NumPy (always), the RawKernels on a GPU (-m gpu)."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.kernels import compress as ck
from methodkit.tools.clapping import gpu_kernels as gk


def _rows(kind, rows=6, d=300, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "gauss":
        a = rng.standard_normal((rows, d))
    elif kind == "ties":
        a = rng.integers(-3, 4, (rows, d)).astype(float)
    else:  # heavy tails
        a = rng.standard_cauchy((rows, d))
    m = 0.3 * rng.standard_normal((rows, d))
    return a.astype(np.float32), m.astype(np.float32)


@pytest.mark.parametrize("kind", ["gauss", "ties", "cauchy"])
@pytest.mark.parametrize("k", [1, 15, 299])
def test_bit_descent_topk_equals_the_numba_kernel(kind, k):
    a, m = _rows(kind)
    m_cpu, m_xp = m.copy(), m.copy()
    idx, val = ck.delta_topk_update(a, m_cpu, k)
    idx_xp, val_xp = gk.delta_topk_update_xp(a, m_xp, k)
    np.testing.assert_array_equal(idx_xp, idx)
    np.testing.assert_array_equal(val_xp, val)
    np.testing.assert_array_equal(m_xp, m_cpu)
    # the threshold is the k-th largest magnitude itself
    kth = -np.sort(-np.abs(a - m), axis=1)[:, k - 1]
    np.testing.assert_array_equal(gk.topk_threshold_xp(a, m, k).view(np.float32), kth)


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
@pytest.mark.parametrize("stochastic", [True, False])
def test_quant_mirror_equals_the_numba_kernel(bits, stochastic):
    a, m = _rows("gauss", d=301)  # odd width: a partial last byte
    m_cpu, m_xp = m.copy(), m.copy()
    packed, scale = ck.delta_quant_pack(a, m_cpu, bits, 12345, stochastic)
    packed_xp, scale_xp = gk.delta_quant_pack_xp(a, m_xp, bits, 12345, stochastic)
    np.testing.assert_array_equal(packed_xp, packed)
    np.testing.assert_array_equal(scale_xp, scale)
    np.testing.assert_array_equal(m_xp, m_cpu)
    for accumulate in (False, True):  # the receiver's decode, overwriting and adding
        out, out_xp = m.copy(), m.copy()
        ck.unpack_accumulate(packed, scale, bits, a.shape[1], out, accumulate)
        gk.unpack_accumulate_xp(packed, scale, bits, a.shape[1], out_xp, accumulate)
        np.testing.assert_array_equal(out_xp, out)


def test_importing_the_kernels_does_not_import_cupy():
    import subprocess
    import sys

    code = "import sys, methodkit.tools.clapping.gpu_kernels; print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["gauss", "ties", "cauchy"])
def test_cuda_kernels_equal_numba(kind):
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() == 0:
        pytest.skip("no CUDA device")
    a, m = _rows(kind, rows=64, d=4096)
    for k in (1, 205, 4095):
        m_cpu, m_gpu = m.copy(), cupy.asarray(m)
        idx, val = ck.delta_topk_update(a, m_cpu, k)
        g_idx, g_val = gk.delta_topk_update(cupy.asarray(a), m_gpu, k)
        np.testing.assert_array_equal(cupy.asnumpy(g_idx), idx)
        np.testing.assert_array_equal(cupy.asnumpy(g_val), val)
        np.testing.assert_array_equal(cupy.asnumpy(m_gpu), m_cpu)
    for bits in (1, 2, 4, 8):
        m_cpu, m_gpu = m.copy(), cupy.asarray(m)
        packed, scale = ck.delta_quant_pack(a, m_cpu, bits, 99, True)
        g_packed, g_scale = gk.delta_quant_pack(cupy.asarray(a), m_gpu, bits, 99, True)
        np.testing.assert_array_equal(cupy.asnumpy(g_packed), packed)
        np.testing.assert_array_equal(cupy.asnumpy(g_scale), scale)
        np.testing.assert_array_equal(cupy.asnumpy(m_gpu), m_cpu)
        out = np.zeros_like(a)
        ck.unpack_accumulate(packed, scale, bits, a.shape[1], out, True)
        g_out = cupy.zeros_like(cupy.asarray(a))
        gk.unpack_accumulate(g_packed, g_scale, bits, a.shape[1], g_out, True)
        np.testing.assert_array_equal(cupy.asnumpy(g_out), out)
