"""The array-module (xp) candidate scorer against the Numba one, and how --device picks between them."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core import backend
from methodkit.core.errors import RunFailure
from methodkit.core.sim.highway import score as pdm
from methodkit.tools.craft import finetune, proxy


def _assert_same(ours, want, tol=1e-12):
    for name in pdm.METRICS:
        a, b = getattr(ours, name), getattr(want, name)
        assert a.shape == b.shape and np.abs(a - b).max() <= tol, name


@pytest.mark.parametrize("seed", [0, 1])
def test_xp_scorer_with_numpy_equals_numba_on_random_scenes(seed):
    x = pdm.random_inputs(seed, n_scenes=12, n_plans=8, n_agents=10, n_states=21, dt=0.2)
    want = pdm.score_prepared(x)
    ours = pdm.score_plans_ref(x, np)
    _assert_same(ours, want)
    assert 0 < want.nc.mean() < 1 and 0 < want.comfort.mean() < 1 and 0 < want.ttc.mean() < 1  # all rules in play


def _spread(d, n: int):
    """n decisions spread over the batch (the xp scorer on NumPy is the slow one: keep the test short)."""
    import dataclasses

    rows = np.unique(np.linspace(0, len(d) - 1, n).astype(int))
    return dataclasses.replace(d, **{
        f.name: getattr(d, f.name)[rows] for f in dataclasses.fields(d) if isinstance(getattr(d, f.name), np.ndarray)
    }, family=[d.family[i] for i in rows] if d.family else [])  # fmt: skip


def test_xp_proxy_and_realised_scores_equal_numba_on_decisions(batch):
    d = _spread(batch[2], 120)
    s, sub, gmax = proxy.group_scores(d, "cv")
    s_xp, sub_xp, gmax_xp = proxy.group_scores(d, "cv", np)
    assert np.abs(s - s_xp).max() <= 1e-12 and np.abs(gmax - gmax_xp).max() <= 1e-12
    _assert_same(sub_xp, sub)
    assert (sub.nc < 1).any() and (sub.ttc == 0).any() and (sub.comfort == 0).any()
    r, _ = proxy.realised_scores(d, gmax)
    r_xp, _ = proxy.realised_scores(d, gmax, np)
    assert np.abs(r - r_xp).max() <= 1e-12


def test_device_selection_falls_back_as_core_backend_says(monkeypatch):
    monkeypatch.setattr(backend, "cuda_available", lambda: False)
    assert backend.resolve_device("auto") == "cpu"
    assert finetune.scorer_module(backend.resolve_device("auto")) is None  # the Numba kernel
    assert finetune.scorer_module("cpu") is None
    with pytest.raises(RunFailure, match="no CUDA device"):
        backend.resolve_device("cuda")
    monkeypatch.setattr(backend, "cuda_available", lambda: True)
    assert backend.resolve_device("auto") == "cuda"


@pytest.mark.skipif(not backend.cuda_available(), reason="needs CuPy and a CUDA device")
def test_cupy_scorer_equals_numba():
    x = pdm.random_inputs(0, n_scenes=12, n_plans=8, n_agents=10, n_states=21, dt=0.2)
    assert finetune.scorer_module("cuda").__name__ == "cupy"
    _assert_same(pdm.score_plans_ref(x, "cupy"), pdm.score_prepared(x), tol=1e-9)
