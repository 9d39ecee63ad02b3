"""Which columns to move (issue §2.2): split-gain priority, globally or per row.

`gain`: the victim's total split gain per column (feature_importance('gain')),
top k of the mutable numeric columns. `random`: k mutable columns at random (the
ablation). `local`: per row, the gain of the splits whose thresholds the row can
actually reach inside its eps-ellipsoid's shadow on that axis.
"""

from __future__ import annotations

import numpy as np

from methodkit.core.errors import UsageError

RANKINGS = ("gain", "random", "local")


def check_k(k: int, mutable: list[str]) -> None:
    if k < 1:
        raise UsageError(f"--dims must be at least 1, got {k}")
    if k > len(mutable):
        raise UsageError(
            f"--dims {k} exceeds the {len(mutable)} mutable numeric columns ({', '.join(mutable)}); "
            f"lower --dims or relax --immutable"
        )


def by_gain(gains: np.ndarray, mutable_idx: list[int], k: int) -> list[int]:
    """Top-k mutable feature indices by gain (ties: column order)."""
    order = sorted(mutable_idx, key=lambda j: (-gains[j], j))
    return order[:k]


def by_name(names: list[str], features: list[str], mutable: list[str]) -> list[int]:
    out = []
    for name in names:
        if name not in features:
            raise UsageError(f"--dims-list: column '{name}' not found (features: {', '.join(features)})")
        if name not in mutable:
            raise UsageError(f"--dims-list: column '{name}' is not a mutable numeric column ({', '.join(mutable)})")
        out.append(features.index(name))
    if len(set(out)) != len(out):
        raise UsageError("--dims-list names a column twice")
    return out


def at_random(mutable_idx: list[int], k: int, rng: np.random.Generator) -> list[int]:
    return sorted(int(j) for j in rng.choice(np.asarray(mutable_idx), size=k, replace=False))


def local(
    Z_rows: np.ndarray,
    reach: np.ndarray,
    splits: list[tuple[int, float, float]],
    std,
    gains: np.ndarray,
    mutable_idx: list[int],
    k: int,
) -> np.ndarray:
    """(B,k) per-row dims: columns ranked by the gain of thresholds within reach (-1 pads rows with fewer).

    Z_rows: (B,p) standardised rows (NaN = missing); reach: (B,p) half-width of each row's
    ellipsoid shadow on each axis (eps * within-class sd). Ties fall back to global gain.
    """
    B = Z_rows.shape[0]
    score = np.zeros((B, len(mutable_idx)))
    for a, j in enumerate(mutable_idx):
        mine = [(thr, g) for f, thr, g in splits if f == j]
        if not mine:
            continue
        thr = np.array([t for t, _ in mine])
        thr_z = std.to_std(np.maximum(thr, 0) if std.logmask[j] else thr, np.full(len(thr), j))
        g = np.array([g for _, g in mine])
        z = Z_rows[:, j][:, None]
        within = np.abs(thr_z[None, :] - z) <= reach[:, j][:, None]
        score[:, a] = np.where(np.isfinite(z[:, 0]), (within * g[None, :]).sum(axis=1), -np.inf)
    out = np.full((B, k), -1, dtype=np.int64)
    tiebreak = np.array([gains[j] for j in mutable_idx])
    for b in range(B):
        usable = [a for a in range(len(mutable_idx)) if np.isfinite(Z_rows[b, mutable_idx[a]])]
        usable.sort(key=lambda a: (-score[b, a], -tiebreak[a], a))
        chosen = sorted(mutable_idx[a] for a in usable[:k])
        out[b, : len(chosen)] = chosen
    return out
