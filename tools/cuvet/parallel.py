"""How many threads a CUVET fit gets when -j is not given (imported before Numba is, to size its pool)."""

from __future__ import annotations

CHUNK_ROWS = 65536  # rows per thread of the node histogram (kernels._node_histogram): fewer, one thread


def default_threads(n_rows: int, honest: bool = True) -> int:
    """Threads for `fit` without -j: all cores (0) only when the tree is grown on enough rows for the
    node histogram to split into two or more chunks of CHUNK_ROWS.

    Below that the only parallel loops are the split searches over a few dozen features, too short to
    pay for waking a thread pool at every node: all cores were 1.07-1.13x slower than -j 1 in wall time
    on 20,000 rows (bench/threads). The count must be applied before Numba is imported, since Numba
    sizes its pool once, on import (core.backend.set_threads).
    """
    grown = n_rows // 2 if honest else n_rows
    return 0 if grown >= 2 * CHUNK_ROWS else 1
