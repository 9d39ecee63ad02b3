"""What defeats the LMMSE / Wiener reconstruction? (issue 38 item 6; docs/nte.md "Against adaptive
reconstruction").

Every encoding variant keeps the authorized stem's features exactly (its change lies in null(W') of
pcnn-p4c8-s0, 4x4/4 stem, n = 16, k = 8); each is measured, at the same real PSNR, against every
`nte-encode attack` method and the 8-bit PNG path, on the other-seed model (pcnn-p4c8-s1) and
cnn3c16-s0. Variants:
  shared, patch          the tool's two layouts (one z per image / z per patch)
  sub4-low, sub4-high    noise in 4 of the 8 null directions: the ones of least / most clean variance
  shaped                 z ~ N(0, N^T S_c N): noise with the clean data's covariance inside the null space
  replace                content-correlated: the image's own null component (about the public mean patch)
                         is removed and shared noise added: the ciphertext's null component is independent
                         of the image; replace-patch: the same with noise drawn per patch
  swap                   content-correlated: the null component of another image of the set (a
                         permutation), scaled to the PSNR
and one attack that is not in `attack`, the bound for every variant: `oracle`, the linear regression
of the null component on the row component (E[x | W'x] fitted on public clean data with the TRUE key):
whatever is added in the null space, W'x' = W'x, so this attacker sees the same thing every time.
Two adaptive attackers who know the scheme but not the key estimate the key first, then regress as
the oracle does: `diffkey` (the 8 least-variance directions of within-image differences of patches:
one z per image cancels there), `pca8key` (the top 8 principal directions of ciphertext patches) and
`fitkey` (fits S_nte = P S_c P + s2 N N^T, the covariance the `replace` scheme produces, for N).
The PNG path: fit_to_range (the tool's alternating projections into [0, 1]) then 8-bit rounding; `qaware`
then alternates rounding with the projection onto x + span N (12 rounds) and keeps the round with
the smallest feature change (quantisation-aware encoding).

  OMP_NUM_THREADS=1 NTE_ZOO=DIR python -P bench/nte/defeat_wiener.py > bench/nte/defeat_wiener.txt
DIR holds pcnn-p4c8-s0/-s1 and cnn3c16-s0 from `nte-encode zoo` (20,000 train images x 3 epochs;
bench/nte/threat.sh builds them). Environment: NTE_TEST (2000), NTE_PUBLIC (5000, train images
50,000+, disjoint from the zoo's first 20,000), NTE_PSNR (10), NTE_VARIANTS, NTE_ATTACKS, NTE_DENOISER_EPOCHS (3).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import torch

from methodkit.tools.nte import attacks
from methodkit.tools.nte.data import from_dataset
from methodkit.tools.nte.encode import encode, fit_to_range
from methodkit.tools.nte.key import extract_key
from methodkit.tools.nte.learned import train_denoiser
from methodkit.tools.nte.stem import fold_average, unfold
from methodkit.tools.nte.zoo import load_model, predict_logits

torch.set_num_threads(1)
ZOO = os.environ.get("NTE_ZOO", "zoo")
PSNR = float(os.environ.get("NTE_PSNR", "10"))
N_TEST = int(os.environ.get("NTE_TEST", "2000"))
N_PUBLIC = int(os.environ.get("NTE_PUBLIC", "5000"))
VARIANTS = os.environ.get("NTE_VARIANTS", "shared,patch,sub4-low,sub4-high,shaped,replace,replace-patch,swap").split(",")
ATTACKS = os.environ.get(
    "NTE_ATTACKS", "none,blur:1,median:3,jpeg:75,pca,geig,wiener,denoiser,oracle,diffkey,pca8key,fitkey,png"
).split(",")
K = 4  # kernel = stride of pcnn-p4c8


def scale_to_psnr(content: np.ndarray, noise: np.ndarray, psnr: float) -> np.ndarray:
    """content + a * noise with a >= 0 per image so that the change has mean square 10^(-psnr/10)."""
    target = 10.0 ** (-psnr / 10.0) * content[0].size
    out = np.empty_like(content)
    for i, (c, n) in enumerate(zip(content, noise)):
        a2, a1, a0 = (n * n).sum(), 2 * (c * n).sum(), (c * c).sum() - target
        a = 0.0 if a0 >= 0 or a2 == 0 else (-a1 + np.sqrt(a1 * a1 - 4 * a2 * a0)) / (2 * a2)
        out[i] = c + a * n
    return out


def null_noise(shape: tuple, basis: np.ndarray, rng, layout: str = "shared", cov=None) -> np.ndarray:
    """Patch-layout noise (B, L, n) in span(basis), z shared per image or per patch, z ~ N(0, cov)."""
    b, length = shape
    k = basis.shape[1]
    z = rng.standard_normal((b, 1 if layout == "shared" else length, k))
    if cov is not None:
        z = z @ np.linalg.cholesky(cov + 1e-12 * np.eye(k)).T
    return np.broadcast_to(z @ basis.T, (b, length, basis.shape[0]))


def make_variant(name: str, x: np.ndarray, key, s_clean: np.ndarray, mu_clean: np.ndarray, seed: int) -> np.ndarray:
    n_basis = key.basis
    rng = np.random.default_rng(np.random.SeedSequence([seed, 38]))
    if name in ("shared", "patch"):
        return encode(x, key, PSNR, seed=seed, layout=name).x
    patches = unfold(x.astype(np.float64), K, K)
    b, length, _ = patches.shape
    inner = n_basis.T @ s_clean @ n_basis
    values, vectors = np.linalg.eigh(inner)  # ascending clean variance inside the null space
    if name.startswith("sub4"):
        rotated = n_basis @ vectors
        basis = rotated[:, :4] if name == "sub4-low" else rotated[:, -4:]
        noise, content = null_noise((b, length), basis, rng), np.zeros_like(patches)
    elif name == "shaped":
        noise, content = null_noise((b, length), n_basis, rng, cov=inner), np.zeros_like(patches)
    elif name in ("replace", "replace-patch"):
        centred = patches - mu_clean
        content = -(centred @ n_basis) @ n_basis.T
        noise = null_noise((b, length), n_basis, rng, "patch" if name == "replace-patch" else "shared")
    elif name == "swap":
        other = patches[rng.permutation(b)]
        content = np.zeros_like(patches)
        noise = ((other - patches) @ n_basis) @ n_basis.T
    else:
        raise SystemExit(f"unknown variant {name}")
    change = scale_to_psnr(content, np.ascontiguousarray(noise), PSNR)
    return (x + fold_average(change, x.shape, K, K)).astype(np.float32)


def oracle_fit(public: np.ndarray, basis: np.ndarray):
    """E[x | W'x], linear: the null component regressed on the row component (public clean patches)."""
    p = unfold(public.astype(np.float64), K, K).reshape(-1, basis.shape[0])
    row = np.eye(basis.shape[0]) - basis @ basis.T
    r, nul = p @ row, p @ basis
    mu_r, mu_n = r.mean(0), nul.mean(0)
    coef, *_ = np.linalg.lstsq(r - mu_r, nul - mu_n, rcond=None)

    def apply(x):
        q = unfold(x.astype(np.float64), K, K)
        restored = q @ row + (mu_n + (q @ row - mu_r) @ coef) @ basis.T
        return np.clip(fold_average(restored, x.shape, K, K), 0, 1).astype(np.float32)

    return apply


def diff_key(cipher: np.ndarray, k: int) -> np.ndarray:
    """The k least-variance directions of differences between patches of the same image."""
    p = unfold(cipher.astype(np.float64), K, K)
    d = (p[:, 1:] - p[:, :1]).reshape(-1, p.shape[2])
    _, vectors = np.linalg.eigh(d.T @ d / len(d))
    return vectors[:, :k]


def fit_key(cipher: np.ndarray, public: np.ndarray, k: int, starts: int = 20, rounds: int = 200) -> np.ndarray:
    """Key estimate of an attacker who knows the `replace` scheme: S_nte = P S_c P + s2 N N^T with
    P = I - N N^T; fixed point N <- top-k eigenvectors of S_nte - P S_c P, from the geig estimate and
    random starts, keeping the best fit (Frobenius residual)."""
    _, s_clean = attacks.patch_covariance(public, K, K)
    _, s_nte = attacks.patch_covariance(cipher, K, K)
    n = s_clean.shape[0]
    rng = np.random.default_rng(7)
    best, best_err = None, np.inf
    inits = [attacks.geig_subspace(cipher, public, K, K, k)] + [
        np.linalg.qr(rng.standard_normal((n, k)))[0] for _ in range(starts)
    ]
    for basis in inits:
        for _ in range(rounds):
            p = np.eye(n) - basis @ basis.T
            values, vectors = np.linalg.eigh(s_nte - p @ s_clean @ p)
            basis = vectors[:, -k:]
        p = np.eye(n) - basis @ basis.T
        s2 = np.trace(basis.T @ (s_nte - p @ s_clean @ p) @ basis) / k
        err = np.linalg.norm(s_nte - p @ s_clean @ p - s2 * basis @ basis.T)
        if err < best_err:
            best, best_err = basis, err
    return best


def png_views(x: np.ndarray, cipher: np.ndarray, key, w_pixel: np.ndarray) -> dict:
    """{'png': plain PNG release, 'png-qaware': rounding alternated with the projection}."""
    fitted = fit_to_range(x, cipher, key)
    plain = np.round(fitted * 255.0) / 255.0
    proj = key.basis @ key.basis.T
    best, best_norm = plain, _feature_norm(plain - x, w_pixel).max()
    current = plain
    for _ in range(12):
        delta = unfold((current - x).astype(np.float64), K, K) @ proj
        current = np.round(np.clip(x + fold_average(delta, x.shape, K, K), 0, 1) * 255.0) / 255.0
        norm = _feature_norm(current - x, w_pixel).max()
        if norm < best_norm:
            best, best_norm = current, norm
    return {"png": plain.astype(np.float32), "png-qaware": best.astype(np.float32)}


def _feature_norm(change: np.ndarray, w_pixel: np.ndarray) -> np.ndarray:
    f = unfold(change.astype(np.float64), K, K) @ w_pixel.T
    return np.sqrt((f**2).reshape(len(change), -1).sum(1))


def main() -> None:
    x, y = from_dataset("fashion-mnist:test", N_TEST)
    public, _ = from_dataset("fashion-mnist:train", N_PUBLIC, offset=50000)
    names = ("pcnn-p4c8-s0", "pcnn-p4c8-s1", "cnn3c16-s0")
    models = {m: load_model(f"{ZOO}/{m}.safetensors") for m in names if os.path.exists(f"{ZOO}/{m}.safetensors")}
    stem = models["pcnn-p4c8-s0"].stem_spec()
    key, w_pixel = extract_key(stem), stem.pixel_matrix()
    mu_clean, s_clean = attacks.patch_covariance(public, K, K)
    clean_pred = {m: predict_logits(net, x).argmax(1) for m, net in models.items()}
    clean_acc = {m: float((p == y).mean()) for m, p in clean_pred.items()}
    print(f"# PSNR {PSNR} dB, {N_TEST} test images, {N_PUBLIC} public images; clean accuracy "
          + ", ".join(f"{m} {a:.3f}" for m, a in clean_acc.items()), flush=True)  # fmt: skip
    print("variant  attack  psnr_db  auth_drop  auth_max_dlogit  " + "  ".join(f"{m}_drop" for m in models if m != names[0])
          + "  feature_change_max  note", flush=True)  # fmt: skip
    oracle = oracle_fit(public, key.basis)
    for variant in VARIANTS:
        t0 = time.process_time()
        cipher = make_variant(variant, x, key, s_clean, mu_clean, seed=0)
        psnr = float(np.mean(10 * np.log10(1 / ((cipher - x).reshape(len(x), -1) ** 2).mean(1))))
        views: dict = {}
        for attack in ATTACKS:
            note = ""
            name, _, value = attack.partition(":")
            if attack == "none":
                views[attack] = cipher
            elif name in attacks.FILTERS:
                views[attack] = attacks.FILTERS[name](cipher, float(value))
            elif name == "pca":
                restored, k = attacks.pca(cipher, K, K, 0)
                views[attack], note = restored, f"k={k}"
            elif name == "geig":
                sub = attacks.geig_subspace(cipher, public, K, K, key.k)
                views[attack] = attacks.project_out(cipher, sub, K, K)
                note = f"min_cos={attacks.smallest_principal_cosine(sub, key.basis):.3f}"
            elif name == "wiener":
                views[attack] = attacks.wiener(cipher, public, K, K)
            elif name == "denoiser":
                apply, _ = train_denoiser(cipher, public, K, K, k=key.k, epochs=int(os.environ.get("NTE_DENOISER_EPOCHS", "3")),
                                          layout="patch" if variant == "patch" else "shared")  # fmt: skip
                views[attack] = apply(cipher)
            elif name == "oracle":
                views[attack] = oracle(cipher)
            elif name in ("diffkey", "pca8key", "fitkey"):
                if name == "fitkey":
                    estimate = fit_key(cipher, public, key.k)
                else:
                    estimate = diff_key(cipher, key.k) if name == "diffkey" else attacks.pca_subspace(cipher, K, K, key.k)
                views[attack] = oracle_fit(public, estimate)(cipher)
                note = f"min_cos={attacks.smallest_principal_cosine(estimate, key.basis):.3f}"
            elif name == "png":
                views.update(png_views(x, cipher, key, w_pixel))
            for label in ([attack] if name != "png" else ["png", "png-qaware"]):
                view = views[label]
                drops, auth = {}, None
                for m, net in models.items():
                    logits = predict_logits(net, view)
                    drops[m] = 100 * (clean_acc[m] - float((logits.argmax(1) == y).mean()))
                    if m == "pcnn-p4c8-s0":
                        auth = float(np.abs(logits - predict_logits(net, x)).max())
                v_psnr = float(np.mean(10 * np.log10(1 / np.maximum(((view - x).reshape(len(x), -1) ** 2).mean(1), 1e-12))))
                fchange = float(_feature_norm(view - x, w_pixel).max())
                print(f"{variant}  {label}  {v_psnr:.1f}  {drops['pcnn-p4c8-s0']:.1f}  {auth:.2e}  "
                      + "  ".join(f"{drops[m]:.1f}" for m in models if m != names[0]) + f"  {fchange:.3g}  {note}", flush=True)  # fmt: skip
        print(f"# {variant}: cipher PSNR {psnr:.2f} dB, {time.process_time() - t0:.0f} CPU-s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
