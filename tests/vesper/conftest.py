"""vesper tests: one Numba thread; a small benchmark made once per session."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import numba

    numba.set_num_threads(1)
    yield


@pytest.fixture(scope="session")
def small_bench(tmp_path_factory):
    """12 pairs (4 per factor), PNG frames, recognition clips for about 20% of pairs."""
    from methodkit.tools.vesper import generate as g
    from methodkit.tools.vesper import taxonomy

    folder = tmp_path_factory.mktemp("vesper") / "bench"
    result = g.generate(g.GenerateConfig(pairs=12, seed=3, video=False, recognition_frac=0.3), str(folder), taxonomy.load())
    return folder, result
