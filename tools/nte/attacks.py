"""Reconstruction attacks on NTE ciphertexts, evaluated by feeding the result to unauthorized models.

Filters: blur:sigma, median:3, jpeg:Q (8x8 DCT with the standard luminance table, no Pillow).
Subspace attacks: pca:k (drop the top-k principal directions of ciphertext patches, k by eigengap
when 0), wiener (LMMSE per patch with public clean data: Sigma_n = PSD(Sigma_nte - Sigma_clean)),
geig (subspace estimate from generalised eigenvectors of (Sigma_nte, Sigma_clean), with its
smallest principal cosine to the true key). Learned attacks (denoiser, --retrain) are in learned.py.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, ndimage
from scipy.fft import dctn, idctn

from methodkit.core.errors import UsageError
from methodkit.tools.nte import kernels
from methodkit.tools.nte.stem import fold_average, unfold

# JPEG Annex K luminance quantisation table.
_LUMA = np.array(
    [
        [16, 11, 10, 16, 24, 40, 51, 61],
        [12, 12, 14, 19, 26, 58, 60, 55],
        [14, 13, 16, 24, 40, 57, 69, 56],
        [14, 17, 22, 29, 51, 87, 80, 62],
        [18, 22, 37, 56, 68, 109, 103, 77],
        [24, 35, 55, 64, 81, 104, 113, 92],
        [49, 64, 78, 87, 103, 121, 120, 101],
        [72, 92, 95, 98, 112, 100, 103, 99],
    ],
    dtype=np.float64,
)


def blur(x: np.ndarray, sigma: float) -> np.ndarray:
    return ndimage.gaussian_filter(x, sigma=(0, 0, sigma, sigma), mode="reflect").astype(np.float32)


def median(x: np.ndarray, size: float) -> np.ndarray:
    s = int(size)
    return ndimage.median_filter(x, size=(1, 1, s, s), mode="reflect").astype(np.float32)


def jpeg(x: np.ndarray, quality: int) -> np.ndarray:
    """Grey-level JPEG round trip: 8x8 blocks, orthonormal DCT-II, quantise with the IJG-scaled table."""
    if not 1 <= quality <= 100:
        raise UsageError(f"jpeg quality must be in 1..100, got {quality}")
    scale = 5000 / quality if quality < 50 else 200 - 2 * quality
    table = np.clip(np.floor((_LUMA * scale + 50) / 100), 1, 255)
    b, c, h, w = x.shape
    ph, pw = -h % 8, -w % 8
    pixels = np.pad(np.clip(x, 0, 1) * 255.0 - 128.0, ((0, 0), (0, 0), (0, ph), (0, pw)), mode="edge")
    blocks = pixels.reshape(b, c, (h + ph) // 8, 8, (w + pw) // 8, 8).transpose(0, 1, 2, 4, 3, 5)
    coefficients = dctn(blocks, axes=(-2, -1), norm="ortho")
    restored = idctn(np.round(coefficients / table) * table, axes=(-2, -1), norm="ortho")
    image = restored.transpose(0, 1, 2, 4, 3, 5).reshape(b, c, h + ph, w + pw)[:, :, :h, :w]
    return (np.clip(np.round(image + 128.0), 0, 255) / 255.0).astype(np.float32)


def patch_covariance(x: np.ndarray, kernel: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """(mean (n,), covariance (n, n)) of all patches of x (Numba kernel)."""
    total, sums, count = kernels.patch_cov(np.ascontiguousarray(x, dtype=np.float64), kernel, stride)
    mean = sums / count
    return mean, total / count - np.outer(mean, mean)


def _psd(matrix: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eigh((matrix + matrix.T) / 2)
    return (vectors * np.clip(values, 0, None)) @ vectors.T


def wiener_fit(x_nte: np.ndarray, clean_public: np.ndarray, kernel: int, stride: int):
    """The LMMSE map fitted on ciphertext and public statistics; returns a function images -> images.

    x_hat = mu_c + S_c (S_c + S_n)^-1 (p - mu_n) per patch, fold-averaged, S_n = PSD(S_nte - S_c).
    The same map can be applied to other images (the --retrain attack passes clean training data
    through it).
    """
    mu_c, s_clean = patch_covariance(clean_public, kernel, stride)
    mu_n, s_nte = patch_covariance(x_nte, kernel, stride)
    s_noise = _psd(s_nte - s_clean)
    gain = s_clean @ np.linalg.pinv(s_clean + s_noise)

    def apply(x: np.ndarray) -> np.ndarray:
        patches = unfold(x.astype(np.float64), kernel, stride)
        restored = mu_c + (patches - mu_n) @ gain.T
        return np.clip(fold_average(restored, x.shape, kernel, stride), 0, 1).astype(np.float32)

    return apply


def wiener(x_nte: np.ndarray, clean_public: np.ndarray, kernel: int, stride: int) -> np.ndarray:
    """LMMSE per patch: x_hat = mu + S_c (S_c + S_n)^-1 (p - mu), then fold-average."""
    return wiener_fit(x_nte, clean_public, kernel, stride)(x_nte)


def noise_energy_per_patch(x_nte: np.ndarray, clean_public: np.ndarray, kernel: int, stride: int) -> float:
    """E||delta_patch||^2 estimated as tr(S_nte) - tr(S_clean) (the attacker's view of the noise level)."""
    _, s_clean = patch_covariance(clean_public, kernel, stride)
    _, s_nte = patch_covariance(x_nte, kernel, stride)
    return float(max(np.trace(s_nte) - np.trace(s_clean), 0.0))


def geig_subspace(x_nte: np.ndarray, clean_public: np.ndarray, kernel: int, stride: int, k: int) -> np.ndarray:
    """Top-k generalised eigenvectors of (Sigma_nte, Sigma_clean), orthonormalised (n, k)."""
    _, s_clean = patch_covariance(clean_public, kernel, stride)
    _, s_nte = patch_covariance(x_nte, kernel, stride)
    ridge = 1e-6 * np.trace(s_clean) / s_clean.shape[0]
    regularised = s_clean + ridge * np.eye(s_clean.shape[0])
    _, vectors = linalg.eigh(s_nte, regularised)
    # S_nte v = l S_clean v  =>  S_noise v = (l - 1) S_clean v: S_clean v lies in the noise subspace.
    q, _ = np.linalg.qr(regularised @ vectors[:, -k:])
    return q


def project_out(x: np.ndarray, subspace: np.ndarray, kernel: int, stride: int) -> np.ndarray:
    """Remove the component of every patch inside span(subspace), then fold-average."""
    patches = unfold(x.astype(np.float64), kernel, stride)
    mean = patches.mean(axis=(0, 1))
    centred = patches - mean
    cleaned = centred - (centred @ subspace) @ subspace.T + mean
    return np.clip(fold_average(cleaned, x.shape, kernel, stride), 0, 1).astype(np.float32)


def pca_subspace(x_nte: np.ndarray, kernel: int, stride: int, k: int = 0) -> np.ndarray:
    """Top-k principal directions of ciphertext patches (k = largest eigengap when 0), (n, k)."""
    _, cov = patch_covariance(x_nte, kernel, stride)
    values, vectors = np.linalg.eigh(cov)
    values, vectors = values[::-1], vectors[:, ::-1]
    if k <= 0:
        gaps = values[:-1] / np.maximum(values[1:], 1e-12)
        k = int(np.argmax(gaps[: len(gaps) // 2 + 1])) + 1
    return vectors[:, :k]


def pca(x_nte: np.ndarray, kernel: int, stride: int, k: int = 0) -> tuple[np.ndarray, int]:
    """Drop the top-k principal directions of ciphertext patches (k = largest eigengap when 0)."""
    subspace = pca_subspace(x_nte, kernel, stride, k)
    return project_out(x_nte, subspace, kernel, stride), subspace.shape[1]


def smallest_principal_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """cos of the largest principal angle between span(a) and span(b) (orthonormal columns)."""
    s = np.linalg.svd(a.T @ b, compute_uv=False)
    return float(s.min()) if s.size else 0.0


FILTERS = {"blur": blur, "median": median, "jpeg": lambda x, q: jpeg(x, int(q))}
METHODS = ("blur", "median", "jpeg", "pca", "wiener", "geig", "denoiser")

# The covariance attacks eigendecompose an (n, n) patch covariance, n = C * kernel^2: beyond this
# the eigh alone takes minutes and gigabytes, which no 8-bit image patch needs.
MAX_PATCH_DIM = 4096


def check_kernel(kernel: int, view_shape: tuple) -> int:
    """The patch dimension C * kernel^2 after checking that `kernel` tiles the (C, H, W) images."""
    c, h, w = view_shape
    if kernel > min(h, w):
        raise UsageError(f"--kernel {kernel} exceeds the {h}x{w} images")
    if h % kernel or w % kernel:
        raise UsageError(f"--kernel {kernel} does not tile the {h}x{w} images (pick a divisor of both sides)")
    n = c * kernel * kernel
    if n > MAX_PATCH_DIM:
        raise UsageError(f"--kernel {kernel}: patch dimension {c}x{kernel}x{kernel} = {n} exceeds {MAX_PATCH_DIM}")
    return n


def parse_method(method: str, view_shape: tuple, kernel: int) -> tuple[str, float | int | None]:
    """'name[:value]' -> (name, value checked for that attack, None when left to the default)."""
    name, _, value = method.partition(":")
    if name not in METHODS:
        raise UsageError(f"--method: unknown attack '{name}' (known: {', '.join(METHODS)})")
    if name in FILTERS:
        example = {"blur": 1, "median": 3, "jpeg": 75}[name]
        if not value:
            raise UsageError(f"--method {name} needs a value, e.g. {name}:{example}")
        return name, _filter_value(name, value)
    if name == "wiener" and value:
        raise UsageError(f"--method wiener takes no value, got '{value}'")
    n = check_kernel(kernel, view_shape)
    if not value:
        return name, None
    low = 0 if name == "pca" else 1  # pca:0 picks k by the eigengap
    try:
        k = int(value)
    except ValueError:
        k = None
    if k is None or not low <= k <= n:
        raise UsageError(
            f"--method {name}: K must be a whole number in {low}..{n} (patch dimension at --kernel {kernel}), got '{value}'"
        )
    return name, k


def _filter_value(name: str, value: str) -> float | int:
    # messages quote the value apart from the name: "name:value:" would read as a :emoji: code on stderr
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if name == "blur":
        if not (np.isfinite(number) and number > 0):
            raise UsageError(f"--method blur: SIGMA must be a positive number, got '{value}'")
        return number
    if name == "median":
        if not (np.isfinite(number) and number == int(number) and number >= 1):
            raise UsageError(f"--method median: SIZE must be a whole number >= 1, got '{value}'")
        return int(number)
    if not (np.isfinite(number) and number == int(number) and 1 <= number <= 100):
        raise UsageError(f"--method jpeg: Q must be a whole number in 1..100, got '{value}'")
    return int(number)
