"""pools --synthetic-backend highway-env: parity with the native backend on simple scenes, and exit 2 without it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import assert_one_line_error


def test_highway_env_backend_matches_native_on_free_cruising(monkeypatch):
    pytest.importorskip("highway_env")
    from methodkit.core.sim.highway import highway_env_backend as hwb
    from methodkit.tools.autoscale import pools as PL

    calls = []
    real_futures = hwb.futures
    monkeypatch.setattr(hwb, "futures", lambda *a, **k: calls.append(1) or real_futures(*a, **k))
    spec = PL.parse_spec({"seed": 1, "synth": 20, "synth_mix": {"cruise": 0.5, "empty": 0.5}})
    inits = PL.pool_inits("synth", spec)[0][:3] + PL.pool_inits("synth", spec)[0][-2:]  # cruising, empty road
    a = PL._chunk_arrays(inits, PL.N_LANES, PL.SLOTS, False)
    b = PL._chunk_arrays(inits, PL.N_LANES, PL.SLOTS, False, backend="highway-env")
    assert len(calls) == 5
    for key in ("ego", "agents", "agent_mask", "lanes", "expert_index", "expert_traj", "future_mask"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    # the same vehicle models: the traffic's 4 s futures agree to rounding in simple free-flow scenes
    m = a["future_mask"]
    np.testing.assert_allclose(b["futures"][m], a["futures"][m], atol=1e-6)
    assert (a["agent_mask"].sum(1) > 3).sum() >= 3  # the cruising scenes have traffic to compare
    np.testing.assert_allclose(PL.candidate_scores(b), PL.candidate_scores(a), atol=1e-9)


def test_missing_highway_env_exits_2_with_the_pip_command(run_cli, tmp_path):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "highway_env.py").write_text("raise ImportError('not installed (test shim)')\n")
    import os

    env = {"PYTHONPATH": f"{shim}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = run_cli(["autoscale-mix", "pools", "-o", str(tmp_path / "p"), "--synthetic-backend", "highway-env"], env=env)
    assert_one_line_error(proc, "autoscale-mix", "pip install 'methodkit[autoscale]'")
    assert not (tmp_path / "p").exists()
