"""The CuPy twin of the rollout kernel: bit-equal to the Numba kernel on a GPU (-m gpu); on the CPU, the
default path and the error of --device cuda without CuPy or a device."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from methodkit.core.backend import cuda_available
from tests.cita.test_kernels import _random_case


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [0, 1])
def test_cuda_kernel_equals_the_numba_kernel(seed):
    pytest.importorskip("cupy")
    if not cuda_available():
        pytest.skip("no CUDA device")
    from methodkit.tools.cita.gpu_kernels import sim_values_cuda
    from methodkit.tools.cita.kernels import sim_values

    args = list(_random_case(np.random.default_rng(seed), C=40, K=5, n=9))
    args[5] = args[5].copy()
    args[5][0, -1] = -1  # a padded slot stays zero
    keys = np.random.default_rng(seed).integers(0, 2**62, size=40).astype(np.uint64)
    cpu = sim_values(*args, 128, np.uint64(7), keys)
    gpu = sim_values_cuda(*args, 128, np.uint64(7), keys)
    np.testing.assert_array_equal(gpu[0], cpu[0])
    np.testing.assert_array_equal(gpu[1], cpu[1])


def test_importing_the_gpu_kernels_does_not_import_cupy():
    code = "import sys, methodkit.tools.cita.gpu_kernels; print('cupy' in sys.modules)"
    proc = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr


@pytest.mark.skipif(cuda_available(), reason="a CUDA device is present")
def test_value_default_is_the_cpu_kernel_and_cuda_without_a_device_exits_1(run_cli, sim_files, tmp_path):
    base = ["cita-sim", "value", sim_files / "s.jsonl", "--graph", sim_files / "g.npz", "-R", "16", "-j", "1"]
    default = run_cli(base)
    cpu = run_cli([*base, "--device", "cpu"])
    assert default.returncode == 0 and cpu.returncode == 0 and default.stdout == cpu.stdout != b""
    out = tmp_path / "v.jsonl"
    proc = run_cli([*base, "--device", "cuda", "-o", out])
    assert proc.returncode == 1 and proc.stdout == b"" and not out.exists()
    err = proc.stderr.decode().strip()
    assert err.startswith("cita-sim: error: --device cuda: no CUDA device found") and len(err.splitlines()) == 1
