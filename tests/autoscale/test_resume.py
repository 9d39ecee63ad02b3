"""run --resume (round checkpoints) and --warm-start."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from methodkit.tools.autoscale import data, loop, runner
from methodkit.tools.autoscale import planner as P


class _Stop(Exception):
    pass


def _cfg(**kw):
    return loop.LoopConfig(method="autoscale", budget=60, rounds=3, clusters=4, ga_checkpoints=2, trust=1e9,
                           planner=P.PlannerConfig(steps=40, batch_size=32, hidden=32), **kw)  # fmt: skip


def _pools(embedded):
    folder, arrays, metas, _, _ = embedded
    return runner.make_pools(arrays, metas, data.read_embeddings(folder, arrays))


def _same(a, b):
    assert a.rounds == b.rounds and a.mixtures == b.mixtures and a.best_round == b.best_round and a.test == b.test
    assert all(np.array_equal(x, y) for x, y in zip(a.selected, b.selected))
    assert all(torch.equal(a.model_state[k], b.model_state[k]) for k in a.model_state)


@pytest.mark.parametrize("warm", [False, True])
def test_interrupted_run_resumes_to_the_uninterrupted_result(embedded, tmp_path, warm):
    pools = _pools(embedded)
    full = loop.run(pools, _cfg(warm_start=warm), seed=1)

    def stop_after_1(r):
        if r == 1:
            raise _Stop

    with pytest.raises(_Stop):
        loop.run(pools, _cfg(warm_start=warm), seed=1, ckpt_dir=tmp_path, on_round=stop_after_1)
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("*.safetensors")) == [
        "round-000.safetensors", "round-001.safetensors"]
    done = []
    resumed = loop.run(pools, _cfg(warm_start=warm), seed=1, ckpt_dir=tmp_path, resume=True, on_round=done.append)
    assert done == [2]  # only the round after the last completed one ran again
    _same(full, resumed)


def test_warm_start_starts_from_the_previous_weights(embedded):
    pools = _pools(embedded)
    pc = P.PlannerConfig(steps=3, batch_size=16, hidden=16, lr=1e-12)
    data = P.TrainData(pools.x("real"), pools.y("real"), pools.x("synth")[:10], pools.y("synth")[:10])
    torch.manual_seed(123)
    init = {k: v.clone() for k, v in P.build(data.real_x.shape[1], pc).state_dict().items()}
    warm, _ = P.train(data, pc, seed=0, init_state=init)
    cold, _ = P.train(data, pc, seed=0)
    for k, v in init.items():
        assert torch.allclose(warm.state_dict()[k], v, atol=1e-6)
    assert not all(torch.allclose(cold.state_dict()[k], v, atol=1e-6) for k, v in init.items())
    a, b = loop.run(pools, _cfg(), seed=1), loop.run(pools, _cfg(warm_start=True), seed=1)
    assert a.rounds[0]["val"] == b.rounds[0]["val"]  # round 0 has no previous round
    assert not all(torch.equal(a.model_state[k], b.model_state[k]) for k in a.model_state) or a.best_round == 0


@pytest.mark.slow
def test_cli_resume_after_a_lost_round_gives_the_same_stdout(embedded, tmp_path, run_cli):
    folder = embedded[0]
    args = ["autoscale-mix", "run", str(folder), "--budget", "60", "--rounds", "3", "--clusters", "4",
            "--steps", "40", "--batch-size", "32", "-j", "1", "-q", "--seed", "2"]  # fmt: skip
    first = run_cli([*args, "-o", str(tmp_path / "r")])
    assert first.returncode == 0, first.stderr.decode()
    ck = tmp_path / "r" / "checkpoints"
    for p in ck.glob("round-002.*"):  # as if stopped during round 2
        p.unlink()
    again = run_cli([*args, "-o", str(tmp_path / "r"), "--resume"])
    assert again.returncode == 0, again.stderr.decode()
    drop = lambda s: {k: v for k, v in json.loads(s).items() if k != "meta"}  # noqa: E731
    assert drop(again.stdout) == drop(first.stdout)
    assert (ck / "round-002.safetensors").is_file()
    refused = run_cli([*args, "-o", str(tmp_path / "r")])
    assert refused.returncode == 2 and "--force" in refused.stderr.decode()
