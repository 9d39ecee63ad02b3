"""Numba kernels of nte: encode (unfold -> Z N^T -> scale -> fold), fold-average, patch covariance.

The noise Z is drawn outside (per image from SeedSequence(seed, index)), so the kernels are pure
and the result does not depend on batch size or thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True, fastmath=True)
def encode_nonoverlap(images, basis, z, psnr):
    """Non-overlapping stems (stride == kernel, no padding): x' = x + alpha * fold(Z N^T), per image.

    images (B, C, H, W) float32 in [0, 1] (checked finite before the call); basis (n, k); z (B, L, k);
    alpha per image so that the mean squared change over the image equals 10^(-psnr/10) (data range 1).
    Two passes recompute Z N^T instead of storing it: no allocation per image. Returns (x', alpha).
    """
    b_count, c, h, w = images.shape
    n, k = basis.shape
    kernel = int(np.sqrt(n // c) + 0.5)
    area = kernel * kernel
    per_row = w // kernel
    out = np.empty_like(images)
    alphas = np.empty(b_count)
    target = 10.0 ** (-psnr / 10.0)
    for b in prange(b_count):
        energy = 0.0
        for patch in range(z.shape[1]):
            for j in range(n):
                value = 0.0
                for q in range(k):
                    value += z[b, patch, q] * basis[j, q]
                energy += value * value
        alpha = np.sqrt(target / (energy / (c * h * w)))
        alphas[b] = alpha
        for patch in range(z.shape[1]):
            top = (patch // per_row) * kernel
            left = (patch % per_row) * kernel
            for j in range(n):
                value = 0.0
                for q in range(k):
                    value += z[b, patch, q] * basis[j, q]
                ch = j // area
                rem = j % area
                y = top + rem // kernel
                x = left + rem % kernel
                out[b, ch, y, x] = images[b, ch, y, x] + alpha * value
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
