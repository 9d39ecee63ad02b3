"""Per-stage checkpoints of a pipeline run, and resuming from the last complete set.

Every `ckpt_every` steps (and at the end) each stage writes DIR/ckpt/step-NNNNNN/stageP.safetensors
(+ .json sidecar, via methodkit.core.checkpoint, each file written atomically) holding everything
its next step depends on: parameters, momentum buffers, both link ends' reference buffers
(Clapping m/h, ef-step residuals, AQ-SGD per-sample buffers), the compressors' counters and
warm-started factors, the torch RNG state, and its byte/loss logs so far. A set counts only when
all P stages are present at the same step; older sets are removed once a newer one is complete,
so a crash while writing leaves the previous set usable. The spec hash covers everything that must
match to continue (the configuration except --steps and the log interval, the stage, the data's bytes).
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import numpy as np

from methodkit.core import checkpoint, compress
from methodkit.core.errors import UsageError

LINK_ARRAYS = ("m", "h", "e_fwd", "e_bwd")
TAGS = {"fwd": 0, "bwd": 1}
STEP_DIR = re.compile(r"^step-(\d{6,})$")


def data_fingerprint(data) -> str:
    digest = hashlib.sha256()
    for array in (data.x_train, data.y_train, data.x_val, data.y_val):
        if array is not None:
            digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:16]


def stage_spec(cfg, rank: int, fingerprint: str) -> dict:
    config = {k: v for k, v in cfg.to_dict().items() if k not in ("steps", "log_every")}
    return {"clapping": config, "stage": rank, "data": fingerprint}


def set_dir(folder, step: int) -> Path:
    return Path(folder) / "ckpt" / f"step-{step:06d}"


# ------------------------------------------------------------ compressor state (counters, warm starts)
def _compressor_state(comp, prefix: str, out: dict) -> None:
    import torch

    for name, value in vars(comp).items():
        if isinstance(value, compress.Compressor):
            _compressor_state(value, f"{prefix}{name}.", out)
        elif name == "calls":
            out[f"{prefix}calls"] = torch.tensor([value], dtype=torch.int64)
        elif name == "q" and isinstance(value, np.ndarray):
            out[f"{prefix}q"] = torch.from_numpy(value.copy())


def _restore_compressor(comp, prefix: str, tensors: dict) -> None:
    for name, value in vars(comp).items():
        if isinstance(value, compress.Compressor):
            _restore_compressor(value, f"{prefix}{name}.", tensors)
        elif name == "calls":
            comp.calls = int(tensors[f"{prefix}calls"][0])
        elif name == "q" and isinstance(value, np.ndarray):
            comp.q = tensors[f"{prefix}q"].numpy().copy()


# ------------------------------------------------------------ one stage
def stage_tensors(worker) -> dict:
    """Everything stage `worker` needs to continue exactly where it is."""
    import torch

    host = worker.ops.to_host  # buffers may live on a GPU (--device cuda)
    out = {f"model.{k}": v.cpu() for k, v in worker.module.state_dict().items()}
    for i, state in enumerate(worker.optimizer.state_dict()["state"].values()):
        if state.get("momentum_buffer") is not None:
            out[f"optim.{i}.momentum_buffer"] = state["momentum_buffer"].cpu()
    for side, ends in (("lower", worker.lower), ("upper", worker.upper)):
        for j, end in enumerate(ends or []):
            key = f"{side}.{j}."
            for name in LINK_ARRAYS:
                if getattr(end, name) is not None:
                    out[key + name] = torch.from_numpy(np.array(host(getattr(end, name))))
            if j == 0 and end.memory is not None:  # AQ-SGD buffers are shared by a link's microbatch ends
                out[key + "memory"] = torch.from_numpy(np.array(host(end.memory)))
                out[key + "seen"] = torch.from_numpy(end.seen.copy())
            _compressor_state(end.fwd, key + "fwd.", out)
            _compressor_state(end.bwd, key + "bwd.", out)
    comm = [(c[0], c[1], TAGS[c[2]], c[3], c[4], c[5]) for c in worker.comm]
    out["log.comm"] = torch.tensor(comm, dtype=torch.int64).reshape(-1, 6)
    out["log.track_err"] = torch.tensor([c[6] for c in worker.comm], dtype=torch.float64)
    out["log.losses"] = torch.tensor(worker.losses, dtype=torch.float64)
    out["rng.torch"] = torch.get_rng_state()
    return out


def restore_stage(worker, tensors: dict) -> None:
    import torch

    worker.module.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
    state_dict = worker.optimizer.state_dict()
    params = [p for group in state_dict["param_groups"] for p in group["params"]]
    state_dict["state"] = {
        pid: {"momentum_buffer": tensors[f"optim.{i}.momentum_buffer"]}
        for i, pid in enumerate(params)
        if f"optim.{i}.momentum_buffer" in tensors
    }
    worker.optimizer.load_state_dict(state_dict)
    for side, ends in (("lower", worker.lower), ("upper", worker.upper)):
        for j, end in enumerate(ends or []):
            key = f"{side}.{j}."
            for name in LINK_ARRAYS:
                value = tensors[key + name].numpy().copy() if key + name in tensors else None
                setattr(end, name, None if value is None else worker.ops.to_device(value))
            if j == 0 and end.memory is not None:  # in place: the other microbatch ends share these arrays
                end.memory[...] = worker.ops.to_device(tensors[key + "memory"].numpy())
                end.seen[...] = tensors[key + "seen"].numpy()
            _restore_compressor(end.fwd, key + "fwd.", tensors)
            _restore_compressor(end.bwd, key + "bwd.", tensors)
    tags = {v: k for k, v in TAGS.items()}
    rows = tensors["log.comm"].tolist()
    errors = tensors["log.track_err"].tolist() if "log.track_err" in tensors else [float("nan")] * len(rows)
    worker.comm = [
        (int(c[0]), int(c[1]), tags[int(c[2])], int(c[3]), int(c[4]), int(c[5]), float(e)) for c, e in zip(rows, errors)
    ]
    worker.losses = [float(v) for v in tensors["log.losses"].tolist()]
    torch.set_rng_state(tensors["rng.torch"])


def save_stage(folder, worker, step: int, fingerprint: str) -> None:
    path = set_dir(folder, step) / f"stage{worker.rank}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoint.save(
        path, stage_tensors(worker), config=worker.cfg.to_dict(),
        spec=stage_spec(worker.cfg, worker.rank, fingerprint), fingerprint=fingerprint, extra={"step": step},
    )  # fmt: skip


def load_stage(folder, worker, step: int, fingerprint: str) -> None:
    path = set_dir(folder, step) / f"stage{worker.rank}.safetensors"
    tensors, _ = checkpoint.load(path, expected_spec=stage_spec(worker.cfg, worker.rank, fingerprint))
    restore_stage(worker, tensors)


# ------------------------------------------------------------ sets
def _steps(folder) -> list[int]:
    root = Path(folder) / "ckpt"
    if not root.is_dir():
        return []
    return sorted((int(m.group(1)) for p in root.iterdir() if (m := STEP_DIR.match(p.name))), reverse=True)


def _complete(folder, step: int, stages: int) -> bool:
    import json

    for p in range(stages):
        path = set_dir(folder, step) / f"stage{p}.safetensors"
        if not path.is_file() or not checkpoint.sidecar_path(path).is_file():
            return False
        try:
            if json.loads(checkpoint.sidecar_path(path).read_text()).get("step") != step:
                return False
        except ValueError:
            return False
    return not (set_dir(folder, step) / f"stage{stages}.safetensors").exists()


def latest_complete(folder, cfg, fingerprint: str) -> int:
    """The step of the newest complete set, its specs checked (DataError, exit 2, on a mismatch)."""
    steps = _steps(folder)
    for step in steps:
        if _complete(folder, step, cfg.stages):
            for p in range(cfg.stages):  # check every stage's spec before any training starts
                path = set_dir(folder, step) / f"stage{p}.safetensors"
                checkpoint.load(path, expected_spec=stage_spec(cfg, p, fingerprint))
            if step > cfg.steps:
                raise UsageError(f"--resume: the checkpoint in {folder} is at step {step}, past --steps {cfg.steps}")
            return step
    if steps:  # sets exist but none fits this run: say why if the spec differs
        stage0 = set_dir(folder, steps[0]) / "stage0.safetensors"
        if stage0.is_file():
            checkpoint.load(stage0, expected_spec=stage_spec(cfg, 0, fingerprint))
        raise UsageError(f"--resume: no complete set of {cfg.stages} stage checkpoints in {Path(folder) / 'ckpt'}")
    raise UsageError(f"--resume: no checkpoint in {Path(folder) / 'ckpt'}")


def clear(folder) -> None:
    """A fresh run starts without the sets of an earlier run in the same folder (they could outnumber it)."""
    shutil.rmtree(Path(folder) / "ckpt", ignore_errors=True)


def prune(folder, keep: int) -> None:
    """Remove the sets older than the complete set `keep`."""
    for step in _steps(folder):
        if step < keep:
            shutil.rmtree(set_dir(folder, step), ignore_errors=True)


def due(step: int, every: int, total: int) -> bool:
    return step == total or (every > 0 and step % every == 0)
