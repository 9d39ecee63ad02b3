"""nte benchmarks: the encode and patch-covariance kernels against references, same run.

encode: 10,000 28x28 images, 4x4/4 stem, k=8, for each noise layout (shared: one z per image, the
default and the official code's; patch: Z per patch). (a) the kernel given Z vs the anchor's
algorithm in torch (F.unfold -> einsum -> F.fold, same threads, z broadcast over the patches for
shared as the official code does) and vs a per-image NumPy loop given the same Z; (b) the whole
encode, noise included: the fused kernel (Z drawn inside from the counter-based per-image
ziggurat stream) vs a per-image Python loop that draws Z ((1, k) for shared, (L, k) for patch)
from a NumPy Generator seeded by SeedSequence(seed, i) and does unfold -> Z N^T -> scale -> fold
(the issue's reference). Both sides allocate their output inside the timing.
patch_cov: 60,000 images, 4x4 patches stride 2: Numba vs sliding_window_view + matmul.
png_fit_to_range: the projection `encode --png` runs before rounding (200 alternating projections
between [0, 1] and x + span N), 10,000 Fashion-MNIST-like images at 10 dB: the patch-layout blocked
iteration vs the image-layout einsum iteration (fit_to_range_reference, the previous implementation).
Prints `case size ours_s ref_s ratio` in CPU seconds (process time) with ONE thread on each side
(Numba, torch and BLAS), best of several repeats, and the max deviation from the NumPy reference.
"""

from __future__ import annotations

import time

import numba
import numpy as np
import torch
from threadpoolctl import threadpool_limits

from methodkit.tools.nte import kernels
from methodkit.tools.nte.encode import draw_noise, encode, fit_to_range, fit_to_range_reference
from methodkit.tools.nte.key import extract_key
from methodkit.tools.nte.stem import Stem, unfold


def best(fn, repeat=3):
    times = []
    for _ in range(repeat):
        start = time.process_time()
        out = fn()
        times.append(time.process_time() - start)
    return min(times), out


def torch_encode(x, basis, z, psnr):
    xt = torch.from_numpy(x)
    delta = torch.einsum("blk,nk->bnl", torch.from_numpy(z), torch.from_numpy(basis)).expand(-1, -1, 49)
    image = torch.nn.functional.fold(delta, (28, 28), kernel_size=4, stride=4)
    alpha = torch.sqrt(10 ** (-psnr / 10) / image.pow(2).mean(dim=(1, 2, 3), keepdim=True))
    return (xt + alpha * image).numpy()


def loop_encode(x, basis, z, psnr):
    out = np.empty_like(x)
    for i in range(len(x)):
        patches = np.broadcast_to(z[i] @ basis.T, (49, basis.shape[0]))  # z[i]: (49, k) or shared (1, k)
        delta = patches.reshape(7, 7, 4, 4).transpose(0, 2, 1, 3).reshape(1, 28, 28)
        alpha = np.sqrt(10 ** (-psnr / 10) / (delta**2).mean())
        out[i] = x[i] + alpha * delta
    return out


def loop_encode_with_noise(x, basis, seed, psnr, rows):
    """The per-image Python loop of the whole encode, noise drawn per image as the issue describes."""
    out = np.empty_like(x)
    for i in range(len(x)):
        z = np.random.default_rng(np.random.SeedSequence([seed, i])).standard_normal((rows, basis.shape[1]))
        patches = np.broadcast_to(z @ basis.T, (49, basis.shape[0]))
        delta = patches.reshape(7, 7, 4, 4).transpose(0, 2, 1, 3).reshape(1, 28, 28)
        alpha = np.sqrt(10 ** (-psnr / 10) / (delta**2).mean())
        out[i] = x[i] + alpha * delta
    return out


def main():
    numba.set_num_threads(1)
    torch.set_num_threads(1)
    with threadpool_limits(1):
        run()


def run():
    rng = np.random.default_rng(0)
    key = extract_key(Stem(rng.normal(size=(8, 1, 4, 4)), 4))
    n = 10_000
    x = rng.random((n, 1, 28, 28)).astype(np.float32)
    bases, types = key.basis[None], np.zeros(49, np.int64)
    print("case  size  ours_s  ref_s  ratio")
    for layout, rows in (("shared", 1), ("patch", 49)):
        encode_layout(layout, rows, x, key, bases, types)
    patch_cov_case(rng)
    png_case(key)


def png_case(key, n=10_000):
    from methodkit.core.images import load_images

    x = (load_images("fashion-mnist", "test")[0][:n, None] / 255.0).astype(np.float32)  # dark backgrounds: clipping
    cipher = encode(x, key, 10.0, seed=0).x
    ours, fitted = best(lambda: fit_to_range(x, cipher, key), repeat=1)
    ref, expected = best(lambda: fit_to_range_reference(x, cipher, key), repeat=1)
    print(f"png_fit_to_range_vs_einsum_iteration  {n}  {ours:.4f}  {ref:.4f}  {ref / ours:.2f}")
    print(f"# max |ours - reference| = {np.abs(fitted - expected).max():.2e}")


def encode_layout(layout, rows, x, key, bases, types):
    n, shared = len(x), layout == "shared"
    z = draw_noise(0, 0, n, rows, key.k)
    kernels.encode_nonoverlap(x[:2], bases, types, z[:2], 10.0, 4, 0, shared)  # compile outside the timing
    kernels.encode_nonoverlap_seeded(x[:2], bases, types, 0, 0, 10.0, 4, 0, shared)
    ours, (out, _) = best(lambda: kernels.encode_nonoverlap(x, bases, types, z, 10.0, 4, 0, shared), repeat=5)
    ref_torch, torch_out = best(lambda: torch_encode(x, key.basis, z, 10.0))
    ref_loop, loop_out = best(lambda: loop_encode(x, key.basis, z, 10.0), repeat=3)
    print(f"encode_{layout}_vs_torch_unfold_fold  {n}  {ours:.4f}  {ref_torch:.4f}  {ref_torch / ours:.2f}")
    print(f"encode_{layout}_vs_python_loop  {n}  {ours:.4f}  {ref_loop:.4f}  {ref_loop / ours:.2f}")
    print(
        f"# {layout}: max |ours - numpy loop| = {np.abs(out - loop_out).max():.2e}, "
        f"|ours - torch| = {np.abs(out - torch_out).max():.2e}"
    )
    fused, (fused_out, _) = best(
        lambda: kernels.encode_nonoverlap_seeded(x, bases, types, 0, 0, 10.0, 4, 0, shared), repeat=5
    )
    ref_full, _ = best(lambda: loop_encode_with_noise(x, key.basis, 0, 10.0, rows), repeat=3)
    print(f"encode_{layout}_with_noise_vs_python_loop  {n}  {fused:.4f}  {ref_full:.4f}  {ref_full / fused:.2f}")
    same_z = loop_encode(x, key.basis, kernels.draw_normals(0, 0, n, rows, key.k), 10.0)
    print(
        f"# {layout}: fused kernel vs the NumPy loop given the same counter-based Z: "
        f"max |diff| = {np.abs(fused_out - same_z).max():.2e}"
    )


def patch_cov_case(rng):
    m = 60_000
    images = rng.random((m, 1, 28, 28))
    kernels.patch_cov(images[:2], 4, 2)

    def numpy_cov():
        p = unfold(images, 4, 2).reshape(-1, 16)
        return p.T @ p

    ours, (total, _, _) = best(lambda: kernels.patch_cov(images, 4, 2), repeat=3)
    ref, expected = best(numpy_cov, repeat=3)
    print(f"patch_cov_vs_numpy_window_matmul  {m}  {ours:.4f}  {ref:.4f}  {ref / ours:.2f}")
    print(f"# max rel deviation = {np.abs(total - expected).max() / np.abs(expected).max():.2e}")


if __name__ == "__main__":
    main()
