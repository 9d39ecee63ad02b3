"""pls tests: one BLAS/Numba thread (small batched GEMMs only lose from threads on a shared machine)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import numba
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield
