"""`cure-unlearn train`'s and `forget`'s checkpoints: MODEL.partial.safetensors + MODEL.partial.json beside
the output.

The checkpoint holds everything the next step depends on: the agent's tensors (networks, targets,
normaliser), every Adam state (CQL's temperature too), the torch generator of the target noise, the
numpy generator of the batch rows, the update counter and the last losses. A run resumed from it takes exactly the steps an
uninterrupted run takes (tests/cure/test_resume.py). Its spec (data set, exclusion list, backbone,
width, batch, seed, steps; for forget: the parent model, forget and exclusion lists, every setting) must
match the resuming run's: `check_spec` names the settings that differ, core.checkpoint refuses the hash.
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


def save(path, agent, *, step: int, rng, logs: dict, seconds: float, spec: dict, tensors: dict | None = None,
         extra: dict | None = None) -> None:  # fmt: skip
    """Write the state after `step` completed updates (atomically, replacing an older checkpoint);
    `tensors` and `extra` (JSON) carry a caller's further state."""
    tensors = {**(tensors or {}), **_prefixed("agent.", agent.state_dict())}
    for name, optimiser in agent.optimisers().items():
        tensors.update(_prefixed(f"{name}_", optimizer_tensors(optimiser)))
    tensors["rng.torch"] = agent.gen.get_state()
    extra = {"step": step, "agent_steps": agent.steps, "numpy_rng": rng.bit_generator.state,
             "logs": {k: float(v) for k, v in logs.items()}, "seconds": seconds, **(extra or {})}  # fmt: skip
    checkpoint.save(path, tensors, config=agent.config(), spec=spec, extra=extra)


def check_spec(path, spec: dict) -> None:
    """Refuse (DataError, exit 2) a checkpoint written for another run, naming the settings that differ."""
    import json

    from methodkit.core.errors import DataError
    from methodkit.core.io import jsonable

    side = checkpoint.sidecar_path(path)
    try:
        have = json.loads(side.read_text(encoding="utf-8")).get("spec")
    except (OSError, ValueError, AttributeError):
        return  # core.checkpoint.load names what is wrong with the file
    if not isinstance(have, dict):
        return
    want = jsonable(spec)
    diff = []
    for key in sorted(set(have) | set(want)):
        if have.get(key) != want.get(key):
            a, b = have.get(key, "unset"), want.get(key, "unset")
            short = all(isinstance(v, (int, float, bool, type(None))) or len(str(v)) <= 16 for v in (a, b))
            diff.append(f"{key} {a} there, {b} here" if short else f"{key} differs")
    if diff:
        raise DataError(f"--resume: checkpoint {path} does not match this run ({'; '.join(diff[:6])}); "
                        "rerun with the data and flags it was written with, or delete it")  # fmt: skip


def load_into(path, agent, rng, spec: dict) -> tuple[dict, dict]:
    """Load the checkpoint into `agent` and `rng`; returns (tensors, sidecar) for a caller's further state."""
    check_spec(path, spec)
    tensors, sidecar = checkpoint.load(path, expected_spec=spec)
    agent.load_state_dict(_unprefixed("agent.", tensors))
    for name, optimiser in agent.optimisers().items():
        restore_optimizer(optimiser, _unprefixed(f"{name}_", tensors))
    agent.gen.set_state(tensors["rng.torch"])
    rng.bit_generator.state = sidecar["numpy_rng"]
    agent.steps = int(sidecar["agent_steps"])
    return tensors, sidecar


def restore(path, agent, rng, spec: dict) -> tuple[int, dict, float]:
    """Load the checkpoint into `agent` and `rng`; returns (step, logs, seconds trained before)."""
    _, sidecar = load_into(path, agent, rng, spec)
    return int(sidecar["step"]), dict(sidecar["logs"]), float(sidecar["seconds"])


def remove(path) -> None:
    """Drop a checkpoint once the model it led to is written."""
    for p in (Path(path), checkpoint.sidecar_path(path)):
        p.unlink(missing_ok=True)
