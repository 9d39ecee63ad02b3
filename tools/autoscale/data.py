"""A pools folder (real.npz, synth.npz, val.npz, test.npz, scenes.csv, emb.npy): reading and checking."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from methodkit.core.errors import DataError
from methodkit.tools.autoscale import features as F
from methodkit.tools.autoscale import pools as PL

SCENES_CSV = "scenes.csv"
EMB = "emb.npy"
RAE = "graphrae.safetensors"


def read_folder(folder) -> tuple[dict, dict]:
    """(pool -> arrays, pool -> meta) of a pools folder; every file validated."""
    folder = Path(folder)
    arrays, metas = {}, {}
    for pool in PL.POOLS:
        path = folder / f"{pool}.npz"
        if not path.exists():
            raise DataError(f"{folder}: missing {pool}.npz (write the folder with 'autoscale-mix pools')")
        arrays[pool], metas[pool] = PL.read_pool(path)
    return arrays, metas


def tags_of(meta: dict) -> np.ndarray:
    return np.array([PL.GENERATORS[g][1] if g in PL.GENERATORS else "user" for g in meta["generators"]])


def check_leakage(arrays: dict) -> None:
    """A val/test scene id, or an exact duplicate of a val/test scene's feature row, inside a training pool."""
    held = {p: arrays[p] for p in ("val", "test")}
    for train in ("real", "synth"):
        ids = set(arrays[train]["scene_id"].tolist())
        for name, a in held.items():
            both = sorted(ids.intersection(a["scene_id"].tolist()))
            if both:
                raise DataError(f"{train}.npz holds {name} scene id {both[0]!r} ({len(both)} in all); "
                                "pass --allow-overlap to accept it")  # fmt: skip
    rows = {p: F.flat(F.featurise(arrays[p], noise=False)) for p in PL.POOLS}
    for train in ("real", "synth"):
        seen = {r.tobytes(): i for i, r in enumerate(rows[train])}
        for name in held:
            for j, r in enumerate(rows[name]):
                if r.tobytes() in seen:
                    raise DataError(
                        f"{train}.npz row {seen[r.tobytes()]} has the same features as {name}.npz row {j} "
                        "(an exact duplicate); pass --allow-overlap to accept it"
                    )


def read_embeddings(folder, arrays: dict, path=None) -> dict:
    """emb.npy split back into pools (row order = scenes.csv: real, synth, val, test); checked."""
    from methodkit.core import io

    path = Path(path) if path else Path(folder) / EMB
    if not path.exists():
        raise DataError(f"{path}: not found (run 'autoscale-mix embed' first, or pass --emb)")
    emb = io.read_arrays(path)
    emb = np.asarray(emb if isinstance(emb, np.ndarray) else next(iter(emb.values())))
    n = sum(arrays[p]["ego"].shape[0] for p in PL.POOLS)
    if emb.ndim != 2 or emb.shape[0] != n:
        raise DataError(f"{path}: has shape {emb.shape}, expected [{n}, d] (one row per scene of scenes.csv)")
    bad = ~np.isfinite(emb).all(axis=1)
    if bad.any():
        raise DataError(f"{path}: non-finite embedding in rows {np.flatnonzero(bad)[:5].tolist()}")
    out, start = {}, 0
    for p in PL.POOLS:
        k = arrays[p]["ego"].shape[0]
        out[p] = emb[start : start + k].astype(np.float32)
        start += k
    return out
