"""Resumable simulator values for pair building: contexts in chunks, each finished chunk checkpointed.

A context's V_sim depends only on itself, the graph and the settings (its random stream is keyed by its
id and the posterior draws by the seed), so values computed chunk by chunk, in one run or across an
interruption, equal those of one call over all contexts bit for bit. The checkpoint (an NPZ) carries a
fingerprint of the job (the graph's arrays, the settings, every context's id and candidates); a
checkpoint of another job is refused rather than mixed in.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np

from methodkit.core.errors import UsageError
from methodkit.tools.cita import simulate
from methodkit.tools.cita.records import canonical

CHUNK = 512


def fingerprint(graph, contexts: list, cfg: simulate.SimConfig) -> str:
    h = hashlib.sha256(json.dumps(dataclasses.asdict(cfg), sort_keys=True).encode())
    h.update(json.dumps(graph.names).encode())
    for name, array in sorted(graph.to_arrays().items()):
        h.update(name.encode())
        h.update(np.ascontiguousarray(array).tobytes())
    for ctx in contexts:
        h.update(json.dumps([str(ctx.get("context_id")), [canonical(c) for c in ctx["candidates"]]]).encode())
    return h.hexdigest()


def _load(path: Path, key: str) -> tuple[list, list]:
    try:
        with np.load(path, allow_pickle=False) as z:
            stored, means, stds, sizes = str(z["fingerprint"]), z["means"], z["stds"], z["sizes"]
    except Exception as exc:  # noqa: BLE001 (a torn or foreign file: say which)
        raise UsageError(
            f"{path}: not a readable pair-building checkpoint ({exc}); remove it or drop --resume"
        ) from None
    if stored != key:
        raise UsageError(f"{path}: checkpoint of another pair-building job (other data, graph or settings); remove it")
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [means[a:b] for a, b in zip(bounds[:-1], bounds[1:])], [stds[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _save(path: Path, key: str, means: list, stds: list) -> None:
    from methodkit.core.io import atomic_write

    with atomic_write(path, binary=True, force=True) as handle:
        np.savez(
            handle,
            fingerprint=np.array(key),
            means=np.concatenate(means) if means else np.zeros(0),
            stds=np.concatenate(stds) if stds else np.zeros(0),
            sizes=np.array([len(m) for m in means], np.int64),
        )


def values(
    graph, contexts: list, cfg: simulate.SimConfig, checkpoint=None, resume: bool = False, progress=None
) -> list:
    """simulate.values over `contexts` in chunks; with `checkpoint` each finished chunk is saved there, and
    with `resume` a checkpoint of the same job is continued after its last saved context."""
    path = Path(checkpoint) if checkpoint is not None else None
    key = fingerprint(graph, contexts, cfg) if path is not None else ""
    means, stds = _load(path, key) if (resume and path is not None and path.exists()) else ([], [])
    for start in range(len(means), len(contexts), CHUNK):
        for mean, std in simulate.values(graph, contexts[start : start + CHUNK], cfg):
            means.append(mean)
            stds.append(std)
        if path is not None:
            _save(path, key, means, stds)
        if progress is not None:
            progress("simulator values", len(means), len(contexts))
    return list(zip(means, stds))
