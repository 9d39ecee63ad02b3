"""Where a stage computes and keeps its link buffers: the CPU (NumPy + Numba) or a CUDA GPU (CuPy).

With `--device cuda` a stage's module runs on the GPU, both link ends' references (m, h, ef-step
residuals, AQ-SGD's per-sample buffers) live in GPU memory, and the fused top-k and quantise
RawKernels (gpu_kernels.py) run there: only the compact payload crosses to the host, because gloo
sends CPU tensors. Compressors without a GPU kernel (rand-k, top-k+quant, low-rank) round-trip
through the host with their CPU code.

`mirror` is the same code path with NumPy as the array module and the RawKernels' NumPy mirrors
as kernels, on the CPU: it checks the wiring (payloads, buffer updates, seed streams) without a GPU,
and gives the same bits as `cpu` (a test). CuPy is imported only for `cuda`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from methodkit.core import compress
from methodkit.tools.clapping import gpu_kernels
from methodkit.tools.clapping.config import DEVICES  # noqa: F401  (re-exported)


@dataclass
class Ops:
    """Array module, torch device, transfers and fused kernels of one device."""

    name: str
    xp: object  # numpy or cupy
    torch_device: str
    kernels: object | None  # None: the CPU compressors (Numba kernels) are used as they are

    def from_torch(self, tensor):
        """A detached torch tensor as an array of this device (no copy on the same device)."""
        if self.name == "cuda":
            return self.xp.from_dlpack(tensor.detach())
        return tensor.detach().numpy()

    def to_torch(self, array):
        import torch

        return torch.from_dlpack(array) if self.name == "cuda" else torch.from_numpy(array)

    def to_host(self, array) -> np.ndarray:
        return self.xp.asnumpy(array) if self.name == "cuda" else array

    def to_device(self, array: np.ndarray):
        return self.xp.asarray(array) if self.name == "cuda" else array


def _mirror_kernels():
    """The RawKernels' contracts, computed by their NumPy mirrors (same arithmetic, same bits)."""

    def quant_pack(x, bits, seed, stochastic=True):
        return gpu_kernels.delta_quant_pack_xp(x, np.zeros_like(x), bits, seed, stochastic)

    return SimpleNamespace(
        delta_topk_update=gpu_kernels.delta_topk_update_xp,
        delta_quant_pack=gpu_kernels.delta_quant_pack_xp,
        quant_pack=quant_pack,
        unpack_accumulate=gpu_kernels.unpack_accumulate_xp,
    )


def ops_for(device: str) -> Ops:
    """Ops for 'cpu', 'mirror' or 'cuda' (resolve --device auto first with core.backend)."""
    if device == "cuda":
        import cupy

        return Ops("cuda", cupy, "cuda", gpu_kernels)
    if device == "mirror":
        return Ops("mirror", np, "cpu", _mirror_kernels())
    return Ops("cpu", np, "cpu", None)


# ------------------------------------------------------------ compressors whose state lives on the device
class DeviceIdentity(compress.Compressor):
    name = "identity"

    def __init__(self, inner: compress.Identity, ops: Ops):
        super().__init__(inner.d)
        self.ops = ops

    def encode(self, x):
        return {"x": self.ops.to_host(self.ops.xp.ascontiguousarray(x, dtype=np.float32))}

    def decode(self, payload):
        return self.ops.to_device(payload["x"]).copy()

    def delta_update(self, a, m):
        m[:] = a
        return self.encode(a)


class DeviceTopK(compress.Compressor):
    """Top-k by the device kernel (threshold descent, no sort); values and indices go to the host."""

    name = "topk"

    def __init__(self, inner: compress.TopK, ops: Ops):
        super().__init__(inner.d)
        self.k, self.ops = inner.k, ops

    def delta_update(self, a, m):
        xp = self.ops.xp
        idx, val = self.ops.kernels.delta_topk_update(xp.ascontiguousarray(a, dtype=np.float32), m, self.k)
        return {"idx": self.ops.to_host(idx).astype(compress.index_dtype(self.d)), "val": self.ops.to_host(val)}

    def encode(self, x):
        return self.delta_update(x, self.ops.xp.zeros(x.shape, dtype=np.float32))

    def decode(self, payload):
        xp = self.ops.xp
        idx = self.ops.to_device(payload["idx"].astype(np.int64))
        out = xp.zeros((idx.shape[0], self.d), dtype=np.float32)
        out[xp.arange(idx.shape[0])[:, None], idx] = self.ops.to_device(payload["val"])
        return out


class DeviceQuant(compress.Compressor):
    """b-bit quantisation by the device kernel; `inner` (the CPU compressor) keeps the seed stream."""

    name = "quant"

    def __init__(self, inner: compress.Quant, ops: Ops):
        super().__init__(inner.d)
        self.inner, self.ops = inner, ops

    def delta_update(self, a, m):
        q = self.inner
        a = self.ops.xp.ascontiguousarray(a, dtype=np.float32)
        packed, scale = self.ops.kernels.delta_quant_pack(a, m, q.bits, q._next_seed(), q.stochastic)
        return {"codes": self.ops.to_host(packed), "scale": self.ops.to_host(scale)}

    def encode(self, x):
        q = self.inner
        x = self.ops.xp.ascontiguousarray(x, dtype=np.float32)
        packed, scale = self.ops.kernels.quant_pack(x, q.bits, q._next_seed(), q.stochastic)
        return {"codes": self.ops.to_host(packed), "scale": self.ops.to_host(scale)}

    def decode(self, payload):
        codes, scale = self.ops.to_device(payload["codes"]), self.ops.to_device(payload["scale"])
        out = self.ops.xp.empty((codes.shape[0], self.d), dtype=np.float32)
        self.ops.kernels.unpack_accumulate(codes, scale, self.inner.bits, self.d, out, False)
        return out


class HostRoundTrip(compress.Compressor):
    """A compressor without a device kernel: its CPU code on host copies, results back on the device."""

    def __init__(self, inner: compress.Compressor, ops: Ops):
        super().__init__(inner.d)
        self.inner, self.ops = inner, ops
        self.name = inner.name

    def encode(self, x):
        return self.inner.encode(np.ascontiguousarray(self.ops.to_host(x), dtype=np.float32))

    def decode(self, payload):
        return self.ops.to_device(np.ascontiguousarray(self.inner.decode(payload), dtype=np.float32))

    def delta_update(self, a, m):
        host = np.ascontiguousarray(self.ops.to_host(m))
        payload = self.inner.delta_update(np.ascontiguousarray(self.ops.to_host(a), dtype=np.float32), host)
        m[:] = self.ops.to_device(host)
        return payload


def on_device(comp: compress.Compressor, ops: Ops) -> compress.Compressor:
    """The compressor `comp` with its arithmetic on ops' device (itself on the plain CPU)."""
    if ops.kernels is None:
        return comp
    if type(comp) is compress.Identity:
        return DeviceIdentity(comp, ops)
    if type(comp) is compress.TopK:
        return DeviceTopK(comp, ops)
    if type(comp) is compress.Quant:
        return DeviceQuant(comp, ops)
    return HostRoundTrip(comp, ops)
