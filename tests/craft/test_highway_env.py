"""The highway-env parity backend of `eval`: the same policy in both simulators, and the missing package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from methodkit.core.errors import UsageError

TOOL = str(Path(sys.executable).with_name("craft-finetune"))
# lane changes both ways, speed changes and the emergency stop (its -6 m/s^2 clip) within 12 s
CYCLE = (0, 7, 12, 15, 4, 9, 2, 13, 7, 10, 1, 14)


def _route():
    from methodkit.tools.craft import suites

    route = suites.route_for("cut-in", 0)
    route["params"]["duration"] = 12.0
    return suites.parse([route])


def _cycling_policy(seen: list):
    def policy(sim, running):
        ego, near = sim.observe()
        seen.append(np.concatenate([ego[running[0]], near[running[0]].ravel()]))
        return np.array([CYCLE[(len(seen) - 1) % len(CYCLE)]])

    return policy


def test_plan_policy_drives_the_same_episode_in_both_simulators():
    pytest.importorskip("highway_env")
    from methodkit.core.sim.highway import highway_env_plan, simulate, suite
    from methodkit.core.sim.highway.state import pack
    from methodkit.tools.craft import suites

    (scene,), _ = suites.scenes(_route())
    seen_hw, seen_nb = [], []
    theirs = highway_env_plan.run(scene, _cycling_policy(seen_hw))
    out = simulate.rollout(pack([scene]), _cycling_policy(seen_nb), record=True)
    ours = out.record(0)
    assert list(theirs["choices"]) == [CYCLE[k % len(CYCLE)] for k in range(len(seen_nb))]
    np.testing.assert_allclose(np.array(seen_hw), np.array(seen_nb), atol=1e-9)  # the policy saw the same states
    assert theirs["boxes"].shape == ours["boxes"].shape
    np.testing.assert_allclose(theirs["boxes"][:, 0, :3], ours["boxes"][:, 0, :3], atol=1e-6)
    ours["speeds"] = np.gradient(ours["boxes"][..., :2], simulate.FRAME_S, axis=0)
    ours["events"] = np.array(ours["events"], dtype=np.int64).reshape(-1, 3)
    a, b = suite.exit_route_metrics(theirs), suite.exit_route_metrics(ours)
    assert a.ended_by == b.ended_by
    assert a.ds == pytest.approx(b.ds, abs=1e-6)


def test_demos_and_finetune_refuse_the_highway_env_backend():
    pytest.importorskip("highway_env")
    from methodkit.tools.craft import suites

    suites.check_backend("highway-env", "eval")
    suites.check_backend("numba", "finetune")
    for verb in ("demos", "finetune"):
        with pytest.raises(UsageError, match="parity backend of `craft-finetune eval"):
            suites.check_backend("highway-env", verb)


def test_missing_highway_env_exits_2_with_the_pip_command(tmp_path):
    fake = tmp_path / "site" / "highway_env"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('not installed')\n")
    policy = tmp_path / "p.safetensors"
    policy.write_bytes(b"")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    proc = subprocess.run([TOOL, "eval", str(policy), "--backend", "highway-env"], capture_output=True, text=True,
                          env=env, timeout=300)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "craft-finetune: error: this needs the Python package 'highway_env'; install it with: "
        "pip install 'methodkit[craft]'"
    ]
