"""The verbs as library calls: resolve id sets, check model/data agreement, run, build results."""

from __future__ import annotations

import numpy as np

from methodkit.core.errors import DataError
from methodkit.tools.cure.data import Dataset, check_forget_ids, read_ids


def resolve_ids(ds: Dataset, ids_text: str | None, contributor: str | None, flag: str, where: str = "") -> list[int]:
    """Ids from an ids.txt text or a contributor name (training trajectories); exactly one of them."""
    if ids_text is not None and contributor is not None:
        raise DataError(f"pass either {flag} or {flag}-contributor, not both")
    if contributor is not None:
        return ds.ids_of(contributor).tolist()
    if ids_text is None:
        return []
    return read_ids(ids_text, where or flag)


def forget_set(ds: Dataset, ids_text, contributor, exclude=(), where: str = "--forget"):
    ids = resolve_ids(ds, ids_text, contributor, "--forget", where)
    if not ids:
        raise DataError("no forget set: pass --forget IDS.txt or --forget-contributor NAME")
    return check_forget_ids(ds, ids, exclude, where)


def check_model_data(meta: dict, ds: Dataset, path: str, allow_mismatch: bool) -> None:
    """obs/act dims must match; another data set's sha256 is refused unless allowed."""
    if (meta["obs_dim"], meta["act_dim"]) != (ds.meta["obs_dim"], ds.meta["act_dim"]):
        raise DataError(
            f"{path}: model obs/act dims {meta['obs_dim']}/{meta['act_dim']} do not match {ds.name} "
            f"({ds.meta['obs_dim']}/{ds.meta['act_dim']})"
        )
    if meta.get("dataset_sha256") != ds.sha256 and not allow_mismatch:
        raise DataError(
            f"{path}: trained on data set {str(meta.get('dataset_sha256'))[:12]}, not {ds.name} "
            f"({ds.sha256[:12]}); pass --allow-dataset-mismatch to accept"
        )


def scores_frame(ds: Dataset, scores):
    import pandas as pd

    names = ds.meta["contributors"]
    contrib = ds.traj_contributor()[scores.traj]
    return pd.DataFrame({
        "traj_id": scores.traj,
        "role": scores.role,
        "contributor": [names[c] for c in contrib],
        "styled": ds.arrays["traj_styled"][scores.traj].astype(int),
        "cosine": scores.cosine,
        "gate": scores.gate,
        "overlap": scores.overlap,
    })  # fmt: skip


def per_traj_frame(ds: Dataset, per_traj: dict):
    import pandas as pd

    frame = pd.DataFrame({k: np.asarray(v) for k, v in per_traj.items()})
    frame.insert(1, "styled", ds.arrays["traj_styled"][frame["traj_id"]].astype(int))
    return frame
