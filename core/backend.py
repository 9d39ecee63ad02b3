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
    """Apply -j/--threads to Numba and torch (when imported), one thread to BLAS; return the count in force.

    An explicit count (n > 0) wins over the NUMBA_NUM_THREADS / OMP_NUM_THREADS a user exported, as a flag
    wins over the environment; 0 or None means "all cores" and then an exported cap is respected.
    """
    import sys

    explicit = n is not None and n > 0
    if not explicit:
        n = os.cpu_count() or 1
    # Numba sizes its thread pool from NUMBA_NUM_THREADS when it is imported and never grows it, so an
    # explicit n must fit in the pool before that; set_num_threads then chooses n within the pool.
    if "numba" not in sys.modules:
        pool = os.environ.get("NUMBA_NUM_THREADS", "")
        if not pool.isdigit() or int(pool) < 1 or (explicit and int(pool) < n):
            os.environ["NUMBA_NUM_THREADS"] = str(n)
    if explicit:
        os.environ["OMP_NUM_THREADS"] = str(n)
    else:
        os.environ.setdefault("OMP_NUM_THREADS", str(n))
    numba = sys.modules.get("numba")
    if numba is not None:
        n = min(n, numba.config.NUMBA_NUM_THREADS)
        numba.set_num_threads(n)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
    from methodkit.core.threads import hold_blas_to_one_thread

    hold_blas_to_one_thread()  # the cores belong to Numba and torch: never a threaded BLAS on top of them
    return n
