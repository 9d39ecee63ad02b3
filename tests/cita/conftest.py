"""cita tests: one Numba/torch thread; a small BFCL train/test set built once per session."""

from __future__ import annotations

import pytest

pytest.importorskip("bfcl_eval")


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import numba
    import torch

    numba.set_num_threads(1)
    torch.set_num_threads(1)
    yield


@pytest.fixture(scope="session")
def bfcl_tasks():
    """(train, test) trajectories of the first 60 multi_turn_base tasks, split by the seeded hash."""
    from methodkit.tools.cita import api

    return api.eval_tasks("multi_turn_base", 0, 0.4, 60)


@pytest.fixture(scope="session")
def graph(bfcl_tasks):
    from methodkit.tools.cita import graph as tg

    return tg.fit(bfcl_tasks[0])


@pytest.fixture(scope="session")
def train_file(tmp_path_factory, bfcl_tasks):
    from methodkit.tools.cita.records import dumps_jsonl

    path = tmp_path_factory.mktemp("cita") / "train.jsonl"
    path.write_text(dumps_jsonl(bfcl_tasks[0]))
    return path
