"""Numba kernels of dar: dense-cell counting per pixel window, and rule matching."""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def _levels_pixel_major(images, xi):
    """Quantised levels (pixel * xi) // 256 laid out (H, W, N): a window's pixels become w * w
    contiguous streams over the images instead of w * w strided reads per image."""
    n, h, wd = images.shape
    out = np.empty((h, wd, n), dtype=np.uint8)
    for p in prange(h * wd):
        r, c = p // wd, p % wd
        for i in range(n):
            out[r, c, i] = (images[i, r, c] * xi) // 256
    return out


@njit(cache=True, parallel=True)
def window_codes_count(images, w, xi, lo_count, hi_count):
    """For every w x w window (stride 1) of uint8 images (N, H, W), quantise its pixels to xi levels,
    form the cell code, count codes over the images and return only the dense cells:
    (window_row, window_col, code, count) with lo_count <= count <= hi_count.
    No (N x windows) code matrix is materialised: each window counts into its own table.
    """
    n, h, wd = images.shape
    rows, cols = h - w + 1, wd - w + 1
    n_codes = xi ** (w * w)
    levels = _levels_pixel_major(images, xi)
    # at most n // lo_count cells of one window can be dense: the table never truncates
    per_window_max = n // max(lo_count, 1) + 1
    out = np.zeros((rows * cols, per_window_max, 2), dtype=np.int64)
    found = np.zeros(rows * cols, dtype=np.int64)
    for window in prange(rows * cols):
        r, c = window // cols, window % cols
        codes = np.zeros(n, dtype=np.int64)
        for y in range(w):
            for x in range(w):
                stream = levels[r + y, c + x]
                for i in range(n):
                    codes[i] = codes[i] * xi + stream[i]
        counts = np.zeros(n_codes, dtype=np.int32)
        for i in range(n):
            counts[codes[i]] += 1
        k = 0
        for code in range(n_codes):
            if lo_count <= counts[code] <= hi_count:
                out[window, k, 0] = code
                out[window, k, 1] = counts[code]
                k += 1
        found[window] = k
    total = found.sum()
    result = np.empty((total, 4), dtype=np.int64)
    pos = 0
    for window in range(rows * cols):
        for k in range(found[window]):
            result[pos, 0] = window // cols
            result[pos, 1] = window % cols
            result[pos, 2] = out[window, k, 0]
            result[pos, 3] = out[window, k, 1]
            pos += 1
    return result


def window_codes(x, r: int, c: int, w: int, xi: int):
    """Cell code of every image for the w x w window at (r, c), the kernel's quantisation written
    with array operations only, so NumPy and CuPy arrays both work."""
    levels = (x[:, r : r + w, c : c + w].reshape(len(x), -1).astype(np.int64) * xi) // 256
    codes = levels[:, 0]
    for j in range(1, w * w):
        codes = codes * xi + levels[:, j]
    return codes


def window_codes_count_xp(images, w, xi, lo_count, hi_count, xp):
    """`window_codes_count` written against an array module (CuPy on a GPU; NumPy in the tests, which
    compare it with the Numba kernel): one code per image and a bincount per window, the images
    staying on the device. Same rows, same order (window-major, codes ascending)."""
    n, h, wd = images.shape
    rows, cols = h - w + 1, wd - w + 1
    found = []
    for window in range(rows * cols):
        r, c = window // cols, window % cols
        counts = xp.bincount(window_codes(images, r, c, w, xi), minlength=xi ** (w * w))
        dense = xp.nonzero((counts >= lo_count) & (counts <= hi_count))[0]
        found.append(xp.stack([xp.full(len(dense), r), xp.full(len(dense), c), dense, counts[dense]], axis=1))
    result = xp.concatenate(found).astype(xp.int64) if found else xp.zeros((0, 4), xp.int64)
    return result.get() if hasattr(result, "get") else np.asarray(result)


@njit(cache=True, parallel=True)
def match_window(images, r, c, w, lo, hi):
    """Boolean per image: every pixel of the window at (r, c) lies in [lo, hi] (pixel units, inclusive)."""
    n = images.shape[0]
    out = np.zeros(n, dtype=np.bool_)
    for i in prange(n):
        ok = True
        for y in range(w):
            for x in range(w):
                v = images[i, r + y, c + x]
                j = y * w + x
                if v < lo[j] or v > hi[j]:
                    ok = False
        out[i] = ok
    return out
