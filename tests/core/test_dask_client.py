"""core.dask_client: a local cluster built and closed around the block, an unreachable address refused."""

from __future__ import annotations

import pytest

from methodkit.core.dask_client import dask_client
from methodkit.core.errors import UsageError

pytest.importorskip("distributed")

LOCAL = {"processes": False, "n_workers": 1, "threads_per_worker": 1, "dashboard_address": None}


def test_local_cluster_runs_tasks_and_is_closed_after():
    with dask_client("local", "pls", **LOCAL) as (distributed, client):
        futures = [client.submit(pow, i, 2, pure=False) for i in range(4)]
        assert sorted(f.result() for f in distributed.as_completed(futures)) == [0, 1, 4, 9]
    assert client.status == "closed"


def test_closed_after_an_error_inside_the_block():
    with pytest.raises(ZeroDivisionError):
        with dask_client("local", "pls", **LOCAL) as (_, client):
            client.submit(lambda: 1 / 0).result()
    assert client.status == "closed"


def test_unreachable_scheduler_is_a_usage_error():
    with pytest.raises(UsageError, match="--scheduler tcp://127.0.0.1:9: cannot connect"):
        with dask_client("tcp://127.0.0.1:9", "pls"):
            pass
