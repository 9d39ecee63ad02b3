"""One owner per core: Numba and torch get the -j threads, NumPy's BLAS gets one.

A threaded BLAS called from (or between) Numba-parallel or torch-threaded work puts its own pool on
top of theirs: with OpenBLAS's spinning workers, -j 0 made small batched GEMMs 28-66x slower in CPU
time than -j 1 on a busy two-core machine. So whenever a tool applies -j (core.backend.set_threads),
the BLAS behind NumPy/SciPy is held at one thread for the rest of the process; the tools' parallelism
comes from their own prange loops, thread pools and torch's intra-op pool, which -j sizes.
`single_blas()` does the same for a block of code in library use (no CLI, no set_threads).

Idle OpenMP workers (Numba's default `omp` layer) spin for a while after each parallel region; between
the many small kernels of a tool they took a core from the serial Python work (pls-test 2-6x slower at
-j 0 than -j 1, concord-plan 1.2x). A command that launches its kernels from one thread only takes
Numba's `workqueue` layer instead, whose idle workers sleep (`prefer_workqueue`). OMP_WAIT_POLICY=PASSIVE
is no cure: torch's intra-op pool (libgomp too) then sleeps between its small ops, and chess-wm's
default ran 3x slower than -j 1.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

# Read by OpenBLAS, MKL, BLIS and Accelerate when NumPy loads them; OMP_NUM_THREADS (which torch and
# Numba's OpenMP layer read, and core.backend sets to -j) would otherwise size OpenBLAS's pool too.
BLAS_ENV = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")

_held: list = []  # the process-wide threadpoolctl limit, kept alive (dropping it does not restore)


def hold_blas_to_one_thread() -> None:
    """Hold NumPy's BLAS at one thread for the rest of the process (idempotent).

    Before NumPy is imported the environment does it (the BLAS reads it when it loads); after, threadpoolctl.
    """
    for name in BLAS_ENV:
        os.environ[name] = "1"
    if "numpy" in sys.modules and not _held:
        from threadpoolctl import threadpool_limits

        _held.append(threadpool_limits(limits=1, user_api="blas"))


def prefer_workqueue() -> None:
    """Numba's `workqueue` threading layer for this process, unless the user chose one.

    Only for commands that launch parallel kernels from a single thread: the workqueue layer aborts the
    process when two threads launch kernels at once (Dask threads, a ThreadPoolExecutor). Takes effect if
    no parallel kernel has run yet.
    """
    if os.environ.get("NUMBA_THREADING_LAYER"):
        return
    os.environ["NUMBA_THREADING_LAYER"] = "workqueue"
    numba = sys.modules.get("numba")
    if numba is not None:
        numba.config.THREADING_LAYER = "workqueue"


def blas_threads() -> list[int]:
    """Thread counts of the BLAS libraries loaded now (for tests and --meta)."""
    from threadpoolctl import threadpool_info

    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]


@contextlib.contextmanager
def single_blas() -> Iterator[None]:
    """One BLAS thread inside the block, the previous limits after it (around a Numba/torch parallel region)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def idle_cores(load: float | None = None, cores: int | None = None) -> int:
    """Cores not busy now: usable cores minus the 1-minute load average, at least one (as `make -l`).

    For tools whose results do not depend on the thread count: on a machine that others keep busy, all
    cores made nogil kernels on a thread pool 1.2-1.4x slower than one thread (each thread waits for the
    slowest core), while an idle machine gets every core."""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
    return max(1, min(cores, int(cores - load + 0.5)))
