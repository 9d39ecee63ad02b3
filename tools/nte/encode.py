"""Encoding: add key-subspace noise at a target PSNR (training-free, data-agnostic).

Non-overlapping stems give an ordinary image x' = fold(P + alpha Z N^T). Overlapping stems
give the patch tensor itself ("flat mode", consumed by the authorized model's
forward_patches) plus a fold-averaged `view` for everyone else. `noise="gaussian"` is the
control: white noise at the same PSNR, which must hurt the authorized model too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import DataError, UsageError
from methodkit.tools.nte import kernels
from methodkit.tools.nte.key import Key, restricted_basis
from methodkit.tools.nte.stem import border_masks, fold_average, unfold

NOISES = ("nes", "gaussian")
# shared (default): one z (k,) per image added at every patch, as the official code does (z of shape
# (B, k, 1) broadcast over the L patches); patch: Z (L, k) i.i.d. per patch (the 2.3 text,
# unmarked there, so our reading; measured weaker at 20 dB, docs/nte.md)
LAYOUTS = ("shared", "patch")


@dataclass
class Ciphertext:
    x: np.ndarray | None  # (B, C, H, W) float32 for non-overlapping stems
    patches: np.ndarray | None  # (B, L, n) float32 for overlapping stems
    view: np.ndarray  # what an unauthorized model sees (B, C, H, W)
    alpha: np.ndarray  # noise scale per image
    psnr: np.ndarray  # achieved PSNR per image on the released representation
    certificate: np.ndarray | None  # ||W' (x' - x)||_F per image: the authorized stem's feature change
    # (None when no authorized stem was given: nothing was certified, which is not a certificate of 0)
    border_k: list = field(default_factory=list)  # noise dimensions per border type (padded stems)

    def summary(self) -> dict:
        return {
            "images": int(self.alpha.size),
            "mode": "image" if self.patches is None else "patches",
            "psnr_mean": float(self.psnr.mean()),
            "psnr_min": float(self.psnr.min()),
            "certificate_max": None if self.certificate is None else float(self.certificate.max()),
            "certificate_mean": None if self.certificate is None else float(self.certificate.mean()),
            **({"border_k": self.border_k} if len(self.border_k) > 1 else {}),
        }


def check_images(images: np.ndarray, channels: int, name: str = "images") -> np.ndarray:
    """uint8 (scaled to [0, 1]) or float in [0, 1], shape (B, C, H, W) or (B, H, W) for grey."""
    x = np.asarray(images)
    if x.ndim == 3:
        x = x[:, None]
    if x.ndim != 4:
        raise DataError(f"{name}: expected images of shape (N, C, H, W) or (N, H, W), got {x.shape}")
    if x.shape[1] != channels:
        raise DataError(f"{name}: images have {x.shape[1]} channel(s), the key's stem expects {channels}")
    if x.dtype == np.uint8:
        return (x / 255.0).astype(np.float32)
    x = x.astype(np.float32)
    if not np.isfinite(x).all():
        raise DataError(f"{name}: images contain NaN or infinite values")
    if x.min() < 0 or x.max() > 1:
        raise DataError(
            f"{name}: float images must lie in [0, 1] (got {x.min():.3g}..{x.max():.3g}); pass uint8 or rescale"
        )
    return x


def draw_noise(seed: int, first_index: int, count: int, patches: int, k: int) -> np.ndarray:
    """Z (count, L, k), image i from the counter-based stream of (seed, first_index + i): reproducible per image.

    Our reading of "seeded by SeedSequence(seed, image_index)": the issue's fused kernel draws Z
    inside with a per-image counter-based seed, which a NumPy Generator per image cannot do.
    """
    return kernels.draw_normals(_seed64(seed), first_index, count, patches, k)


def _seed64(seed: int) -> int:
    return int(seed) % (1 << 63)


def _psnr(change: np.ndarray) -> np.ndarray:
    mse = (change.reshape(change.shape[0], -1).astype(np.float64) ** 2).mean(axis=1)
    return 10.0 * np.log10(1.0 / mse)


def encode(
    images: np.ndarray,
    key: Key,
    psnr: float,
    *,
    seed: int = 0,
    noise: str = "nes",
    first_index: int = 0,
    w_pixel: np.ndarray | None = None,
    xp=None,
    layout: str = "shared",
) -> Ciphertext:
    """Encode `images` ([0, 1], (B, C, H, W)) under `key` at `psnr` dB. `w_pixel` (W') gives the certificate.

    `xp` (an array module, e.g. cupy) runs the non-overlapping NES encode on that module instead of
    the Numba kernel; everything else stays on the CPU. `layout` "shared" (default) draws one z per
    image and adds the same N z to every patch (the official code, z of shape (B, k, 1)); "patch"
    draws Z i.i.d. per patch (the issue's 2.3 text, an unmarked reading of the method).
    """
    if not 0 < psnr < 100:
        raise UsageError(f"--psnr must be in (0, 100) dB, got {psnr}")
    if noise not in NOISES:
        raise UsageError(f"--noise must be one of {', '.join(NOISES)}, got {noise!r}")
    if layout not in LAYOUTS:
        raise UsageError(f"--layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    shared = layout == "shared"
    g = key.geometry
    kernel, stride, padding = g["kernel"], g["stride"], g["padding"]
    x = check_images(images, g["c_in"])
    b, c, h, w = x.shape
    for side in (h, w):
        span = side + 2 * padding - kernel
        if span < 0 or span % stride > padding:  # a leftover inside the padding loses no real pixel
            raise DataError(
                f"image side {side} with kernel {kernel}, stride {stride}, padding {padding} leaves trailing "
                "pixels unencodable; crop or pad the images to fit"
            )
    overlapping = stride < kernel
    pad_value = np.asarray(g["mean"], dtype=np.float32)
    if overlapping:
        patches = unfold(_pad(x, padding, pad_value), kernel, stride, 0).astype(np.float32)
    else:
        patches = None
    n_patches = ((h + 2 * padding - kernel) // stride + 1) * ((w + 2 * padding - kernel) // stride + 1)
    border_k: list[int] = []
    if noise == "nes" and not overlapping:
        bases, types = border_bases(key.basis, c, kernel, stride, padding, h, w)
        border_k = [int(np.abs(basis).sum(axis=0).astype(bool).sum()) for basis in bases]
        if xp is None or xp is np:
            cipher, alpha = kernels.encode_nonoverlap_seeded(
                x, bases, types, _seed64(seed), first_index, float(psnr), kernel, padding, shared
            )
        else:  # the array-module twin (CuPy): same noise stream, same arithmetic
            from methodkit.core.backend import to_numpy
            from methodkit.tools.nte import xp_encode

            cipher, alpha = xp_encode.encode_nonoverlap(
                xp, x, bases, types, _seed64(seed), first_index, float(psnr), kernel, padding, shared
            )
            cipher, alpha = to_numpy(cipher), to_numpy(alpha)
        change_patches = unfold(cipher - x, kernel, stride, padding)
        released = cipher - x
        result_x, result_patches, view = cipher, None, cipher
    elif noise == "nes":
        rng_noise = draw_noise(seed, first_index, b, 1 if shared else n_patches, key.k)
        if shared:
            rng_noise = np.ascontiguousarray(np.broadcast_to(rng_noise, (b, n_patches, key.k)))
        cipher, alpha = kernels.encode_patches(patches, key.basis, rng_noise, float(psnr))
        change_patches = cipher - patches
        released = change_patches
        view = _unpad(fold_average(cipher, (b, c, h + 2 * padding, w + 2 * padding), kernel, stride), padding)
        result_x, result_patches = None, cipher
    else:  # white-noise control at the same PSNR, on the released representation
        target = patches if overlapping else x
        white = np.stack(
            [
                np.random.default_rng(np.random.SeedSequence([seed, first_index + i, 1])).standard_normal(
                    target.shape[1:]
                )
                for i in range(b)
            ]
        )
        alpha = np.sqrt(10.0 ** (-psnr / 10.0) / (white.reshape(b, -1) ** 2).mean(axis=1))
        released = (alpha.reshape(-1, *([1] * (white.ndim - 1))) * white).astype(np.float32)
        cipher = target + released
        if overlapping:
            change_patches = released
            view = _unpad(fold_average(cipher, (b, c, h + 2 * padding, w + 2 * padding), kernel, stride), padding)
            result_x, result_patches = None, cipher
        else:
            change_patches = unfold(released, kernel, stride, padding)
            result_x, result_patches, view = cipher, None, cipher
    certificate = None if w_pixel is None else _patch_feature_norm(change_patches, w_pixel)
    return Ciphertext(
        x=None if result_x is None else result_x.astype(np.float32),
        patches=None if result_patches is None else result_patches.astype(np.float32),
        view=np.asarray(view, dtype=np.float32),
        alpha=np.asarray(alpha),
        psnr=_psnr(released),
        certificate=certificate,
        border_k=border_k,
    )


def border_bases(
    basis: np.ndarray, channels: int, kernel: int, stride: int, padding: int, h: int, w: int
) -> tuple[np.ndarray, np.ndarray]:
    """(bases (T, n, k), types (L,)) for a non-overlapping stem; T = 1 without padding."""
    if not padding:
        n_patches = ((h - kernel) // stride + 1) * ((w - kernel) // stride + 1)
        return basis[None], np.zeros(n_patches, dtype=np.int64)
    masks, types = border_masks(channels, kernel, stride, padding, h, w)
    bases = np.zeros((len(masks), *basis.shape))
    for t, mask in enumerate(masks):
        restricted = restricted_basis(basis, mask)
        bases[t, :, : restricted.shape[1]] = restricted
    return bases, types


def _patch_feature_norm(change_patches: np.ndarray, w_pixel: np.ndarray) -> np.ndarray:
    feature_change = np.einsum("bln,cn->blc", change_patches.astype(np.float64), w_pixel)
    return np.sqrt((feature_change**2).reshape(len(change_patches), -1).sum(axis=1))


def feature_change_norm(change: np.ndarray, w_pixel: np.ndarray, kernel: int, stride: int, padding: int) -> np.ndarray:
    """||W' unfold(change)||_F per image: the authorized stem's feature change for an image change."""
    return _patch_feature_norm(unfold(change, kernel, stride, padding), w_pixel)


def _pad(x: np.ndarray, padding: int, value: np.ndarray) -> np.ndarray:
    """Pad with the normalisation mean: a pixel equal to the mean is what the model's zero-padding sees."""
    if not padding:
        return x
    out = np.empty((x.shape[0], x.shape[1], x.shape[2] + 2 * padding, x.shape[3] + 2 * padding), dtype=x.dtype)
    out[:] = value.reshape(1, -1, 1, 1)
    out[:, :, padding:-padding, padding:-padding] = x
    return out


def _unpad(x: np.ndarray, padding: int) -> np.ndarray:
    return x[:, :, padding:-padding, padding:-padding] if padding else x


def fit_to_range(x: np.ndarray, cipher: np.ndarray, key: Key, iterations: int = 200, block: int = 256) -> np.ndarray:
    """A ciphertext inside [0, 1] whose change still lies in the key subspace (for 8-bit PNGs).

    Clipping x' to [0, 1] removes noise on dark or bright pixels and so moves the change out of
    span N. Alternating projections between the box [0, 1] and the affine set {x + span N_t per
    patch} (both convex, x lies in both) converge to a point of their intersection; the noise
    shrinks where it had to be clipped, so the achieved PSNR is above the target (reported).
    Non-overlapping stems only: the patches do not share pixels, so the iteration runs in the patch
    layout (the clip is per pixel), one product with the projector N_t N_t^T per patch type, over
    blocks of `block` images that stay in cache for all the iterations.
    """
    g = key.geometry
    kernel, padding = g["kernel"], g["padding"]
    b, c, h, w = x.shape
    bases, types = border_bases(key.basis, c, kernel, kernel, padding, h, w)
    rows, cols = (h + 2 * padding - kernel) // kernel + 1, (w + 2 * padding - kernel) // kernel + 1
    projectors = np.einsum("tnk,tmk->tnm", bases, bases)  # (T, n, n), symmetric
    groups = [np.flatnonzero(types == t) for t in range(len(bases))]

    def to_patches(image):
        m = len(image)
        canvas = np.pad(image.astype(np.float64), ((0, 0), (0, 0), (padding,) * 2, (padding,) * 2))
        return canvas.reshape(m, c, rows, kernel, cols, kernel).transpose(0, 2, 4, 1, 3, 5).reshape(m, rows * cols, -1)

    def to_image(patches):
        canvas = patches.reshape(len(patches), rows, cols, c, kernel, kernel).transpose(0, 3, 1, 4, 2, 5)
        canvas = canvas.reshape(len(patches), c, rows * kernel, cols * kernel)
        return canvas[:, :, padding : padding + h, padding : padding + w]

    out = np.empty(x.shape, dtype=np.float32)
    for start in range(0, b, block):
        clean = to_patches(x[start : start + block])
        current = np.clip(to_patches(cipher[start : start + block]), 0.0, 1.0)
        delta, inside = np.empty_like(current), np.empty_like(current)
        for _ in range(iterations):
            np.subtract(current, clean, out=delta)
            if len(groups) == 1:
                np.matmul(delta, projectors[0], out=inside)
            else:
                for t, members in enumerate(groups):
                    inside[:, members] = delta[:, members] @ projectors[t]
            np.add(clean, inside, out=current)
            np.clip(current, 0.0, 1.0, out=current)
        out[start : start + block] = to_image(current)
    return out


def fit_to_range_reference(x: np.ndarray, cipher: np.ndarray, key: Key, iterations: int = 200) -> np.ndarray:
    """fit_to_range in the image layout, one einsum pair per iteration over all images at once: the
    reference the tests and bench/nte/bench.py compare the blocked patch-layout iteration with."""
    g = key.geometry
    kernel, padding = g["kernel"], g["padding"]
    b, c, h, w = x.shape
    bases, types = border_bases(key.basis, c, kernel, kernel, padding, h, w)
    rows, cols = (h + 2 * padding - kernel) // kernel + 1, (w + 2 * padding - kernel) // kernel + 1
    per_patch = bases[types]  # (L, n, k)
    current = np.clip(cipher.astype(np.float64), 0.0, 1.0)
    for _ in range(iterations):
        canvas = np.pad(current - x, ((0, 0), (0, 0), (padding,) * 2, (padding,) * 2))
        delta = canvas.reshape(b, c, rows, kernel, cols, kernel).transpose(0, 2, 4, 1, 3, 5).reshape(b, rows * cols, -1)
        inside = np.einsum("lnk,blk->bln", per_patch, np.einsum("lnk,bln->blk", per_patch, delta))
        image = inside.reshape(b, rows, cols, c, kernel, kernel).transpose(0, 3, 1, 4, 2, 5)
        image = image.reshape(b, c, rows * kernel, cols * kernel)[:, :, padding : padding + h, padding : padding + w]
        current = np.clip(x + image, 0.0, 1.0)
    return current.astype(np.float32)
