"""autoscale tests: one thread, and one small pools folder built once per session through the library."""

from __future__ import annotations

import numpy as np
import pytest

SMALL = {"seed": 3, "real": 60, "synth": 300, "val": 40, "test": 40}


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import numba
    import torch
    from threadpoolctl import threadpool_limits

    numba.set_num_threads(1)
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="session")
def small_pools(tmp_path_factory):
    """(folder, arrays, metas) of a small pools folder (60 real, 300 synthetic, 40 val, 40 test)."""
    import pandas as pd

    from methodkit.tools.autoscale import data
    from methodkit.tools.autoscale import pools as PL

    folder = tmp_path_factory.mktemp("pools")
    spec = PL.parse_spec(SMALL)
    rows = []
    for pool in PL.POOLS:
        arrays, meta, r = PL.build_pool(pool, spec)
        PL.write_pool(folder / f"{pool}.npz", arrays, meta)
        rows += r
    pd.DataFrame(rows).to_csv(folder / "scenes.csv", index=False)
    arrays, metas = data.read_folder(folder)
    return folder, arrays, metas


@pytest.fixture(scope="session")
def embedded(small_pools):
    """The small folder with a 1-epoch Graph-RAE's emb.npy written beside it."""
    from methodkit.tools.autoscale import embedding, graphrae

    folder, arrays, metas = small_pools
    summary, model, emb = embedding.run(arrays, metas, graphrae.RAEConfig(epochs=1, batch_size=128), 0, clusters=8)
    np.save(folder / "emb.npy", emb)
    graphrae.save(folder / "graphrae.safetensors", model, graphrae.RAEConfig(epochs=1, batch_size=128), "test")
    return folder, arrays, metas, emb, summary
