"""Array-module twin of the non-overlapping encode: NumPy on the CPU, CuPy on CUDA (`--device cuda`).

Same arithmetic as kernels.encode_nonoverlap_seeded, vectorised over the batch: Z from the same
counter-based stream (splitmix64 of (seed, image index, counter), Box-Muller) computed with uint64
array operations, delta = Z N_t^T per patch (einsum), alpha per image, fold by reshape (patches of
a non-overlapping stem tile the padded image). Run with xp = numpy it is tested against the Numba
kernel; bench/gpu_nte.py compares the CuPy run with the CPU one on a GPU machine.
"""

from __future__ import annotations

import numpy as np

_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB


def _splitmix(xp, x):
    z = x + xp.uint64(_GOLDEN)
    z = (z ^ (z >> xp.uint64(30))) * xp.uint64(_MIX1)
    z = (z ^ (z >> xp.uint64(27))) * xp.uint64(_MIX2)
    return z ^ (z >> xp.uint64(31))


def draw_normals(xp, seed: int, first_index: int, count: int, rows: int, cols: int):
    """Z (count, rows, cols) equal to kernels.draw_normals (same stream, same Box-Muller)."""
    with np.errstate(over="ignore"):
        index = xp.arange(first_index, first_index + count, dtype=xp.uint64)
        seed_mix = _splitmix(xp, xp.asarray(np.uint64(seed)))
        keys = _splitmix(xp, seed_mix ^ _splitmix(xp, index + xp.uint64(_GOLDEN)))
        size = rows * cols
        pairs = (size + 1) // 2
        counter = xp.arange(pairs, dtype=xp.uint64) * xp.uint64(2)
        bits1 = _splitmix(xp, keys[:, None] + counter[None, :])
        bits2 = _splitmix(xp, keys[:, None] + counter[None, :] + xp.uint64(1))
    scale = 1.0 / 9007199254740992.0
    u1 = ((bits1 >> xp.uint64(11)).astype(xp.float64) + 1.0) * scale
    u2 = (bits2 >> xp.uint64(11)).astype(xp.float64) * scale
    radius = xp.sqrt(-2.0 * xp.log(u1))
    values = xp.stack([radius * xp.cos(2.0 * np.pi * u2), radius * xp.sin(2.0 * np.pi * u2)], axis=2)
    return values.reshape(count, 2 * pairs)[:, :size].reshape(count, rows, cols)


def encode_nonoverlap(xp, images, bases, types, seed: int, first_index: int, psnr: float, kernel: int, padding: int):
    """(x', alpha) as kernels.encode_nonoverlap_seeded, computed with array module xp."""
    images = xp.asarray(images)
    b, c, h, w = images.shape
    bases = xp.asarray(bases)
    types = xp.asarray(types)
    rows = (h + 2 * padding - kernel) // kernel + 1
    cols = (w + 2 * padding - kernel) // kernel + 1
    z = draw_normals(xp, seed, first_index, b, rows * cols, bases.shape[2])
    delta = xp.einsum("blk,lnk->bln", z, bases[types])
    energy = (delta * delta).sum(axis=(1, 2))
    alpha = xp.sqrt(10.0 ** (-psnr / 10.0) * (c * h * w) / energy)
    noise = (alpha[:, None, None] * delta).reshape(b, rows, cols, c, kernel, kernel)
    canvas = noise.transpose(0, 3, 1, 4, 2, 5).reshape(b, c, rows * kernel, cols * kernel)
    out = images + canvas[:, :, padding : padding + h, padding : padding + w].astype(images.dtype)
    return out, alpha
