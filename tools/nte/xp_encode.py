"""Array-module twin of the non-overlapping encode: NumPy on the CPU, CuPy on CUDA (`--device cuda`).

Same arithmetic as kernels.encode_nonoverlap_seeded, vectorised over the batch: Z from the same
counter-based stream (splitmix64 of (seed, image index, counter), ziggurat) computed with uint64
array operations, delta = Z N_t^T per patch (einsum), alpha per image, fold by reshape (patches of
a non-overlapping stem tile the padded image). Run with xp = numpy it is tested against the Numba
kernel; bench/nte/gpu.py compares the CuPy run with the CPU one on a GPU machine.
"""

from __future__ import annotations

import numpy as np

_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_TWO_POW_53 = 1.0 / 9007199254740992.0


def _splitmix(xp, x):
    z = x + xp.uint64(_GOLDEN)
    z = (z ^ (z >> xp.uint64(30))) * xp.uint64(_MIX1)
    z = (z ^ (z >> xp.uint64(27))) * xp.uint64(_MIX2)
    return z ^ (z >> xp.uint64(31))


def _to_unit(xp, words, open_interval: bool):
    """Top 53 bits as a float in [0, 1) (or (0, 1] with open_interval)."""
    value = (words >> xp.uint64(11)).astype(xp.int64).astype(xp.float64)
    return (value + (1.0 if open_interval else 0.0)) * _TWO_POW_53


def draw_normals(xp, seed: int, first_index: int, count: int, rows: int, cols: int):
    """Z (count, rows, cols) equal to kernels.draw_normals: the same ziggurat, vectorised.

    Every value runs the scalar kernel's state machine (fast path, wedge, tail) on its own word
    counter key + 64 j + a; values still pending after a round take another round, so each value
    reads exactly the words the scalar code reads.
    """
    from methodkit.tools.nte.kernels import WORDS_PER_VALUE, ziggurat_tables

    xs, fs = (xp.asarray(t) for t in ziggurat_tables())
    r = float(xs[1])
    size = rows * cols
    with np.errstate(over="ignore"):
        index = xp.arange(first_index, first_index + count, dtype=xp.uint64)
        seed_mix = _splitmix(xp, xp.asarray(np.uint64(seed)))
        keys = _splitmix(xp, seed_mix ^ _splitmix(xp, index + xp.uint64(_GOLDEN)))
        counter = (keys[:, None] + xp.arange(size, dtype=xp.uint64)[None, :] * xp.uint64(WORDS_PER_VALUE)).ravel()
        out = xp.zeros(count * size)
        pending = xp.arange(count * size)
        in_tail = xp.zeros(count * size, dtype=bool)
        sign = xp.ones(count * size)
        while pending.size:
            c = counter[pending]
            tail = in_tail[pending]
            # main state: one word -> layer, signed x; fast accept, else tail (layer 0) or wedge
            word = _splitmix(xp, c)
            layer = (word & xp.uint64(255)).astype(xp.int64)
            x = (word.astype(xp.int64) >> 10).astype(xp.float64) * _TWO_POW_53 * xs[layer]
            fast = xp.abs(x) < xs[layer + 1]
            to_tail = ~tail & ~fast & (layer == 0)
            wedge_word = _splitmix(xp, c + xp.uint64(1))
            height = fs[layer] + (_to_unit(xp, wedge_word, True) - _TWO_POW_53) * (fs[layer + 1] - fs[layer])
            wedge = ~tail & ~fast & (layer != 0)
            wedge_ok = wedge & (height < xp.exp(-0.5 * x * x))
            # tail state: two words -> accepted when 2 e2 > (e1 / R)^2
            extra = -xp.log(_to_unit(xp, word, True)) / r
            e2 = -xp.log(_to_unit(xp, wedge_word, True))
            tail_ok = tail & (2.0 * e2 > extra * extra)
            done_main = ~tail & (fast | wedge_ok)
            value = xp.where(done_main, x, sign[pending] * (r + extra))
            done = done_main | tail_ok
            out[pending[done]] = value[done]
            # words used this round: main 1 (fast / to tail) or 2 (wedge); tail 2
            step = xp.where(tail | wedge, 2, 1).astype(xp.uint64)
            counter[pending] = c + step
            sign[pending[to_tail]] = xp.where(x[to_tail] > 0, 1.0, -1.0)
            in_tail[pending[to_tail]] = True
            pending = pending[~done]
    return out.reshape(count, rows, cols)


def encode_nonoverlap(
    xp, images, bases, types, seed: int, first_index: int, psnr: float, kernel: int, padding: int, shared: bool = False
):
    """(x', alpha) as kernels.encode_nonoverlap_seeded, computed with array module xp."""
    images = xp.asarray(images)
    b, c, h, w = images.shape
    bases = xp.asarray(bases)
    types = xp.asarray(types)
    rows = (h + 2 * padding - kernel) // kernel + 1
    cols = (w + 2 * padding - kernel) // kernel + 1
    z = draw_normals(xp, seed, first_index, b, 1 if shared else rows * cols, bases.shape[2])
    if shared:  # the official code's layout: one z per image at every patch
        z = xp.broadcast_to(z, (b, rows * cols, bases.shape[2]))
    delta = xp.einsum("blk,lnk->bln", z, bases[types])
    energy = (delta * delta).sum(axis=(1, 2))
    alpha = xp.sqrt(10.0 ** (-psnr / 10.0) * (c * h * w) / energy)
    noise = (alpha[:, None, None] * delta).reshape(b, rows, cols, c, kernel, kernel)
    canvas = noise.transpose(0, 3, 1, 4, 2, 5).reshape(b, c, rows * kernel, cols * kernel)
    out = images + canvas[:, :, padding : padding + h, padding : padding + w].astype(images.dtype)
    return out, alpha
