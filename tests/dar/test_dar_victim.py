"""Victim training: the .partial checkpoint on interrupt, and --device."""

from __future__ import annotations

import json

import numpy as np
import pytest

from methodkit.tools.dar import data, victim
from methodkit.tools.dar.evaluate import evaluate


def _interrupt_at(step):
    def progress(phase, done, total):
        if phase == "train" and done == step:
            raise KeyboardInterrupt

    return progress


def test_interrupt_keeps_a_partial_checkpoint_and_no_final_model(tmp_path):
    x, y, _ = data.synthetic(200, seed=0)
    out = tmp_path / "m.safetensors"
    partial = victim.partial_path(out)
    assert partial == str(tmp_path / "m.partial.safetensors")
    cfg = victim.VictimConfig(arch="cnn-xs", width=2, epochs=1, batch_size=20)
    with pytest.raises(KeyboardInterrupt):
        victim.fit(x, y, cfg, 10, progress=_interrupt_at(3), partial=partial)
    assert not out.exists()
    sidecar = json.loads((tmp_path / "m.partial.json").read_text())
    assert sidecar["config"]["partial_step"] == 3 and sidecar["config"]["steps"] == 10
    kept = victim.load(partial)  # a loadable model with the weights reached at step 3
    assert kept.predict(x[:5]).shape == (5,)


def test_device_resolution():
    import torch

    assert victim.torch_device("cpu") == "cpu"
    assert victim.torch_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(Exception, match="--device must be one of"):
        victim.VictimConfig(device="tpu").check()
    if not torch.cuda.is_available():
        from methodkit.core.errors import RunFailure

        with pytest.raises(RunFailure, match="no CUDA device"):
            victim.torch_device("cuda")


@pytest.mark.gpu
def test_cuda_training_matches_cpu_accuracy():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    x, y = data.load("synthetic", "train", 2000)
    xt, yt = data.load("synthetic", "test", 500)
    acc = {}
    for device in ("cpu", "cuda"):
        cfg = victim.VictimConfig(arch="cnn-xs", width=8, epochs=2, batch_size=32, device=device)
        model, summary = victim.fit(x, y, cfg, 10)
        assert summary["device"] == device
        acc[device] = float((model.predict(xt) == yt).mean())
    assert abs(acc["cpu"] - acc["cuda"]) < 0.05, acc


def test_torchscript_backbone_trains_only_the_head(tmp_path, run_cli, one_line_error):
    import torch

    from methodkit.core.checkpoint import load

    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(2))
    path = tmp_path / "enc.pt"
    torch.jit.save(torch.jit.script(encoder), str(path))
    x, y, _ = data.synthetic(300, seed=0)
    np.savez(tmp_path / "train.npz", x=x, y=y)
    out = tmp_path / "m.safetensors"
    proc = run_cli(["dar-backdoor", "train", tmp_path / "train.npz", "--backbone", f"torchscript:{path}",
                    "--epochs", "1", "--batch-size", "32", "-q", "-o", out])  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    tensors, sidecar = load(out)
    assert sidecar["config"]["arch"] == "torchscript" and sidecar["config"]["width"] == 16
    for name, value in encoder.state_dict().items():  # the encoder is frozen
        assert torch.equal(tensors[f"encoder.{name}"], value)
    assert set(k for k in tensors if k.startswith("head.")) == {"head.weight", "head.bias"}
    model = victim.load(out)
    assert model.predict(x[:10]).shape == (10,)
    # eval's path (victim.load -> evaluate), in-process: the CLI eval is tested on cnn models
    assert 0 <= evaluate(model, x, y, "badnets", 0)["asr"] <= 1
    path.write_bytes(b"not torchscript")
    proc = run_cli(["dar-backdoor", "train", tmp_path / "train.npz", "--backbone", f"torchscript:{path}",
                    "-o", tmp_path / "n.safetensors"])  # fmt: skip
    one_line_error(proc, "dar-backdoor", "cannot load as a TorchScript encoder")
    with pytest.raises(Exception, match="changed since training|cannot load"):
        victim.load(out)


def test_run_with_baselines_only_needs_no_rule():
    from methodkit.tools.dar.discover import DiscoverConfig
    from methodkit.tools.dar.pipeline import RunConfig, run

    x, y = data.load("synthetic", "train", 300)
    xt, yt = data.load("synthetic", "test", 100)
    tiny = victim.VictimConfig(arch="cnn-xs", width=2, epochs=0.3, batch_size=32)
    cfg = RunConfig(DiscoverConfig(min_entropy=1.0), tiny, tiny, budget=10, methods=("clean", "badnets"))
    result = run(x, y, xt, yt, 10, cfg)  # no rule could pass min_entropy 1.0; none is needed
    assert result.rules == [] and [r["method"] for r in result.rows] == ["clean", "clean", "badnets", "badnets"]
