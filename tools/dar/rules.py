"""Rules (dense cells of a subspace), their matching, and the test-time operators T_kappa.

A spatial rule is a w x w pixel window with one interval per pixel (in [0, 1] units); a frequency
rule is a b x b block of orthonormal 2-D DCT-II coefficients with intervals in z units (with the
train mean/sd used). T_kappa moves each coordinate towards the cell centre m:
T(x)_d = m_d + clip(x_d - m_d, -kappa h_d, kappa h_d); kappa = 0 sets it to the centre.
A ball rule (`--discover kmeans`) is a k-means centre c with a radius r instead of a box; its
operator shrinks the offset: T(x) = c + (x - c) * min(1, kappa r / ||x - c||).
A whitened rule (`--op whitened`) is a box in z-scored principal directions of the low-frequency
DCT band (1 <= u + v <= H/2): each direction is a unit image in pixel space (the inverse DCT of a
band principal component), so the coordinates are linear in the pixels and the operator moves the
image along exactly those directions (alternating with the clip to [0, 1] until the coordinates
hold); every other direction of the image is left as it was.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field

import numpy as np

from methodkit.core.errors import DataError, UsageError
from methodkit.tools.dar import kernels

Z_RANGE = (-3.0, 3.0)  # frequency coordinates are quantised on this z range, tails clipped
OPS = ("spatial", "frequency", "whitened")


@dataclass
class Rule:
    op: str  # spatial | frequency | whitened
    lo: list  # per coordinate, [0, 1] pixels (spatial) or z units (frequency, whitened)
    hi: list
    window: list | None = None  # [row, col, w] (in pooled cells when scale > 1)
    scale: int = 1  # spatial: the window lies on the image average-pooled by scale x scale blocks
    coeffs: list | None = None  # [[u, v], ...]
    mean: list | None = None  # train mean/sd of the coefficients (frequency) or projections (whitened)
    sd: list | None = None
    components: list | None = None  # whitened: indices of the band principal components
    directions: list | None = None  # whitened: one unit image (H*W values, row-major) per component
    support: float = 0.0
    entropy: float = 0.0
    members: int = 0
    pool: int = 0  # non-target members for the target it was ranked for
    target: int | None = None
    cost: float = 0.0
    near: int = 0  # non-members within the isolation margin of the cell (near-duplicates keeping their labels)
    isolation: float = 0.0  # members / (members + near)
    shape: str = "box"  # box (CLIQUE cell) | ball (k-means centre + radius)
    centre: list | None = None
    radius: float | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, record: dict, name: str = "rule") -> Rule:
        try:
            rule = cls(**{k: record[k] for k in record if k in cls.__dataclass_fields__})
        except TypeError as exc:
            raise DataError(f"{name}: not a dar rule ({exc})") from None
        if rule.op not in OPS or len(rule.lo) != len(rule.hi):
            raise DataError(f"{name}: not a dar rule (op {rule.op!r}, {len(rule.lo)} lo / {len(rule.hi)} hi)")
        if rule.op == "spatial" and not rule.window:
            raise DataError(f"{name}: spatial rule without a window")
        if rule.op == "frequency" and not (rule.coeffs and rule.mean and rule.sd):
            raise DataError(f"{name}: frequency rule without coeffs/mean/sd")
        if rule.op == "whitened" and not (
            rule.directions and rule.mean and rule.sd and len(rule.directions) == len(rule.lo) == len(rule.sd)
        ):
            raise DataError(f"{name}: whitened rule without one direction, mean and sd per coordinate")
        if rule.shape not in ("box", "ball") or (rule.shape == "ball" and (rule.centre is None or not rule.radius)):
            raise DataError(f"{name}: shape must be box, or ball with centre and radius")
        return rule


@functools.lru_cache(maxsize=8)
def dct_matrix(n: int) -> np.ndarray:
    """Orthonormal DCT-II basis D (n x n): coefficients = D x D^T, inverse = D^T c D."""
    k = np.arange(n)[:, None]
    i = np.arange(n)[None, :]
    d = np.cos(np.pi * (2 * i + 1) * k / (2 * n)) * np.sqrt(2.0 / n)
    d[0] /= np.sqrt(2.0)
    return d


def dct2(x: np.ndarray) -> np.ndarray:
    d = dct_matrix(x.shape[-1])
    return d @ x @ d.T


def idct2(c: np.ndarray) -> np.ndarray:
    d = dct_matrix(c.shape[-1])
    return d.T @ c @ d


def pooled(x_u8: np.ndarray, scale: int) -> np.ndarray:
    """Images average-pooled by scale x scale blocks (edge rows/columns that fill no block dropped),
    rounded to uint8 so the kernel, `satisfies` and the operator quantise the same values."""
    if scale == 1:
        return x_u8
    n, h, w = x_u8.shape
    blocks = x_u8[:, : h // scale * scale, : w // scale * scale].reshape(n, h // scale, scale, w // scale, scale)
    return np.rint(blocks.mean(axis=(2, 4))).astype(np.uint8)


def _directions(rule: Rule, side: int) -> np.ndarray:
    a = np.asarray(rule.directions, dtype=np.float64)
    if a.shape[1] != side * side:
        raise DataError(f"rule directions have {a.shape[1]} pixels, the images {side}x{side}")
    return a


def coordinates(x_u8: np.ndarray, rule: Rule) -> np.ndarray:
    """The rule's subspace coordinates (N, d): pixels (or block means) in [0, 1], or z-scored DCT
    coefficients, or z-scored projections on the whitened rule's directions."""
    if rule.op == "whitened":
        flat = x_u8.reshape(len(x_u8), -1) / 255.0
        return (flat @ _directions(rule, x_u8.shape[1]).T - np.asarray(rule.mean)) / np.asarray(rule.sd)
    if rule.op == "spatial":
        r, c, w = rule.window
        return pooled(x_u8, rule.scale)[:, r : r + w, c : c + w].reshape(len(x_u8), -1) / 255.0
    coeffs = dct2(x_u8 / 255.0)
    values = np.stack([coeffs[:, u, v] for u, v in rule.coeffs], axis=1)
    return (values - np.asarray(rule.mean)) / np.asarray(rule.sd)


