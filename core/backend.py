"""Array backends: NumPy + Numba on the CPU, CuPy on CUDA (imported lazily).

The NumPy/Numba path is the reference; a CuPy twin must agree with it.
"""

from __future__ import annotations

import functools
import os

from methodkit.core.errors import RunFailure, UsageError

DEVICES = ("auto", "cpu", "cuda")


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        import cupy
    except Exception:
        return False
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def resolve_device(device: str) -> str:
    """Map --device auto|cpu|cuda to 'cpu' or 'cuda'; cuda without a GPU is a failure (exit 1)."""
    if device not in DEVICES:
        raise UsageError(f"--device must be one of {', '.join(DEVICES)}, not {device!r}")
    if device == "cpu":
        return "cpu"
    if device == "cuda":
        if not cuda_available():
            raise RunFailure(
                "--device cuda: no CUDA device found (or CuPy is missing: pip install 'methodkit[gpu]'); "
                "use --device cpu"
            )
        return "cuda"
    return "cuda" if cuda_available() else "cpu"


def array_module(device: str):
    """numpy for 'cpu', cupy for 'cuda' (device as returned by resolve_device)."""
    if device == "cuda":
        import cupy

        return cupy
    import numpy

    return numpy


def to_numpy(array):
    """Bring a NumPy or CuPy array to host memory."""
    get = getattr(array, "get", None)
    return get() if callable(get) else array


def set_threads(n: int | None) -> int:
    """Apply -j/--threads to Numba and torch (when imported); return the count in force."""
    import sys

    if n is None or n <= 0:
        n = os.cpu_count() or 1
    # Modules not imported yet read these variables when they are; once Numba has started its
    # threads the variable must not change (it refuses), so only set_num_threads applies then.
    if "numba" not in sys.modules:
        os.environ.setdefault("NUMBA_NUM_THREADS", str(n))
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    numba = sys.modules.get("numba")
    if numba is not None:
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
    return n
