"""core.backend.set_threads: -j wins over an exported thread count; -j 0 respects it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, sys
from methodkit.core.backend import set_threads
before = set_threads(int(sys.argv[1]))
import numba
after = set_threads(int(sys.argv[1]))
print(json.dumps([before, after, numba.get_num_threads(), numba.config.NUMBA_NUM_THREADS]))
"""


def _probe(j: int, numba_env: str | None) -> list[int]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS")}
    if numba_env is not None:
        env["NUMBA_NUM_THREADS"] = numba_env
    proc = subprocess.run([sys.executable, "-P", "-c", PROBE, str(j)], env=env, capture_output=True, check=True)
    return json.loads(proc.stdout)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores to tell the counts apart")
def test_explicit_threads_grow_an_exported_numba_pool():
    before, after, in_force, pool = _probe(2, "1")
    assert (before, after, in_force) == (2, 2, 2) and pool >= 2


def test_all_cores_default_keeps_an_exported_cap():
    assert _probe(0, "1") == [os.cpu_count() or 1, 1, 1, 1]


def test_explicit_threads_inside_a_larger_pool():
    before, after, in_force, pool = _probe(1, "2")
    assert (before, after, in_force, pool) == (1, 1, 1, 2)
