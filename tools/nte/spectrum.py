"""Spectral misalignment between an authorized stem A and another stem B.

Same geometry: leak(A->B) = ||W'_B N_A||_F^2 / k (noise energy reaching B per unit variance);
snr_leak = alpha^2 leak / E||W'_B (p - p_bar)||^2 (feature noise-to-signal at the PSNR);
mean cos^2 of the principal angles between row(W'_B) and span(N_A); Hoffman-Wielandt gap
sqrt(sum (s_i(A) - s_i(B))^2) <= ||W'_A - W'_B||_F, and ||W'_B N_A||_2 <= ||W'_B - W'_A||_2.
Different geometry: Monte-Carlo ratio E||W'_B unfold_B(delta)||^2 / E||W'_B unfold_B(g)||^2,
delta NTE noise images of A, g white noise of equal energy (> 1: B is more sensitive to NTE noise).
Any geometry, Monte-Carlo (ours, so models of every geometry share one scale): noise_share =
E||P_B u||^2 / E||u||^2, u = B's patches of delta, P_B the projector onto row(W'_B) (the share of
the NTE noise B's stem can see at all; chance = rank / n; for the same geometry the energy-weighted
mean cos^2 of row(W'_B) with span(N_A)); snr_mc = E||W'_B u||^2 / E||W'_B (p - p_bar)||^2, B's
feature noise-to-signal at the PSNR (for the same geometry k * snr_leak up to sampling: the issue's
snr_leak = alpha^2 leak / signal counts the noise per key dimension, E||N z||^2 = k).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.tools.nte.encode import encode
from methodkit.tools.nte.key import Key, extract_key
from methodkit.tools.nte.stem import Stem, unfold


@dataclass
class PairSpectrum:
    a: str
    b: str
    same_geometry: bool
    leak: float | None
    snr_leak: float | None
    mean_cos2: float | None
    hw_gap: float | None
    frobenius_gap: float | None
    spectral_gap: float | None
    leak_spectral: float | None  # ||W'_B N_A||_2
    mc_ratio: float | None  # different geometries (and same, as a check)
    noise_share: float | None = None  # share of the NTE noise in row(W'_B); chance = rank / n
    noise_share_chance: float | None = None
    snr_mc: float | None = None  # B's feature noise-to-signal at the PSNR, any geometry

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _same_geometry(a: Stem, b: Stem) -> bool:
    return (a.kernel, a.stride, a.padding, a.channels) == (b.kernel, b.stride, b.padding, b.channels)


def pair(
    name_a: str,
    stem_a: Stem,
    name_b: str,
    stem_b: Stem,
    *,
    key: Key | None = None,
    clean: np.ndarray | None = None,
    psnr: float = 10.0,
    seed: int = 0,
    mc_images: int = 64,
    layout: str = "shared",
) -> PairSpectrum:
    key = key or extract_key(stem_a)
    wa, wb = stem_a.pixel_matrix(), stem_b.pixel_matrix()
    same = _same_geometry(stem_a, stem_b)
    leak = snr = cos2 = hw = fro = spec = leak2 = None
    if same:
        projected = wb @ key.basis
        leak = float((projected**2).sum() / key.k)
        leak2 = float(np.linalg.norm(projected, 2))
        q_rows, _ = np.linalg.qr(wb.T)  # orthonormal basis of row(W'_B)
        cos = np.linalg.svd(q_rows.T @ key.basis, compute_uv=False)
        cos2 = float(np.mean(cos**2))
        # different channel counts: the smaller stem gets zero rows (its singular values zeros), so
        # both inequalities keep holding (the padded W'_A still has W'_A N_A ~ 0)
        rows = max(wa.shape[0], wb.shape[0])
        wa_full, wb_full = (np.vstack([m, np.zeros((rows - m.shape[0], m.shape[1]))]) for m in (wa, wb))
        sa = np.linalg.svd(wa_full, compute_uv=False)
        sb = np.linalg.svd(wb_full, compute_uv=False)
        hw = float(np.sqrt(((sa - sb) ** 2).sum()))
        fro = float(np.linalg.norm(wa_full - wb_full))
        spec = float(np.linalg.norm(wa_full - wb_full, 2))
    mc = share = chance = snr_mc = None
    if clean is not None:
        sample = clean[:mc_images]
        cipher = encode(sample, key, psnr, seed=seed, layout=layout)
        delta = cipher.view - sample  # NTE noise as an image (fold-averaged for overlapping stems)
        g = np.random.default_rng(np.random.SeedSequence([seed, 99])).standard_normal(delta.shape)
        g *= np.linalg.norm(delta.reshape(len(delta), -1), axis=1).reshape(-1, 1, 1, 1) / np.linalg.norm(
            g.reshape(len(g), -1), axis=1
        ).reshape(-1, 1, 1, 1)
        energy = _feature_energy(stem_b, delta)
        mc = float(energy / _feature_energy(stem_b, g))
        u = unfold(delta.astype(np.float64), stem_b.kernel, stem_b.stride, stem_b.padding)
        rank = np.linalg.matrix_rank(wb)
        rows = np.linalg.svd(wb, full_matrices=False)[2][:rank]  # orthonormal basis of row(W'_B)
        share = float(((u @ rows.T) ** 2).sum() / (u**2).sum())
        chance = rank / wb.shape[1]
        clean_b = unfold(sample.astype(np.float64), stem_b.kernel, stem_b.stride, stem_b.padding)
        signal_b = float((((clean_b - clean_b.mean(axis=(0, 1))) @ wb.T) ** 2).sum(axis=2).mean())
        snr_mc = energy / signal_b if signal_b > 0 else None
        if same:
            alpha2 = float(np.mean(cipher.alpha**2))
            patches = unfold(sample.astype(np.float64), stem_b.kernel, stem_b.stride, stem_b.padding)
            centred = patches - patches.mean(axis=(0, 1))
            signal = float(((centred @ wb.T) ** 2).sum(axis=2).mean())
            snr = alpha2 * leak / signal if signal > 0 else None
    return PairSpectrum(name_a, name_b, same, leak, snr, cos2, hw, fro, spec, leak2, mc, share, chance, snr_mc)


def _feature_energy(stem: Stem, images: np.ndarray) -> float:
    patches = unfold(images.astype(np.float64), stem.kernel, stem.stride, stem.padding)
    return float(((patches @ stem.pixel_matrix().T) ** 2).sum(axis=2).mean())