def distance(z: np.ndarray, rule: Rule) -> np.ndarray:
    """L2 distance of subspace coordinates z (N, d) to the rule's cell (box) or ball; 0 inside."""
    if rule.shape == "ball":
        return np.maximum(np.linalg.norm(z - np.asarray(rule.centre), axis=1) - rule.radius, 0.0)
    outside = np.maximum(np.asarray(rule.lo) - z, 0.0) + np.maximum(z - np.asarray(rule.hi), 0.0)
    return np.linalg.norm(outside, axis=1)


def satisfies(x_u8: np.ndarray, rule: Rule) -> np.ndarray:
    """Boolean per image: inside the rule's cell (half-open intervals, the last level closed) or ball."""
    if rule.shape == "ball":
        return np.linalg.norm(coordinates(x_u8, rule) - np.asarray(rule.centre), axis=1) <= rule.radius
    if rule.op == "spatial":
        r, c, w = rule.window
        # level l of xi holds pixels v with l/xi <= v/256 < (l+1)/xi (the kernel's quantisation)
        lo = np.ceil(np.asarray(rule.lo) * 256 - 1e-9).clip(0, 255).astype(np.int64)
        hi = (np.ceil(np.asarray(rule.hi) * 256 - 1e-9) - 1).clip(0, 255).astype(np.int64)
        return kernels.match_window(np.ascontiguousarray(pooled(x_u8, rule.scale)), r, c, w, lo, hi)
    if rule.op == "whitened":  # tail cells end at the most extreme train value (stored in lo/hi)
        z = coordinates(x_u8, rule)
        return ((z >= np.asarray(rule.lo)) & (z < np.asarray(rule.hi))).all(axis=1)
    # z is clipped to the quantisation range [-3, 3) so the tail levels hold the tails (as in discover)
    z = np.clip(coordinates(x_u8, rule), Z_RANGE[0], Z_RANGE[1] - 1e-9)
    lo, hi = np.asarray(rule.lo), np.asarray(rule.hi)
    return ((z >= lo) & (z < hi)).all(axis=1)


def check_strength(kappa: float, blend: float) -> None:
    """T_kappa is defined for kappa in [0, 1] (cell centre .. minimal projection), blend likewise."""
    if not 0 <= kappa <= 1:
        raise UsageError(f"--kappa must be in [0, 1] (0: cell centre, 1: minimal projection), got {kappa}")
    if not 0 <= blend <= 1:
        raise UsageError(f"--blend must be in [0, 1] (partial application), got {blend}")


