"""Interrupted runs: the attack's checkpoint and the sweep's partial rows resume to the same result."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from methodkit.core.errors import RunFailure
from methodkit.tools.gbdt import attack, sweep
from methodkit.tools.gbdt.victim import Victim

from .helpers import problem

BIN = Path(sys.executable).parent
FAST = ["--lgb-params", '{"num_boost_round": 20, "num_leaves": 7}', "--iters", "1", "--q", "1"]


def _victim(seed=0):
    return Victim.from_json('{"num_boost_round": 20, "num_leaves": 7}', threads=1, seed=seed)


class Stop(Exception):
    pass


@pytest.mark.parametrize("search,oracle", [("zo", "retrain"), ("zo", "refit"), ("threshold", "refit")])
def test_attack_resumed_from_a_checkpoint_ends_where_an_uninterrupted_one_does(search, oracle):
    p = problem(300, seed=1)
    # zo + refit: the anchor retrained at iteration 3 on the best point must be rebuilt on resume;
    # threshold: the iterate's model (the anchor of the next probes) must be rebuilt on resume
    cfg = attack.AttackConfig(budget=0.1, eps=1.5, iters=4, q=1, seed=5, oracle=oracle, refit_every=2, search=search)
    whole = attack.run(p, _victim(), cfg)
    states = []

    def interrupt_after_three(state):
        states.append(json.loads(json.dumps(state)))  # what the CLI writes and reads back
        if state["iter"] == 3:
            raise Stop

    with pytest.raises(Stop):
        attack.run(p, _victim(), cfg, checkpoint=interrupt_after_three)
    resumed = attack.run(p, _victim(), cfg, resume=states[-1])
    assert [s["iter"] for s in states] == [0, 1, 2, 3]
    if search == "zo":
        assert (states[-1]["anchor_Z"] is not None) == (oracle == "refit")
    assert resumed.trace == whole.trace
    np.testing.assert_array_equal(resumed.poisoned, whole.poisoned)
    assert resumed.after == whole.after and resumed.fits == whole.fits


def _fail_sixth_fit(monkeypatch):
    """LightGBM fails on the 6th fit: the clean fit, J(x0), then the probes of iteration 1."""
    calls, real_fit = {"n": 0}, Victim.fit

    def failing_fit(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 6:
            raise RunFailure("LightGBM failed: simulated")
        return real_fit(self, *args, **kwargs)

    monkeypatch.setattr(Victim, "fit", failing_fit)


def test_lightgbm_failure_in_the_loop_keeps_the_trace(monkeypatch):
    p = problem(300, seed=1)
    _fail_sixth_fit(monkeypatch)
    with pytest.raises(attack.AttackFailed) as info:
        attack.run(p, _victim(), attack.AttackConfig(budget=0.1, eps=1.5, iters=3, q=2, seed=5))
    assert info.value.trace["error"] == "LightGBM failed: simulated"
    assert [t["iter"] for t in info.value.trace["trace"]] == [0]


def test_a_failed_attack_leaves_its_trace_and_last_state_in_the_checkpoint(monkeypatch, tmp_path):
    from methodkit.tools.gbdt.runs import AttackCheckpoint

    p = problem(300, seed=1)
    cfg = attack.AttackConfig(budget=0.1, eps=1.5, iters=3, q=2, seed=5)
    _fail_sixth_fit(monkeypatch)
    partial = AttackCheckpoint(str(tmp_path / "p.csv"), cfg, _victim(), p, force=False)
    with pytest.raises(attack.AttackFailed):
        partial.run_attack(p, _victim(), cfg, lambda *a: None)
    saved = json.loads(Path(partial.path).read_text())
    assert saved["error"] == "LightGBM failed: simulated"
    assert [t["iter"] for t in saved["trace"]] == [0]
    assert saved["fingerprint"] == partial.last["fingerprint"]


def _sweep(p, done=None, on_row=None, scheduler="sync"):
    cfg = attack.AttackConfig(budget=0.1, iters=1, q=1, seed=0)
    return sweep.run(
        lambda s: p,
        _victim,
        cfg,
        [1.0],
        [0, 1],
        ["random"],
        scheduler=scheduler,
        dask_workers=2,
        done=done,
        on_row=on_row,
    )


def _without_runtime(rows):
    return [{k: v for k, v in row.items() if k != "runtime_s"} for row in rows]


def test_sweep_on_dask_equals_the_serial_sweep_and_resumes():
    pytest.importorskip("distributed")
    p = problem(240, seed=3)
    serial = _sweep(p)
    assert len(serial.rows) == 4
    kept = {}

    def stop_after_three(key, row):
        kept[key] = json.loads(json.dumps(row))
        if len(kept) == 2:
            raise Stop

    with pytest.raises(Stop):
        _sweep(p, on_row=stop_after_three)
    ran = []
    resumed = _sweep(p, done=kept, on_row=lambda key, row: ran.append(key), scheduler="local")
    assert len(ran) == 2 and not set(ran) & set(kept)
    assert _without_runtime(resumed.rows) == _without_runtime(serial.rows)


def _popen(args, cwd):
    return subprocess.Popen([str(BIN / "gbdt-poison"), *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_cli_sweep_interrupted_then_resumed(tmp_path, run_cli, one_line_error):
    args = ["sweep", "--dataset", "synth", *FAST, "--eps-grid", "1,2,4", "--seeds", "0", "--baselines", ""]
    partial = tmp_path / "out.csv.partial.json"
    proc = _popen([*args, "-o", "out.csv"], tmp_path)
    deadline = time.monotonic() + 300
    while not partial.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode == 130, "the sweep ended before it could be interrupted"
    assert not (tmp_path / "out.csv").exists()
    done = json.loads(partial.read_text())["rows"]
    assert 1 <= len(done) < 3
    again = run_cli(["gbdt-poison", *args, "-o", "out.csv"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"resuming from out.csv.partial.json: {len(done)} run(s) already done" in again.stderr.decode()
    assert not partial.exists()
    fresh = run_cli(["gbdt-poison", *args, "-o", "fresh.csv"], cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    a, b = (pd.read_csv(tmp_path / name).drop(columns="runtime_s") for name in ("out.csv", "fresh.csv"))
    pd.testing.assert_frame_equal(a, b)
    # a checkpoint of other settings is refused, and left as it was
    partial.write_text(json.dumps({"fingerprint": "other", "rows": {}}))
    partial.rename(tmp_path / "new.csv.partial.json")
    refused = run_cli(["gbdt-poison", *args, "-o", "new.csv"], cwd=tmp_path)
    one_line_error(refused, "gbdt-poison", "new.csv.partial.json: checkpoint of a different sweep")
    assert json.loads((tmp_path / "new.csv.partial.json").read_text())["fingerprint"] == "other"


@pytest.mark.slow
def test_cli_attack_resumes_from_its_checkpoint(tmp_path, run_cli):
    args = ["attack", "--dataset", "synth", "--lgb-params", '{"num_boost_round": 20}', "--iters", "3", "--q", "1"]
    whole = run_cli(["gbdt-poison", *args, "-o", "whole.csv"], cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    # interrupt by hand: a checkpoint after iteration 1, as the run writes it
    partial = tmp_path / "cut.csv.partial.json"
    proc = _popen([*args, "-o", "cut.csv"], tmp_path)
    deadline = time.monotonic() + 300
    state = None
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            state = json.loads(partial.read_text())
        except (OSError, ValueError):
            state = None
        if state and state["state"]["iter"] >= 1:
            proc.send_signal(signal.SIGINT)
            break
        time.sleep(0.01)
    proc.communicate(timeout=120)
    assert proc.returncode == 130, "the attack ended before it could be interrupted"
    cut_at = json.loads(partial.read_text())["state"]["iter"]
    assert cut_at < 3
    again = run_cli(["gbdt-poison", *args, "-o", "cut.csv"], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"resuming from cut.csv.partial.json after iteration {cut_at}" in again.stderr.decode()
    assert not partial.exists()
    assert (tmp_path / "cut.csv").read_bytes() == (tmp_path / "whole.csv").read_bytes()
    a, b = (json.loads(line) for line in (whole.stdout, again.stdout))
    assert a["poisoned"] == b["poisoned"] and a["fits"] == b["fits"]
