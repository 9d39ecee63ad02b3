"""forget's checkpoints: a run stopped by a real SIGINT or SIGTERM between two steps, or crashed after a
periodic checkpoint, and resumed ends with exactly the tensors, scores and result of an uninterrupted run; a checkpoint of another run is refused,
naming what differs; --device cuda without CuPy or a GPU is a clear failure."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from methodkit.core.errors import DataError, RunFailure, UsageError
from methodkit.core.outputs import Terminated

STEPS = 30


def _cfg(method, **kw):
    from methodkit.tools.cure.unlearn import ForgetConfig

    kw = {"steps": STEPS, "batch_size": 32, "baseline_steps": 10, "calib_trajs": 4, "grad_batches": 2,
          "grad_batch": 64, "score_heldout": False, "overlap_ref": 500, "seed": 2, **kw}  # fmt: skip
    return ForgetConfig(method=method, **kw)


class Crash(RuntimeError):
    pass


def _stop_in_loop(how: str):
    """A progress hook that, at step 25's progress line, sends a real signal (the run stops after that
    step, saving it) or crashes (the last periodic checkpoint, step 24, is what is left)."""

    def hook(label, *_):
        if label.startswith("forget "):
            if how == "crash":
                raise Crash
            os.kill(os.getpid(), getattr(signal, how))

    return hook


def _diverging_once(at: int):
    """Unlearner whose step `at` reports a NaN loss while lambda_s is unhalved: each run rolls back once,
    before the interruption at step 25 (the resumed run needs lambda_s and rollbacks) or after it (the
    resumed run needs the step-0 snapshot)."""
    from methodkit.tools.cure.unlearn import Unlearner

    class DivergeOnce(Unlearner):
        def step(self, br, bf, wf, phase=0):
            loss, qmax = super().step(br, bf, wf, phase)
            if self.agent.steps == self.agent0.steps + at and self.lambda_s == self.cfg.lambda_s:
                return float("nan"), qmax
            return loss, qmax

    return DivergeOnce


@pytest.fixture(scope="module")
def originals(tiny_ds):
    from methodkit.tools.cure.train import train

    return {algo: train(tiny_ds, algo, steps=20, hidden=16, batch_size=32)[0] for algo in ("td3bc", "iql", "cql")}


@pytest.mark.parametrize(
    "algo,method,extra,diverge_at,stop",
    [("td3bc", "cure", {"rescore_every": 10}, 10, "SIGINT"), ("iql", "cure", {}, 27, "SIGTERM"),
     ("cql", "trajdeleter", {}, 27, "crash")],
)
def test_interrupted_and_resumed_forget_equals_uninterrupted(tiny_ds, originals, tmp_path, monkeypatch, algo, method,
                                                             extra, diverge_at, stop):  # fmt: skip
    from methodkit.tools.cure import forget_run
    from methodkit.tools.cure.forget_run import forget

    monkeypatch.setattr(forget_run, "Unlearner", _diverging_once(diverge_at))  # the rollback state must survive too
    fid, cfg = tiny_ds.ids_of("F-mix"), _cfg(method, **extra)
    straight, s_scores, s_res = forget(originals[algo], tiny_ds, fid, cfg)
    ckpt = tmp_path / "u.partial.safetensors"
    with pytest.raises({"SIGINT": KeyboardInterrupt, "SIGTERM": Terminated, "crash": Crash}[stop]):
        forget(originals[algo], tiny_ds, fid, cfg, checkpoint=ckpt, checkpoint_every=12, progress=_stop_in_loop(stop))
    assert json.loads(Path(ckpt).with_suffix(".json").read_text())["step"] == (24 if stop == "crash" else 25)
    agent, scores, res = forget(originals[algo], tiny_ds, fid, cfg, checkpoint=ckpt, checkpoint_every=7, resume=True)
    want, got = straight.state_dict(), agent.state_dict()
    assert got.keys() == want.keys()
    assert all(bool((got[k] == want[k]).all()) for k in want), (algo, method)
    assert agent.steps == straight.steps
    assert replace(res, seconds=0) == replace(s_res, seconds=0) and res.rollbacks == 1
    if s_scores is not None:
        assert np.array_equal(scores.gate, s_scores.gate) and np.array_equal(scores.cosine, s_scores.cosine)
        assert np.array_equal(scores.overlap, s_scores.overlap, equal_nan=True)


def test_checkpoint_of_another_run_is_refused_naming_the_difference(tiny_ds, originals, tmp_path):
    from methodkit.tools.cure.forget_run import forget

    fid, cfg = tiny_ds.ids_of("F-mix"), _cfg("cure-uniform", steps=4)
    ckpt = tmp_path / "u.partial.safetensors"
    forget(originals["td3bc"], tiny_ds, fid, cfg, checkpoint=ckpt, checkpoint_every=2)
    with pytest.raises(DataError, match=r"does not match this run \(lambda_s 1.0 there, 2.0 here\)"):
        forget(originals["td3bc"], tiny_ds, fid, replace(cfg, lambda_s=2.0), checkpoint=ckpt, resume=True)
    with pytest.raises(DataError, match=r"\(forget_sha256 differs\)"):
        forget(originals["td3bc"], tiny_ds, fid[1:], cfg, checkpoint=ckpt, resume=True)
    with pytest.raises(DataError, match=r"model_sha256 differs"):
        forget(originals["iql"], tiny_ds, fid, cfg, checkpoint=ckpt, resume=True)
    with pytest.raises(UsageError, match="no checkpoint"):
        forget(originals["td3bc"], tiny_ds, fid, cfg, checkpoint=tmp_path / "none.safetensors", resume=True)


def test_device_cuda_without_cupy_or_gpu_fails_before_any_work(tiny_ds, originals):
    from methodkit.core.backend import cuda_available
    from methodkit.tools.cure.forget_run import forget

    if cuda_available():
        pytest.skip("a GPU is present")
    calls = []
    with pytest.raises(RunFailure, match=r"--device cuda: no CUDA device found .*pip install 'methodkit\[gpu\]'"):
        forget(originals["td3bc"], tiny_ds, tiny_ds.ids_of("F-mix"), _cfg("cure", device="cuda"),
               progress=lambda *a: calls.append(a))  # fmt: skip
    assert calls == []


@pytest.mark.gpu
def test_support_overlap_on_cuda_equals_the_cpu_path(tiny_ds, originals):
    pytest.importorskip("cupy")
    from methodkit.core.backend import cuda_available
    from methodkit.tools.cure.unlearn import support_overlap

    if not cuda_available():
        pytest.skip("no CUDA device")
    fid = tiny_ds.ids_of("F-mix")
    kept = np.setdiff1d(tiny_ds.train_ids(), fid)
    cpu = support_overlap(originals["td3bc"], tiny_ds, fid, kept, _cfg("cure"))
    gpu = support_overlap(originals["td3bc"], tiny_ds, fid, kept, _cfg("cure", device="cuda"))
    np.testing.assert_allclose(gpu, cpu, atol=1.0 / 40)  # at most one of a 40-step chunk's rows on a float32 tie
