"""Numba kernels of nte: encode (unfold -> Z N^T -> scale -> fold), fold-average, patch covariance.

The noise Z comes from a counter-based generator (splitmix64 of (seed, image index, counter), then
Box-Muller): value i of image j depends only on (seed, j, i), so the result does not depend on batch
size, thread count or where the draw happens (inside the fused kernel or in draw_normals).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TWO_POW_53 = 1.0 / 9007199254740992.0


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


@njit(cache=True, fastmath=False)
def _fill_normals(key, out):
    """out[:] ~ N(0, 1): Box-Muller on splitmix64(key + counter) pairs; value i depends only on (key, i)."""
    size = out.size
    flat = out.ravel()
    for pair in range((size + 1) // 2):
        bits1 = _splitmix(key + np.uint64(2 * pair))
        bits2 = _splitmix(key + np.uint64(2 * pair + 1))
        u1 = (float(bits1 >> np.uint64(11)) + 1.0) * _TWO_POW_53  # (0, 1]
        u2 = float(bits2 >> np.uint64(11)) * _TWO_POW_53
        radius = np.sqrt(-2.0 * np.log(u1))
        flat[2 * pair] = radius * np.cos(2.0 * np.pi * u2)
        if 2 * pair + 1 < size:
            flat[2 * pair + 1] = radius * np.sin(2.0 * np.pi * u2)


@njit(cache=True, parallel=True)
def draw_normals(seed, first_index, count, rows, cols):
    """Z (count, rows, cols): image i from the counter-based stream of (seed, first_index + i)."""
    out = np.empty((count, rows, cols))
    for i in prange(count):
        _fill_normals(image_key(seed, first_index + i), out[i])
    return out


@njit(cache=True, fastmath=True)
def _transpose_bases(bases):
    n_types, n, k = bases.shape
    transposed = np.empty((n_types, k, n))  # (k, n) per type: the inner loop runs over contiguous n
    for t in range(n_types):
        for j in range(n):
            for q in range(k):
                transposed[t, q, j] = bases[t, j, q]
    return transposed


@njit(cache=True, fastmath=True)
def _encode_image(images, out, b, transposed, types, zb, target, kernel, padding):
    """x'[b] = x[b] + alpha fold(Z N_t^T); returns alpha. zb: (L, k) noise of image b."""
    _, c, h, w = images.shape
    n_types, k, n = transposed.shape
    l_count = types.shape[0]
    per_row = (w + 2 * padding - kernel) // kernel + 1
    delta = np.zeros((l_count, n))
    energy = 0.0
    for patch in range(l_count):
        basis = transposed[types[patch]]
        row = delta[patch]
        for q in range(k):
            weight = zb[patch, q]
            for j in range(n):
                row[j] += weight * basis[q, j]
        for j in range(n):
            energy += row[j] * row[j]
    alpha = np.sqrt(target / energy)
    for patch in range(l_count):
        top = (patch // per_row) * kernel - padding
        left = (patch % per_row) * kernel - padding
        j = 0
        for ch in range(c):
            for dy in range(kernel):
                y = top + dy
                for dx in range(kernel):
                    x = left + dx
                    if padding == 0 or (0 <= y < h and 0 <= x < w):
                        out[b, ch, y, x] = images[b, ch, y, x] + alpha * delta[patch, j]
                    j += 1
    return alpha


@njit(cache=True, parallel=True, fastmath=True)
def encode_nonoverlap(images, bases, types, z, psnr, kernel, padding):
    """Non-overlapping stems (stride == kernel): x' = x + alpha * fold(Z N_t^T), per image, Z given.

    images (B, C, H, W) float32 in [0, 1] (checked finite before the call); bases (T, n, k): one
    basis per border type (type 0 the interior; border patches of a padded stem use a basis that
    is zero on padded coordinates, trailing columns zero when that type has fewer dimensions);
    types (L,) the type of each patch position; z (B, L, k). alpha per image so that the mean
    squared change over the image equals 10^(-psnr/10) (data range 1). One pass per image into a
    small (L, n) buffer: the patch matrix of the image is never materialised. Returns (x', alpha).
    """
    _, c, h, w = images.shape
    transposed = _transpose_bases(bases)
    out = images.copy()
    alphas = np.empty(images.shape[0])
    target = 10.0 ** (-psnr / 10.0) * (c * h * w)
    for b in prange(images.shape[0]):
        alphas[b] = _encode_image(images, out, b, transposed, types, z[b], target, kernel, padding)
    return out, alphas


@njit(cache=True, parallel=True, fastmath=True)
def encode_nonoverlap_seeded(images, bases, types, seed, first_index, psnr, kernel, padding):
    """encode_nonoverlap with Z drawn inside, per image, from the counter-based stream (seed, index).

    Equal to encode_nonoverlap(images, ..., draw_normals(seed, first_index, B, L, k), ...), without
    the (B, L, k) noise array: the whole encode is one parallel pass over the images.
    """
    _, c, h, w = images.shape
    k = bases.shape[2]
    transposed = _transpose_bases(bases)
    out = images.copy()
    alphas = np.empty(images.shape[0])
    target = 10.0 ** (-psnr / 10.0) * (c * h * w)
    for b in prange(images.shape[0]):
        zb = np.empty((types.shape[0], k))
        _fill_normals(image_key(seed, first_index + b), zb)
        alphas[b] = _encode_image(images, out, b, transposed, types, zb, target, kernel, padding)
    return out, alphas


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


@njit(cache=True, parallel=True)
def patch_cov(images, kernel, stride):
    """Sum over images and patch positions of p p^T and of p: returns (S (n, n), s (n,), count).

    Each thread gathers patches into a block buffer and adds buffer^T buffer with BLAS, so
    memory stays O(block * n) instead of materialising every patch.
    """
    b_count, c, h, w = images.shape
    n = c * kernel * kernel
    ho = (h - kernel) // stride + 1
    wo = (w - kernel) // stride + 1
    block = 2048
    n_chunks = min(b_count, 16)
    partial = np.zeros((n_chunks, n, n))
    partial_sum = np.zeros((n_chunks, n))
    for chunk in prange(n_chunks):
        buffer = np.empty((block, n))
        filled = 0
        for b in range(chunk, b_count, n_chunks):
            for i in range(ho):
                for j in range(wo):
                    idx = 0
                    for ch in range(c):
                        for y in range(kernel):
                            for x in range(kernel):
                                buffer[filled, idx] = images[b, ch, i * stride + y, j * stride + x]
                                idx += 1
                    filled += 1
                    if filled == block:
                        partial[chunk] += buffer.T @ buffer
                        partial_sum[chunk] += buffer.sum(axis=0)
                        filled = 0
        if filled:
            rest = buffer[:filled]
            partial[chunk] += rest.T @ rest
            partial_sum[chunk] += rest.sum(axis=0)
    return partial.sum(axis=0), partial_sum.sum(axis=0), b_count * ho * wo
