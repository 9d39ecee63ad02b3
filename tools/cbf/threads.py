"""Run serial, GIL-free Numba kernels over contiguous ranges of independent jobs, one range per thread.

Each job (a subject, a row, a particle-filter run) is computed alone by the same compiled code, so the
results depend neither on the thread count nor on how the jobs are split, nor on whether Numba compiled
the kernel in this process or loaded it from its cache. (A parallel=True fastmath parfor did depend on the
last: the cached object and a fresh compile were optimised differently; see kernels.cbf_value_adjoint.)
Serial kernels also compile in about a third of a parfor's time.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_POOLS: dict = {}


def thread_count() -> int:
    import numba

    return numba.get_num_threads()  # -j/--threads sets it (core.backend.set_threads)


def over_ranges(n: int, job: Callable[[int, int], None], min_per_thread: int = 1, piece: int | None = None) -> None:
    """Call job(lo, hi) on contiguous ranges covering 0..n, on up to one thread per range, at least
    `min_per_thread` jobs each.

    With `piece`, the ranges are at most `piece` jobs long and the threads take them in turn: a long
    call then reacts to Ctrl-C within one piece (the main thread returns to Python between pieces; on
    an interrupt the pieces not yet started are dropped) instead of finishing every range first.
    """
    threads = max(1, min(thread_count(), n // max(1, min_per_thread)))
    if piece is None:
        edges = np.linspace(0, n, threads + 1).astype(int)
    else:
        # at least 4 pieces per thread too, so that the threads end together (2 pieces of 12 and 4 jobs did not)
        piece = max(1, min(piece, -(-n // (4 * threads))))
        edges = np.unique(np.r_[np.arange(0, n, piece), n])
    ranges = list(zip(edges[:-1].tolist(), edges[1:].tolist()))
    if threads == 1:
        for lo, hi in ranges:
            job(lo, hi)
        return
    from concurrent.futures import ThreadPoolExecutor

    pool = _POOLS.get(threads) or _POOLS.setdefault(threads, ThreadPoolExecutor(threads, "cbf-kernel"))
    futures = [pool.submit(job, lo, hi) for lo, hi in ranges]
    try:
        for done in futures:
            done.result()
    except BaseException:
        for future in futures:
            future.cancel()  # the running pieces end on their own; the process exits after them
        raise


def over_rows(kernel, rowwise: tuple, shared: tuple, outs: tuple, min_per_thread: int = 1) -> None:
    """kernel(*rowwise, *shared, *outs) on slices of rows (axis 0 of every rowwise and output array)."""

    def job(lo, hi):
        kernel(*(a[lo:hi] for a in rowwise), *shared, *(o[lo:hi] for o in outs))

    over_ranges(rowwise[0].shape[0], job, min_per_thread)
