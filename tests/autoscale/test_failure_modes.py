"""Issue #27 section 7 failure modes: faiss missing (NumPy exact search with a warning); a training NaN
(restart from the starting weights once at half the learning rate, then RunFailure)."""

from __future__ import annotations

import json
import os
import shutil
import sys

import numpy as np
import pytest

from methodkit.cli._autoscale_options import NO_FAISS
from methodkit.core.errors import RunFailure
from methodkit.tools.autoscale import planner as P
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


def _tiny():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(24, 6)).astype(np.float32)
    y = rng.integers(P.N_CANDIDATES, size=24)
    data = P.TrainData(x, y, x[:0], y[:0])
    return data, P.PlannerConfig(hidden=8, steps=6, batch_size=8, lr=1e-2)


def _nan_at(monkeypatch, calls):
    """per_sample_loss returns NaN on the given 0-based calls (one call per step here: no synthetic part)."""
    real, seen = P.per_sample_loss, [0]

    def loss(m, x, y):
        out = real(m, x, y)
        seen[0] += 1
        return out * float("nan") if seen[0] - 1 in calls else out

    monkeypatch.setattr(P, "per_sample_loss", loss)


def test_training_nan_once_restarts_from_start_weights_at_half_lr(monkeypatch):
    import torch

    data, cfg = _tiny()
    torch.manual_seed(9)
    start = {k: v.clone() for k, v in P.build(6, cfg).state_dict().items()}  # a warm-start "checkpoint"
    clean, _ = P.train(data, P.PlannerConfig(**{**cfg.__dict__, "lr": cfg.lr / 2}), 1, init_state=start)
    _nan_at(monkeypatch, {3})  # after three updates
    logged = []
    model, _ = P.train(data, cfg, 1, init_state=start, log=logged.append)
    assert len(logged) == 1 and "non-finite loss" in logged[0] and "lr 0.005" in logged[0]
    for k, v in clean.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k


def test_training_nan_twice_raises_run_failure(monkeypatch):
    data, cfg = _tiny()
    _nan_at(monkeypatch, {3, 4 + 2})  # the first attempt's step 4 (4 calls), then the retry's step 3
    logged = []
    with pytest.raises(RunFailure, match="again after restarting") as info:
        P.train(data, cfg, 1, log=logged.append)
    assert len(logged) == 1 and "at step 3" in str(info.value)
