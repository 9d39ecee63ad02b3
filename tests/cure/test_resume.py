"""train's checkpoints: a run stopped (by a signal, between two steps) and resumed ends with exactly
the tensors of an uninterrupted run, for every backbone; a checkpoint of other flags is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from methodkit.core.errors import DataError, UsageError

STEPS = 40


def _tensors(agent) -> dict:
    return {k: v.clone() for k, v in agent.state_dict().items()}


def _interrupt_at_first_progress(*_):
    os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.parametrize("algo", ["td3bc", "iql", "cql"])
def test_interrupted_and_resumed_equals_uninterrupted(tiny_ds, tmp_path, algo):
    from methodkit.tools.cure.train import train

    straight = _tensors(train(tiny_ds, algo, steps=STEPS, hidden=16, batch_size=32, seed=3)[0])
    ckpt = str(tmp_path / "m.partial.safetensors")
    with pytest.raises(KeyboardInterrupt):  # the SIGINT lands in step 1; the run stops after it
        train(tiny_ds, algo, steps=STEPS, hidden=16, batch_size=32, seed=3, checkpoint=ckpt,
              progress=_interrupt_at_first_progress)  # fmt: skip
    assert json.loads(Path(ckpt).with_suffix(".json").read_text())["step"] == 1
    agent, _, result = train(tiny_ds, algo, steps=STEPS, hidden=16, batch_size=32, seed=3, checkpoint=ckpt,
                             checkpoint_every=7, resume=True)  # fmt: skip
    resumed = _tensors(agent)
    assert resumed.keys() == straight.keys()
    assert all(bool((resumed[k] == straight[k]).all()) for k in straight), algo
    assert result.steps == STEPS and agent.steps == STEPS


def test_periodic_checkpoint_resumes_to_the_same_model(tiny_ds, tmp_path):
    from methodkit.tools.cure.train import train

    ckpt = str(tmp_path / "m.partial.safetensors")
    straight = _tensors(train(tiny_ds, "td3bc", steps=STEPS, hidden=16, batch_size=32, checkpoint=ckpt,
                              checkpoint_every=15)[0])  # fmt: skip
    assert json.loads(Path(ckpt).with_suffix(".json").read_text())["step"] == 30  # the last one before the end
    resumed = _tensors(train(tiny_ds, "td3bc", steps=STEPS, hidden=16, batch_size=32, checkpoint=ckpt,
                             resume=True)[0])  # fmt: skip
    assert all(bool((resumed[k] == straight[k]).all()) for k in straight)


def test_checkpoint_of_other_flags_or_none_is_refused(tiny_ds, tmp_path):
    from methodkit.tools.cure.train import train

    ckpt = str(tmp_path / "m.partial.safetensors")
    train(tiny_ds, "td3bc", steps=10, hidden=16, batch_size=32, checkpoint=ckpt, checkpoint_every=5)
    with pytest.raises(DataError, match="does not match"):
        train(tiny_ds, "td3bc", steps=10, hidden=16, batch_size=32, seed=1, checkpoint=ckpt, resume=True)
    with pytest.raises(UsageError, match="no checkpoint"):
        train(tiny_ds, "td3bc", steps=10, hidden=16, checkpoint=str(tmp_path / "none.safetensors"), resume=True)


def test_cli_ctrl_c_keeps_the_checkpoint_and_a_finished_run_removes_it(run_cli, tiny_files, tmp_path):
    _, data, _ = tiny_files
    exe = Path(sys.executable).parent / "cure-unlearn"
    argv = [str(exe), "train", str(data), "--steps", "100000000", "--hidden", "8", "--checkpoint-every", "200",
            "-o", "m.safetensors", "-q"]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    deadline = time.monotonic() + 300
    while not (tmp_path / "m.partial.json").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)  # the first periodic checkpoint says the run is inside its loop
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and err == b"cure-unlearn: interrupted\n" and out == b"", err
    assert not (tmp_path / "m.safetensors").exists()
    assert json.loads((tmp_path / "m.partial.json").read_text())["step"] >= 200
    other = run_cli(["cure-unlearn", "train", data, "--steps", "50", "--hidden", "8", "--checkpoint-every", "200",
                     "-o", "m.safetensors", "--resume", "-q"], cwd=tmp_path)  # fmt: skip
    assert other.returncode == 2 and b"does not match" in other.stderr, other.stderr
    done = run_cli(["cure-unlearn", "train", data, "--steps", "50", "--hidden", "8", "-o", "m.safetensors", "-q"],
                   cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]
