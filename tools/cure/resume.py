"""`cure-unlearn train`'s checkpoints: MODEL.partial.safetensors + MODEL.partial.json beside the output.

The checkpoint holds everything the next step depends on: the agent's tensors (networks, targets,
normaliser), every Adam state (CQL's temperature too), the torch generator of the target noise, the
numpy generator of the batch rows, the update counter and the last losses. A run resumed from it takes exactly the steps an
uninterrupted run takes (tests/cure/test_resume.py). Its spec (data set, exclusion list, backbone,
width, batch, seed, steps) must match the resuming run's: core.checkpoint refuses another.
"""

from __future__ import annotations

import os
from pathlib import Path

from methodkit.core import checkpoint
from methodkit.core.train import optimizer_tensors, restore_optimizer


def partial_path(output: str | os.PathLike) -> Path:
    """model.safetensors -> model.partial.safetensors (its sidecar: model.partial.json)."""
    root, ext = os.path.splitext(os.fspath(output))
    return Path(f"{root}.partial{ext or '.safetensors'}")


def _prefixed(prefix: str, tensors: dict) -> dict:
    return {f"{prefix}{k}": v for k, v in tensors.items()}


def _unprefixed(prefix: str, tensors: dict) -> dict:
    return {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}


def save(path, agent, *, step: int, rng, logs: dict, seconds: float, spec: dict) -> None:
    """Write the state after `step` completed updates (atomically, replacing an older checkpoint)."""
    tensors = _prefixed("agent.", agent.state_dict())
    for name, optimiser in agent.optimisers().items():
        tensors.update(_prefixed(f"{name}_", optimizer_tensors(optimiser)))
    tensors["rng.torch"] = agent.gen.get_state()
    extra = {"step": step, "agent_steps": agent.steps, "numpy_rng": rng.bit_generator.state,
             "logs": {k: float(v) for k, v in logs.items()}, "seconds": seconds}  # fmt: skip
    checkpoint.save(path, tensors, config=agent.config(), spec=spec, extra=extra)


def restore(path, agent, rng, spec: dict) -> tuple[int, dict, float]:
    """Load the checkpoint into `agent` and `rng`; returns (step, logs, seconds trained before)."""
    tensors, sidecar = checkpoint.load(path, expected_spec=spec)
    agent.load_state_dict(_unprefixed("agent.", tensors))
    for name, optimiser in agent.optimisers().items():
        restore_optimizer(optimiser, _unprefixed(f"{name}_", tensors))
    agent.gen.set_state(tensors["rng.torch"])
    rng.bit_generator.state = sidecar["numpy_rng"]
    agent.steps = int(sidecar["agent_steps"])
    return int(sidecar["step"]), dict(sidecar["logs"]), float(sidecar["seconds"])


def remove(path) -> None:
    """Drop a checkpoint once the model it led to is written."""
    for p in (Path(path), checkpoint.sidecar_path(path)):
        p.unlink(missing_ok=True)
