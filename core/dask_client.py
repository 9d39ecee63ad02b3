"""One Dask client for a command's --scheduler: `local` (a LocalCluster built here) or a scheduler address.

The sweeps of several tools run independent tasks on Dask the same way; only the local cluster's shape
differs (threads in this process, or worker processes), so each passes its own LocalCluster arguments.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from methodkit.core.errors import UsageError, require


@contextlib.contextmanager
def dask_client(scheduler: str, extra: str, **local_cluster) -> Iterator:
    """Yield (distributed module, client) for --scheduler `scheduler`; close the client (and a local
    cluster) after. `extra` names the pip extra that provides `distributed`; an address that cannot be
    reached within 10 s is a usage error."""
    distributed = require("distributed", extra)
    cluster = None
    if scheduler == "local":
        cluster = distributed.LocalCluster(**local_cluster)
        client = distributed.Client(cluster)
    else:
        try:
            client = distributed.Client(scheduler, timeout="10s")
        except OSError as exc:
            raise UsageError(f"--scheduler {scheduler}: cannot connect ({exc})") from None
    try:
        yield distributed, client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
