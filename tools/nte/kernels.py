"""Numba kernels of nte: encode (unfold -> Z N^T -> scale -> fold), fold-average, patch covariance.

The noise Z comes from a counter-based generator: value j of image i is a standard normal drawn by
the ziggurat method (256 layers, Marsaglia-Tsang layout) from the 64-bit words
splitmix64(key_i + 64 j + a), a = 0, 1, ... (one word on the fast path, which is taken 99% of the
time; rejections read the next words), key_i from (seed, image index). A value depends only on
(seed, i, j), so the result does not depend on batch size, thread count or where the draw happens
(inside the fused kernel, in draw_normals, or in the array-module twin xp_encode).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TWO_POW_53 = 1.0 / 9007199254740992.0
ZIGGURAT_LAYERS = 256
ZIGGURAT_R = 3.6541528853610088  # start of the tail for 256 layers of exp(-x^2 / 2)
WORDS_PER_VALUE = 64  # counter stride between values: rejection chains longer than this have p < 1e-100


def ziggurat_tables() -> tuple[np.ndarray, np.ndarray]:
    """(x, f): layer edges x_0 > x_1 = R > ... > x_256 = 0 of equal-area layers, f = exp(-x^2 / 2).

    Layer 0 is the base strip (width x_0 = area / f(R), its part beyond R is the tail); layer i
    spans heights f(x_i)..f(x_{i+1}) with width x_i, so |x| < x_{i+1} lies under the curve.
    """
    f = lambda v: math.exp(-0.5 * v * v)  # noqa: E731
    r = ZIGGURAT_R
    area = r * f(r) + math.sqrt(math.pi / 2) * math.erfc(r / math.sqrt(2))
    x = np.zeros(ZIGGURAT_LAYERS + 1)
    x[0], x[1] = area / f(r), r
    for i in range(1, ZIGGURAT_LAYERS):
        height = f(x[i]) + area / x[i]
        x[i + 1] = math.sqrt(-2.0 * math.log(height)) if height < 1.0 else 0.0
    x[ZIGGURAT_LAYERS] = 0.0
    return x, np.exp(-0.5 * x * x)


_ZIG_X, _ZIG_F = ziggurat_tables()
_CHUNKS = 64  # parallel chunks of images, each with its own scratch buffers


@njit(cache=True)
def _splitmix(x):
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def image_key(seed, index):
    """Per-image stream key from (seed, image index): the counter-based generator's seed."""
    return _splitmix(_splitmix(np.uint64(seed)) ^ _splitmix(np.uint64(index) + _GOLDEN))


@njit(cache=True)
def _uniform_open(word):
    """(0, 1] from the top 53 bits."""
    return (float(np.int64(word >> np.uint64(11))) + 1.0) * _TWO_POW_53


@njit(cache=True)
def _normal_slow(key, j):
    """Value j of stream `key`: the whole ziggurat (fast path, wedges, tail), words key + 64 j + a."""
    xs, fs = _ZIG_X, _ZIG_F
    counter = key + np.uint64(j) * np.uint64(WORDS_PER_VALUE)
    while True:
        word = _splitmix(counter)
        counter += np.uint64(1)
        layer = np.int64(word & np.uint64(255))
        x = float(np.int64(word) >> np.int64(10)) * _TWO_POW_53 * xs[layer]  # signed: sign = top bit
        if abs(x) < xs[layer + 1]:
            return x
        if layer == 0:  # tail beyond R (Marsaglia): x = R + e1 / R, accepted when 2 e2 > (e1 / R)^2
            while True:
                extra = -math.log(_uniform_open(_splitmix(counter))) / xs[1]
                e2 = -math.log(_uniform_open(_splitmix(counter + np.uint64(1))))
                counter += np.uint64(2)
                if 2.0 * e2 > extra * extra:
                    return xs[1] + extra if x > 0 else -(xs[1] + extra)
        height = fs[layer] + (_uniform_open(_splitmix(counter)) - _TWO_POW_53) * (fs[layer + 1] - fs[layer])
        counter += np.uint64(1)
        if height < math.exp(-0.5 * x * x):
            return x


@njit(cache=True, inline="always")
def _normal(key, j):
    """Value j of stream `key`; the fast path (one word, ~99% of values) is inlined, the rest is not."""
    word = _splitmix(key + np.uint64(j) * np.uint64(WORDS_PER_VALUE))
    layer = np.int64(word & np.uint64(255))
    x = float(np.int64(word) >> np.int64(10)) * _TWO_POW_53 * _ZIG_X[layer]
    if abs(x) < _ZIG_X[layer + 1]:
        return x
    return _normal_slow(key, j)


@njit(cache=True)
def _fill_normals(key, out):
    """out[:] ~ N(0, 1): value i of the flattened array is value i of stream `key`."""
    flat = out.ravel()
    for i in range(flat.size):
        flat[i] = _normal(key, i)


