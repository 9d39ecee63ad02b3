"""Per-instance statistics of instance-id images in one pass: pixel counts, boxes and centroids.

`mask_stats(ids, n)` reads int32 ids [F, H, W] (values outside 0..n-1, such as -1 for the background,
are skipped) and returns counts [F, n], bounding boxes [F, n, 4] as (u_min, v_min, u_max, v_max)
(-1 where an id is absent) and centroids [F, n, 2] as (u, v) (NaN where absent). One pass over the
pixels instead of one boolean mask per instance; frames split across threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def _mask_stats(ids, n):
    f_count, h, w = ids.shape
    counts = np.zeros((f_count, n), dtype=np.int64)
    boxes = np.full((f_count, n, 4), -1, dtype=np.int64)
    sums = np.zeros((f_count, n, 2), dtype=np.float64)
    for f in prange(f_count):
        for v in range(h):
            for u in range(w):
                k = ids[f, v, u]
                if k < 0 or k >= n:
                    continue
                if counts[f, k] == 0:
                    boxes[f, k, 0] = u
                    boxes[f, k, 1] = v
                    boxes[f, k, 2] = u
                    boxes[f, k, 3] = v
                else:
                    if u < boxes[f, k, 0]:
                        boxes[f, k, 0] = u
                    if u > boxes[f, k, 2]:
                        boxes[f, k, 2] = u
                    boxes[f, k, 3] = v  # rows are visited in order
                counts[f, k] += 1
                sums[f, k, 0] += u
                sums[f, k, 1] += v
    return counts, boxes, sums


def mask_stats(ids: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """counts [F, n], bbox [F, n, 4] (u0, v0, u1, v1), centroid [F, n, 2] (u, v) of ids int [F, H, W] or [H, W]."""
    arr = np.asarray(ids)
    if arr.ndim == 2:
        arr = arr[None]
    if arr.ndim != 3:
        raise ValueError(f"ids must be [F, H, W] or [H, W], got shape {arr.shape}")
    counts, boxes, sums = _mask_stats(np.ascontiguousarray(arr, dtype=np.int32), int(n))
    with np.errstate(invalid="ignore", divide="ignore"):
        centroid = sums / counts[..., None]
    centroid[counts == 0] = np.nan
    return counts, boxes, centroid


def mask_stats_reference(ids: np.ndarray, n: int):
    """The same with one boolean mask per frame and instance (plain NumPy; the kernel's reference)."""
    arr = np.asarray(ids)
    if arr.ndim == 2:
        arr = arr[None]
    counts = np.zeros((arr.shape[0], n), dtype=np.int64)
    boxes = np.full((arr.shape[0], n, 4), -1, dtype=np.int64)
    centroid = np.full((arr.shape[0], n, 2), np.nan)
    for f in range(arr.shape[0]):
        for k in range(n):
            v, u = np.nonzero(arr[f] == k)
            if len(u):
                counts[f, k] = len(u)
                boxes[f, k] = (u.min(), v.min(), u.max(), v.max())
                centroid[f, k] = (u.mean(), v.mean())
    return counts, boxes, centroid
