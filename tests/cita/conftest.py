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


@pytest.fixture(scope="session")
def sim_files(tmp_path_factory, train_file):
    """A folder with g.npz ('cita-sim fit' of train.jsonl) and s.jsonl (12 synthetic contexts, seed 3),
    made once through the executables and shared by the CLI tests of every module."""
    from tests.conftest import _run

    work = tmp_path_factory.mktemp("cita-cli")
    for argv in (
        ["cita-sim", "fit", train_file, "-o", work / "g.npz"],
        ["cita-sim", "sample", "--graph", work / "g.npz", "-n", "12", "--seed", "3", "-o", work / "s.jsonl"],
    ):
        proc = _run(argv)
        assert proc.returncode == 0, proc.stderr.decode()
    return work


@pytest.fixture(scope="session")
def small_train_file(train_file):
    """The first 12 trajectories of train.jsonl: enough tasks for the CLI's training runs, and faster."""
    path = train_file.parent / "train12.jsonl"
    path.write_text("".join(train_file.read_text().splitlines(keepends=True)[:12]))
    return path
