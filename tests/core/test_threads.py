"""core.threads: wherever -j is applied, NumPy's BLAS runs one thread (never a pool on top of Numba's/torch's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BLAS_VARS = (
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "NUMBA_THREADING_LAYER",
)


def _run(code: str) -> list:
    env = {k: v for k, v in os.environ.items() if k not in BLAS_VARS}
    proc = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


needs_two_cores = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: BLAS has one thread anyway")


@needs_two_cores
def test_set_threads_holds_an_already_loaded_blas_to_one_thread():
    before, after = _run(
        "import json, numpy\n"
        "from methodkit.core.threads import blas_threads\n"
        "from methodkit.core.backend import set_threads\n"
        "before = blas_threads(); set_threads(0)\n"
        "print(json.dumps([before, blas_threads()]))"
    )
    assert max(before) > 1  # the BLAS starts with a pool, so the test can see the hold
    assert after == [1] * len(after)


@needs_two_cores
def test_set_threads_before_numpy_loads_gives_it_one_thread():
    threads = _run(
        "import json\n"
        "from methodkit.core.backend import set_threads\n"
        "set_threads(2)\n"
        "import numpy\n"
        "from methodkit.core.threads import blas_threads\n"
        "print(json.dumps(blas_threads()))"
    )
    assert threads and threads == [1] * len(threads)


@needs_two_cores
def test_single_blas_restores_the_limits_after_the_block():
    inside, after = _run(
        "import json, numpy\n"
        "from methodkit.core.threads import blas_threads, single_blas\n"
        "with single_blas():\n"
        "    inside = blas_threads()\n"
        "print(json.dumps([inside, blas_threads()]))"
    )
    assert inside == [1] * len(inside) and max(after) > 1


@needs_two_cores
def test_pls_test_runs_its_permutations_with_one_blas_thread(tmp_path):
    # pls-test used to raise BLAS to -j threads around its prange kernels (28-66x the CPU time of -j 1).
    data = tmp_path / "x.csv"
    subprocess.run(
        [Path(sys.executable).parent / "pls-test", "sim", "-n", "40", "-p", "8", "-o", str(data)],
        check=True,
        capture_output=True,
    )
    seen = _run(
        "import json, sys\n"
        "from methodkit.tools.pls import api\n"
        "from methodkit.core.threads import blas_threads\n"
        "seen = []\n"
        "real = api.run\n"
        "api.run = lambda *a, **k: (seen.append(blas_threads()), real(*a, **k))[1]\n"
        "from methodkit.cli.pls_test import main\n"
        "try:\n"
        f"    main(['test', {str(data)!r}, '-k', '1', '--method', 'nb', '-j', '2', '-o', {str(tmp_path / 'r.json')!r}])\n"
        "except SystemExit:\n"
        "    pass\n"
        "import numba\n"
        "print(json.dumps([seen, numba.threading_layer()]))"
    )
    seen, layer = seen
    assert seen and all(t == [1] * len(t) for t in seen)
    assert layer == "workqueue"  # its idle workers sleep; OpenMP's spun between the small kernels
