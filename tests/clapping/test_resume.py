"""clapping: per-stage checkpoints; a stopped-and-resumed run equals an uninterrupted one bit for bit."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
import torch

from methodkit.core.checkpoint import spec_hash
from methodkit.core.errors import DataError, UsageError
from methodkit.tools.clapping import checkpoints, tasks
from methodkit.tools.clapping.pipeline import RunConfig, simulate

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def digits():
    return tasks.digits_data(0)


def _cfg(**kw):
    base = dict(task="digits", stages=3, blocks=3, width=24, reuse=3, steps=8, batch=32, lr=0.2, log_every=2)
    return RunConfig(**{**base, **kw})


def _same(a, b):
    a, b = a.to_dict(with_logs=True), b.to_dict(with_logs=True)
    for key in ("seconds", "step_seconds", "resumed_from"):
        a.pop(key), b.pop(key)
    return a == b


# Every kind of state a stage carries: Clapping m/h + quant counters (with 2 microbatches), AQ-SGD's
# shared per-sample buffers, ef-step residuals + rand-k counters, fc's kept references + low-rank Q.
CASES = [
    dict(algo="clapping-fu", compressor="quant:2", microbatches=2),
    dict(algo="aqsgd", compressor="topk:0.1", microbatches=2),
    dict(algo="ef-step", compressor="randk:0.2"),
    dict(algo="clapping-fc", compressor="lowrank:2", fc_init="prev", nesterov=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c["algo"] for c in CASES])
def test_resumed_run_is_bit_identical(tmp_path, digits, case):
    whole = simulate(_cfg(**case), digits, folder=tmp_path / "whole", ckpt_every=3)
    simulate(_cfg(**case, steps=4), digits, folder=tmp_path / "split")
    resumed = simulate(_cfg(**case), digits, folder=tmp_path / "split", resume=True)
    assert resumed.resumed_from == 4
    assert _same(whole, resumed)
    a, _ = checkpoints.checkpoint.load(tmp_path / "whole/ckpt/step-000008/stage1.safetensors")
    b, _ = checkpoints.checkpoint.load(tmp_path / "split/ckpt/step-000008/stage1.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert sorted(p.name for p in (tmp_path / "whole/ckpt").iterdir()) == ["step-000008"]  # older sets pruned


def test_resume_without_state_would_differ(tmp_path, digits):
    """The comparison above can fail: a run restarted from the weights alone does not match."""
    case = CASES[0]
    whole = simulate(_cfg(**case), digits)
    simulate(_cfg(**case, steps=4), digits, folder=tmp_path)
    path = tmp_path / "ckpt/step-000004/stage1.safetensors"
    tensors, sidecar = checkpoints.checkpoint.load(path)
    tensors["upper.0.m"] = torch.zeros_like(tensors["upper.0.m"])  # lose stage 1's activation reference
    checkpoints.checkpoint.save(path, tensors, config=sidecar["config"], spec=sidecar["spec"], extra={"step": 4})
    assert not _same(whole, simulate(_cfg(**case), digits, folder=tmp_path, resume=True))


def test_incomplete_newest_set_falls_back_and_spec_mismatch_names_hashes(tmp_path, digits):
    simulate(_cfg(steps=4), digits, folder=tmp_path, ckpt_every=2)
    newer = tmp_path / "ckpt/step-000006"
    newer.mkdir()
    for suffix in (".safetensors", ".json"):  # a crash after stage 0 of step 6 was written
        shutil.copy(tmp_path / f"ckpt/step-000004/stage0{suffix}", newer / f"stage0{suffix}")
    assert checkpoints.latest_complete(tmp_path, _cfg(), checkpoints.data_fingerprint(digits)) == 4
    shutil.rmtree(newer)
    other = _cfg(lr=0.3)
    fp = checkpoints.data_fingerprint(digits)
    have = spec_hash(checkpoints.stage_spec(_cfg(), 0, fp))
    want = spec_hash(checkpoints.stage_spec(other, 0, fp))
    with pytest.raises(DataError, match=f"checkpoint spec {have} does not match this run's spec {want}"):
        simulate(other, digits, folder=tmp_path, resume=True)
    with pytest.raises(DataError, match="does not match"):  # other stage count: the spec says so
        simulate(_cfg(stages=2), digits, folder=tmp_path, resume=True)
    with pytest.raises(UsageError, match="past --steps 3"):
        simulate(_cfg(steps=3), digits, folder=tmp_path, resume=True)
    with pytest.raises(UsageError, match="no checkpoint"):
        simulate(_cfg(), digits, folder=tmp_path / "empty", resume=True)
    assert json.loads((tmp_path / "ckpt/step-000004/stage2.json").read_text())["step"] == 4


def test_cli_resume_spec_mismatch_exits_2(run_cli, tmp_path, digits):
    cfg = RunConfig(task="digits", stages=2, steps=2, width=16, blocks=2, lr=0.1, reuse=4, batch=64)
    simulate(cfg, digits, folder=tmp_path / "run")
    fp = checkpoints.data_fingerprint(digits)
    have = spec_hash(checkpoints.stage_spec(cfg, 0, fp))
    want = spec_hash(checkpoints.stage_spec(dataclasses.replace(cfg, lr=0.2), 0, fp))
    args = ["run", "--stages", "2", "--blocks", "2", "--width", "16", "--steps", "4", "--lr", "0.2"]
    before = sorted(p.name for p in (tmp_path / "run").rglob("*"))
    proc = run_cli(["clapping-train", *args, "--backend", "sim", "-o", "run", "--resume"], cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == b""
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and f"checkpoint spec {have} does not match this run's spec {want}" in lines[0]
    assert sorted(p.name for p in (tmp_path / "run").rglob("*")) == before


@pytest.mark.slow
def test_gloo_resume_equals_uninterrupted(tmp_path, digits):
    from methodkit.tools.clapping.distributed import run_distributed

    case = dict(algo="clapping-fu", compressor="quant:2", stages=2, blocks=2)
    whole = run_distributed(_cfg(**case), digits, tmp_path / "whole", timeout_s=120)
    run_distributed(_cfg(**case, steps=4), digits, tmp_path / "split", timeout_s=120)
    resumed = run_distributed(_cfg(**case), digits, tmp_path / "split", timeout_s=120, resume=True)
    assert resumed.resumed_from == 4 and _same(whole, resumed)
    assert _same(whole, simulate(_cfg(**case), digits))