def apply(x_u8: np.ndarray, rule: Rule, kappa: float = 0.5, blend: float = 1.0, dct=None) -> np.ndarray:
    """T_kappa of every image (uint8 out), changing only the rule's subspace; `blend` < 1 is partial.
    `dct`: the images' DCT-II (of x / 255) when the caller has it (frequency rules; `discover` prices
    every candidate on the same images, so it transforms them once instead of twice per rule)."""
    lo, hi = np.asarray(rule.lo), np.asarray(rule.hi)
    centre, half = (lo + hi) / 2, (hi - lo) / 2
    if rule.op == "frequency" and rule.shape == "box":
        coeffs = dct2(x_u8 / 255.0) if dct is None else dct.copy()
        values = np.stack([coeffs[:, u, v] for u, v in rule.coeffs], axis=1)
        z = (values - np.asarray(rule.mean)) / np.asarray(rule.sd)
    else:
        z = coordinates(x_u8, rule)
    if rule.shape == "ball":
        centre = np.asarray(rule.centre)
        norm = np.maximum(np.linalg.norm(z - centre, axis=1, keepdims=True), 1e-12)
        moved = centre + (z - centre) * np.minimum(1.0, kappa * rule.radius / norm)
    else:
        moved = centre + np.clip(z - centre, -kappa * half, kappa * half)
    target = z + blend * (moved - z)
    if rule.op == "whitened":
        return _move_along(x_u8, rule, target)
    out = x_u8.astype(np.float64) / 255.0
    if rule.op == "spatial" and rule.scale > 1:
        return _shift_blocks(x_u8, rule, target)
    if rule.op == "spatial":
        r, c, w = rule.window
        out[:, r : r + w, c : c + w] = target.reshape(-1, w, w)
    else:
        coeffs = coeffs if rule.shape == "box" else dct2(out)
        for j, (u, v) in enumerate(rule.coeffs):
            coeffs[:, u, v] = target[:, j] * rule.sd[j] + rule.mean[j]
        out = idct2(coeffs)
    return np.clip(np.rint(out * 255), 0, 255).astype(np.uint8)


def _move_along(x_u8: np.ndarray, rule: Rule, target: np.ndarray) -> np.ndarray:
    """Whitened operator: the rule's coordinates moved to `target` (z units)."""
    return project_to(x_u8, _directions(rule, x_u8.shape[1]), np.asarray(rule.mean), np.asarray(rule.sd), target)


def project_to(x_u8: np.ndarray, a: np.ndarray, mean: np.ndarray, sd: np.ndarray, target: np.ndarray,
               rounds: int = 50) -> np.ndarray:  # fmt: skip
    """Add the (orthonormal) directions `a` so the images' z-coordinates (projection - mean) / sd reach
    `target`, clip to [0, 1], and repeat on what the clip undid (alternating projections onto the two
    convex sets {coordinates = target} and [0, 1]^pixels) until they hold within 1e-4 z; every
    direction orthogonal to `a` is left as it was (up to the clip and the uint8 rounding)."""
    out = x_u8.reshape(len(x_u8), -1) / 255.0
    goal = target * sd + mean  # raw projections wanted
    for _ in range(rounds):
        gap = goal - out @ a.T
        if np.abs(gap / sd).max(initial=0.0) < 1e-4:
            break
        out = np.clip(out + gap @ a, 0.0, 1.0)
    return np.clip(np.rint(out * 255), 0, 255).astype(np.uint8).reshape(x_u8.shape)


def _shift_blocks(x_u8: np.ndarray, rule: Rule, target: np.ndarray) -> np.ndarray:
    """Pooled-window operator: shift every pixel of each block of the window by the same amount so the
    block mean becomes the target (texture inside the block kept); pixels clipped at 0 or 255 pass
    the remainder to the block's other pixels over a few rounds."""
    r, c, w = rule.window
    s = rule.scale
    out = x_u8.astype(np.float64)
    region = out[:, r * s : (r + w) * s, c * s : (c + w) * s].reshape(len(x_u8), w, s, w, s)
    goal = (target.reshape(-1, w, w) * 255.0)[:, :, None, :, None]
    for _ in range(4):
        gap = goal - region.mean(axis=(2, 4), keepdims=True)
        free = np.where(gap > 0, region < 255, region > 0)
        share = np.maximum(free.sum(axis=(2, 4), keepdims=True), 1)
        region = np.clip(region + free * gap * (s * s) / share, 0, 255)
    out[:, r * s : (r + w) * s, c * s : (c + w) * s] = region.reshape(len(x_u8), w * s, w * s)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def badnets(x_u8: np.ndarray) -> np.ndarray:
    """BadNets: a 3x3 white patch at the bottom-right corner."""
    out = x_u8.copy()
    out[:, -4:-1, -4:-1] = 255
    return out


def blended(x_u8: np.ndarray, alpha: float = 0.2, seed: int = 12345) -> np.ndarray:
    """Blended: a fixed uniform-noise pattern mixed in with weight alpha."""
    pattern = np.random.default_rng(seed).random(x_u8.shape[1:])
    return np.clip(np.rint(((1 - alpha) * x_u8 / 255.0 + alpha * pattern) * 255), 0, 255).astype(np.uint8)


BASELINE_TRIGGERS = {"badnets": badnets, "blended": blended}
