"""Resume of pair building: an interrupted run continues after its last checkpointed chunk and gives the
same pairs as an uninterrupted one."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.errors import UsageError


@pytest.fixture(scope="module")
def job(bfcl_tasks, graph):
    from methodkit.tools.cita import api, simulate
    from methodkit.tools.cita.embed import Embedder

    real = api.training_contexts(bfcl_tasks[0][:6], 0)
    synth = simulate.sample_tasks(graph, api.domains_of(graph, api.graph_sidecar(graph, bfcl_tasks[0])), 6, 0)
    return real, synth, graph, Embedder("hash"), simulate.SimConfig(rollouts=8, seed=0)


def _build(job, **kw):
    from methodkit.tools.cita import cim

    real, synth, graph, emb, cfg = job
    return cim.build_pairs(real, synth, graph, emb, ("B", "S"), cfg, **kw)


def _same(a, b):
    for name in ("pa", "pb", "y", "w", "src", "cal_points", "cal_v"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_interrupted_pair_building_resumes_to_the_same_pairs(job, tmp_path, monkeypatch):
    from methodkit.tools.cita import resume, simulate

    whole = _build(job)
    monkeypatch.setattr(resume, "CHUNK", 7)
    ckpt = tmp_path / "pairs.ckpt.npz"
    seen = []

    def stop_after_two(phase, done, total):
        seen.append(done)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _build(job, checkpoint=ckpt, progress=stop_after_two)
    assert seen == [7, 14] and ckpt.exists()
    computed = []
    real_values = simulate.values

    def counting(graph, contexts, cfg):
        computed.append(len(contexts))
        return real_values(graph, contexts, cfg)

    monkeypatch.setattr(simulate, "values", counting)
    again = _build(job, checkpoint=ckpt, resume=True)
    n = len(job[0]) + len(job[1])
    assert sum(computed) == n - 14  # only the contexts after the checkpoint are simulated
    _same(again, whole)
    computed.clear()
    _same(_build(job, checkpoint=ckpt, resume=True), whole)  # a finished checkpoint: nothing left to simulate
    assert computed == []


def test_resume_refuses_a_checkpoint_of_another_job(job, tmp_path, monkeypatch):
    from dataclasses import replace

    from methodkit.tools.cita import resume

    monkeypatch.setattr(resume, "CHUNK", 7)
    ckpt = tmp_path / "pairs.ckpt.npz"
    real, synth, graph, emb, cfg = job
    resume.values(graph, real[:7], cfg, ckpt)
    with pytest.raises(UsageError, match="another pair-building job"):
        resume.values(graph, real[:7], replace(cfg, rollouts=32), ckpt, resume=True)
    ckpt.write_bytes(b"not an npz")
    with pytest.raises(UsageError, match="not a readable pair-building checkpoint"):
        resume.values(graph, real[:7], cfg, ckpt, resume=True)
