"""clapping --device: the GPU code path (buffers and fused kernels on the device, payloads to the host)
run with NumPy and the RawKernels' NumPy mirrors ('mirror') gives the CPU path's numbers bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from methodkit.core.errors import UsageError
from methodkit.tools.clapping import device, pipeline, tasks

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def digits():
    return tasks.digits_data(0)


CASES = [
    ("clapping-fu", "topk:0.05", {}),  # device top-k kernel, exact round start
    ("clapping-fc", "quant:2", {"microbatches": 2}),  # device quantise kernel + decode kernel
    ("aqsgd", "topk:0.1", {"aqsgd_warm": "full"}),  # per-sample buffers on the device
    ("ef-step", "randk:0.1", {}),  # no device kernel: host round trip
    ("naive", "quant:4:nearest", {}),
]


@pytest.mark.parametrize("algo, spec, extra", CASES, ids=[c[0] for c in CASES])
def test_mirror_device_path_equals_cpu(digits, algo, spec, extra):
    kw = dict(task="digits", stages=3, algo=algo, compressor=spec, reuse=3, steps=9, lr=0.3, **extra)
    cpu = pipeline.simulate(pipeline.RunConfig(**kw), digits)
    mirror = pipeline.simulate(pipeline.RunConfig(**kw, device="mirror"), digits)
    assert mirror.train_loss == cpu.train_loss
    assert mirror.val_loss == cpu.val_loss
    assert mirror.comm == cpu.comm and mirror.buffer_bytes == cpu.buffer_bytes


def test_device_compressors_are_chosen_by_kind():
    from methodkit.core import compress

    ops = device.ops_for("mirror")
    assert isinstance(device.on_device(compress.parse("topk:0.1", 50), ops), device.DeviceTopK)
    assert isinstance(device.on_device(compress.parse("quant:2", 50), ops), device.DeviceQuant)
    assert isinstance(device.on_device(compress.parse("lowrank:2", 50), ops), device.HostRoundTrip)
    plain = compress.parse("topk:0.1", 50)
    assert device.on_device(plain, device.ops_for("cpu")) is plain  # the CPU path is untouched
    x = np.random.default_rng(0).standard_normal((4, 50)).astype(np.float32)
    m_dev, m_cpu = np.zeros_like(x), np.zeros_like(x)
    payload = device.on_device(compress.parse("topk:0.1", 50), ops).delta_update(x, m_dev)
    reference = plain.delta_update(x, m_cpu)
    assert payload["idx"].dtype == reference["idx"].dtype  # same wire format, same bytes
    np.testing.assert_array_equal(payload["val"], reference["val"])
    np.testing.assert_array_equal(m_dev, m_cpu)


def test_unknown_device_is_a_usage_error(digits):
    with pytest.raises(UsageError, match="--device"):
        pipeline.RunConfig(device="tpu").validate(len(digits.x_train))


@pytest.mark.gpu
def test_cuda_run_equals_cpu(digits):
    cupy = pytest.importorskip("cupy")
    if cupy.cuda.runtime.getDeviceCount() == 0:
        pytest.skip("no CUDA device")
    kw = dict(task="digits", stages=3, algo="clapping-fu", compressor="topk:0.05", reuse=3, steps=9, lr=0.3)
    cpu = pipeline.simulate(pipeline.RunConfig(**kw), digits)
    cuda = pipeline.simulate(pipeline.RunConfig(**kw, device="cuda"), digits)
    assert cuda.comm == cpu.comm  # identical payload sizes; losses agree to float tolerance (cuBLAS)
    assert abs(cuda.val_loss - cpu.val_loss) < 1e-3