@njit(cache=True, parallel=True)
def draw_normals(seed, first_index, count, rows, cols):
    """Z (count, rows, cols): image i from the counter-based stream of (seed, first_index + i)."""
    out = np.empty((count, rows, cols))
    for i in prange(count):
        _fill_normals(image_key(seed, first_index + i), out[i])
    return out


_BLOCK = 16  # images per projection block: one small BLAS product (16 L x k) @ (k x T n) per block


@njit(cache=True)
def _fill_normals_at(key, flat, start, count):
    """flat[start:start + count] = values 0..count-1 of stream `key` (no slice views: flat stays C)."""
    for i in range(count):
        flat[start + i] = _normal(key, i)


@njit(cache=True)
def _stacked_bases(bases):
    """(k, T n): column block t is N_t^T, so one product Z @ stacked projects onto every border type."""
    n_types, n, k = bases.shape
    stacked = np.empty((k, n_types * n))
    for t in range(n_types):
        for j in range(n):
            for q in range(k):
                stacked[q, t * n + j] = bases[t, j, q]
    return stacked


@njit(cache=True, fastmath=True)
def _finish_image(image, out_image, delta, first_row, types, type_counts, shared, target, kernel, padding):
    """out_image = image + alpha fold(delta rows); returns alpha. Writes every real pixel once, in order.

    delta (rows, T n) holds Z N_t^T for this image from row `first_row` on: one row per patch, or a
    single row used at every patch when `shared`. Row r, column block t is patch r's noise if its
    border type is t. alpha makes the image's mean squared change 10^(-psnr/10) (`target` = that
    times C H W). The fold writes rows of the output in order, straight from delta (no canvas).
    """
    c, h, w = image.shape
    n = c * kernel * kernel
    per_row = (w + 2 * padding - kernel) // kernel + 1
    n_rows = (h + 2 * padding - kernel) // kernel + 1
    energy = 0.0
    if shared:  # one noise row, repeated at every patch: each type's energy times its count
        for t in range(type_counts.shape[0]):
            if type_counts[t]:
                part = 0.0
                for j in range(n):
                    part += delta[first_row, t * n + j] * delta[first_row, t * n + j]
                energy += type_counts[t] * part
    else:
        for patch in range(types.shape[0]):
            offset = types[patch] * n
            for j in range(n):
                energy += delta[first_row + patch, offset + j] * delta[first_row + patch, offset + j]
    alpha = np.sqrt(target / energy)
    if padding == 0:  # one border type, every patch inside the image: the tight loop (3x faster)
        for ch in range(c):
            for pr in range(n_rows):
                for dy in range(kernel):
                    y = pr * kernel + dy
                    for pc in range(per_row):
                        row = first_row + (0 if shared else pr * per_row + pc)
                        base = (ch * kernel + dy) * kernel
                        left = pc * kernel
                        for dx in range(kernel):
                            out_image[ch, y, left + dx] = image[ch, y, left + dx] + alpha * delta[row, base + dx]
        return alpha
    for ch in range(c):
        for pr in range(n_rows):
            for dy in range(kernel):
                y = pr * kernel + dy - padding
                if y < 0 or y >= h:
                    continue
                for pc in range(per_row):
                    patch = pr * per_row + pc
                    row = first_row + (0 if shared else patch)
                    base = types[patch] * n + (ch * kernel + dy) * kernel
                    left = pc * kernel - padding
                    for dx in range(max(0, -left), min(kernel, w - left)):
                        out_image[ch, y, left + dx] = image[ch, y, left + dx] + alpha * delta[row, base + dx]
    return alpha


@njit(cache=True, parallel=True, fastmath=True)
def _encode_blocks(images, bases, types, z, seed, first_index, psnr, kernel, padding, shared, seeded):
    """Shared body of the two encode kernels: Z given (z) or drawn per image (seeded)."""
    b_count, c, h, w = images.shape
    k = bases.shape[2]
    stacked = _stacked_bases(bases)
    type_counts = np.zeros(bases.shape[0], np.int64)
    for patch in range(types.shape[0]):
        type_counts[types[patch]] += 1
    z_rows = 1 if shared else types.shape[0]
    out = np.empty_like(images)
    alphas = np.empty(b_count)
    target = 10.0 ** (-psnr / 10.0) * (c * h * w)
    n_blocks = (b_count + _BLOCK - 1) // _BLOCK
    for chunk in prange(_CHUNKS):
        zflat = np.zeros(_BLOCK * z_rows * k)  # rows past the last image of a block stay 0
        delta = np.empty((_BLOCK * z_rows, stacked.shape[1]))
        for block in range(chunk, n_blocks, _CHUNKS):
            first = block * _BLOCK
            last = min(first + _BLOCK, b_count)
            for b in range(first, last):
                start = (b - first) * z_rows * k
                if seeded:
                    _fill_normals_at(image_key(seed, first_index + b), zflat, start, z_rows * k)
                else:
                    for r in range(z_rows):
                        for q in range(k):
                            zflat[start + r * k + q] = z[b, r, q]
            np.dot(zflat.reshape((_BLOCK * z_rows, k)), stacked, delta)  # BLAS: every patch of the block
            for b in range(first, last):
                alphas[b] = _finish_image(
                    images[b], out[b], delta, (b - first) * z_rows, types, type_counts, shared, target, kernel, padding
                )
    return out, alphas


