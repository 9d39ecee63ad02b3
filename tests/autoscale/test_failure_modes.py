"""Issue #27 section 7 failure modes: faiss missing (NumPy exact search with a warning)."""

from __future__ import annotations

import json
import os
import shutil
import sys

import numpy as np
import pytest

from methodkit.cli._autoscale_options import NO_FAISS
from methodkit.tools.autoscale import search

PROG = "autoscale-mix"


def test_topk_falls_back_to_numpy_when_faiss_import_fails(monkeypatch):
    if not search.have_faiss():
        pytest.skip("faiss-cpu not installed: nothing to compare the fallback with")
    rng = np.random.default_rng(5)
    base, q = rng.normal(size=(200, 8)), rng.normal(size=(9, 8))
    s1, i1 = search.topk_ip(base, q, 6)
    monkeypatch.setitem(sys.modules, "faiss", None)  # `import faiss` now raises ImportError
    assert not search.have_faiss()
    s2, i2 = search.topk_ip(base, q, 6)
    assert np.array_equal(i1, i2)
    np.testing.assert_allclose(s1, s2, rtol=1e-5, atol=1e-5)


def test_run_without_faiss_warns_once_and_succeeds(run_cli, embedded, tmp_path):
    folder = tmp_path / "pools"
    shutil.copytree(embedded[0], folder)
    stub = tmp_path / "nofaiss"
    stub.mkdir()
    (stub / "faiss.py").write_text("raise ImportError('faiss blocked by the test')\n")
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(stub), os.environ.get("PYTHONPATH")) if p)}
    args = ["--budget", "30", "--rounds", "1", "--clusters", "4", "--steps", "10", "--batch-size", "16", "-j", "1"]
    proc = run_cli([PROG, "run", str(folder), "-o", str(tmp_path / "r"), *args, "-q"], env=env)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stderr.decode().splitlines() == [f"{PROG}: warning: {NO_FAISS}"]
    assert json.loads(proc.stdout)["method"] == "autoscale"