def encode_nonoverlap(images, bases, types, z, psnr, kernel, padding, shared):
    """Non-overlapping stems (stride == kernel): x' = x + alpha * fold(Z N_t^T), per image, Z given.

    images (B, C, H, W) float32 in [0, 1] (checked finite before the call); bases (T, n, k): one
    basis per border type (type 0 the interior; border patches of a padded stem use a basis that
    is zero on padded coordinates, trailing columns zero when that type has fewer dimensions);
    types (L,) the type of each patch position; z (B, L, k), or (B, >=1, k) with `shared` (row 0
    used at every patch). alpha per image so that the mean squared change over the image equals
    10^(-psnr/10) (data range 1). Blocks of 16 images: one BLAS product gives every patch's noise,
    then one in-order pass per image writes x' (the patch matrix of the image is never built).
    Returns (x', alpha).
    """
    z = np.ascontiguousarray(z, dtype=np.float64)
    return _encode_blocks(images, bases, types, z, 0, 0, psnr, kernel, padding, shared, False)


def encode_nonoverlap_seeded(images, bases, types, seed, first_index, psnr, kernel, padding, shared):
    """encode_nonoverlap with Z drawn inside, per image, from the counter-based stream (seed, index).

    Equal to encode_nonoverlap(images, ..., draw_normals(seed, first_index, B, L, k), ...), without
    the (B, L, k) noise array: the whole encode is one parallel pass over blocks of images. With
    `shared` only the first k values of each image's stream are drawn (row 0 of the same Z).
    """
    no_z = np.zeros((1, 1, bases.shape[2]))
    return _encode_blocks(images, bases, types, no_z, seed, first_index, psnr, kernel, padding, shared, True)


@njit(cache=True, parallel=True)
def encode_patches(patches, basis, z, psnr):
    """Overlapping stems (flat mode): ciphertext patches P + alpha * Z N^T, alpha per image over (L, n)."""
    b_count, l_count, n = patches.shape
    k = basis.shape[1]
    out = np.empty_like(patches)
    alphas = np.empty(b_count)
    target = 10.0 ** (-psnr / 10.0)
    for b in prange(b_count):
        delta = np.zeros((l_count, n))
        energy = 0.0
        for patch in range(l_count):
            for j in range(n):
                value = 0.0
                for q in range(k):
                    value += z[b, patch, q] * basis[j, q]
                delta[patch, j] = value
                energy += value * value
        alpha = np.sqrt(target / (energy / (l_count * n)))
        alphas[b] = alpha
        for patch in range(l_count):
            for j in range(n):
                out[b, patch, j] = patches[b, patch, j] + alpha * delta[patch, j]
    return out, alphas


@njit(cache=True, parallel=True, fastmath=True)
def patch_cov(images, kernel, stride):
    """Sum over images and patch positions of p p^T and of p: returns (S (n, n), s (n,), count).

    Each thread gathers patches into a block buffer through a table of flat offsets (one indexed
    load per value, no nested 4-D indexing: the gather was the hot spot) and adds buffer^T buffer
    with BLAS; a column of ones in the buffer makes the same product give the patch sums. Memory
    stays O(block * n) instead of materialising every patch.
    """
    b_count, c, h, w = images.shape
    n = c * kernel * kernel
    ho = (h - kernel) // stride + 1
    wo = (w - kernel) // stride + 1
    flat = np.ascontiguousarray(images).reshape(-1)
    offsets = np.empty(n, np.int64)  # flat offset of patch value q from the patch's top-left pixel
    for ch in range(c):
        for y in range(kernel):
            for x in range(kernel):
                offsets[(ch * kernel + y) * kernel + x] = (ch * h + y) * w + x
    block = 2048
    n_chunks = min(b_count, 16)
    partial = np.zeros((n_chunks, n + 1, n + 1))
    for chunk in prange(n_chunks):
        buffer = np.zeros((block, n + 1))
        for row in range(block):
            buffer[row, n] = 1.0
        filled = 0
        for b in range(chunk, b_count, n_chunks):
            for i in range(ho):
                for j in range(wo):
                    base = b * c * h * w + i * stride * w + j * stride
                    for q in range(n):
                        buffer[filled, q] = flat[base + offsets[q]]
                    filled += 1
                    if filled == block:
                        partial[chunk] += buffer.T @ buffer
                        filled = 0
        if filled:
            rest = buffer[:filled]
            partial[chunk] += rest.T @ rest
    total = partial.sum(axis=0)
    return total[:n, :n].copy(), total[n, :n].copy(), b_count * ho * wo
