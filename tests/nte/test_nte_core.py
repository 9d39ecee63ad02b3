"""nte: key, encode, kernels, models, spectrum and attacks against references and invariants."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from methodkit.core.errors import DataError, RunFailure, UsageError
from methodkit.tools.nte import attacks, kernels
from methodkit.tools.nte.encode import draw_noise, encode
from methodkit.tools.nte.key import Key, extract_key
from methodkit.tools.nte.models import ARCHS, ModelConfig, build
from methodkit.tools.nte.spectrum import pair
from methodkit.tools.nte.stem import Stem, fold_average, unfold
from methodkit.tools.nte.zoo import misaligned_stem


def _stem(c_out=8, k=4, s=4, p=0, seed=0, mean=0.3, std=0.4):
    w = np.random.default_rng(seed).normal(size=(c_out, 1, k, k))
    return Stem(w, s, p, (mean,), (std,))


def _images(n=6, side=28, seed=1):
    return np.random.default_rng(seed).random((n, 1, side, side)).astype(np.float32)


def test_key_is_the_null_space_of_the_pixel_domain_stem():
    stem = _stem()
    key = extract_key(stem)
    assert (key.k, key.rank, key.fallback) == (8, 8, False)
    np.testing.assert_allclose(key.basis.T @ key.basis, np.eye(8), atol=1e-12)
    assert np.abs(stem.pixel_matrix() @ key.basis).max() < 1e-12
    # normalisation folded in: W' = W / std, so the raw W has the same null space but other singular values
    np.testing.assert_allclose(key.singular_values[:8] * 0.4, np.linalg.svd(stem.weight.reshape(8, -1))[1])


def test_key_rank_rules_and_full_rank_fallback():
    full = _stem(c_out=16)
    key = extract_key(full)
    assert key.fallback and key.k == 1 and key.sigma_leak == pytest.approx(key.singular_values[-1])
    assert "full rank" in key.warnings[0]
    with pytest.raises(RunFailure, match="no null space"):
        extract_key(full, strict=True)
    relative = extract_key(full, tau=0.3)
    assert relative.rank == int(np.sum(relative.singular_values > 0.3 * relative.singular_values[0]))
    with pytest.raises(UsageError, match="--tau must be positive"):
        extract_key(full, tau=0)


def test_key_round_trips_through_npz():
    key = extract_key(_stem())
    from methodkit.core import io as mio

    again = Key.from_arrays(mio.read_arrays(mio.InputBytes(key.to_npz_bytes(), "k", "")), "k")
    np.testing.assert_array_equal(again.basis, key.basis)
    assert again.to_dict() == key.to_dict()


@pytest.mark.parametrize("k, s, p", [(4, 4, 0), (5, 2, 2), (3, 1, 1), (7, 7, 0)])
def test_fold_average_inverts_unfold(k, s, p):
    x = _images(2)
    padded = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    patches = unfold(padded, k, s)
    back = fold_average(patches, padded.shape, k, s)
    covered = (padded.shape[-1] - k) // s * s + k
    np.testing.assert_allclose(back[..., :covered, :covered], padded[..., :covered, :covered], atol=1e-6)


def test_encode_nonoverlap_kernel_matches_numpy_reference():
    key = extract_key(_stem())
    x = _images(5)
    z = draw_noise(3, 0, 5, 49, key.k)
    out, alpha = kernels.encode_nonoverlap(x, key.basis[None], np.zeros(49, np.int64), z, 15.0, 4, 0, False)
    delta = fold_average(z @ key.basis.T, x.shape, 4, 4)
    expected_alpha = np.sqrt(10**-1.5 / (delta.reshape(5, -1) ** 2).mean(axis=1))
    np.testing.assert_allclose(alpha, expected_alpha, rtol=1e-10)
    np.testing.assert_allclose(out, x + expected_alpha[:, None, None, None] * delta, atol=1e-6)


def _torch_stem_features(stem, x):
    """The model's own view: normalise, conv with zero padding (= padding with the mean in pixels)."""
    w = torch.from_numpy(stem.weight)
    xt = (torch.from_numpy(x.astype(np.float64)) - stem.mean[0]) / stem.std[0]
    return torch.nn.functional.conv2d(xt, w, stride=stem.stride, padding=stem.padding)


@pytest.mark.parametrize("c_out", [8, 11])
def test_padded_nonoverlapping_stem_uses_restricted_border_bases(c_out):
    stem = _stem(c_out=c_out, k=4, s=4, p=2)  # 28 + 4 = 32: an 8x8 grid whose border patches are half padding
    key = extract_key(stem)
    x = _images(4)
    c = encode(x, key, 12.0, seed=1, w_pixel=stem.pixel_matrix())
    np.testing.assert_allclose(c.psnr, 12.0, atol=1e-4)
    assert c.certificate.max() < 1e-4
    torch.testing.assert_close(_torch_stem_features(stem, c.x), _torch_stem_features(stem, x), atol=1e-4, rtol=0)
    # interior k = 16 - c_out; edges keep 8 real pixels, corners 4: restricted dimension max(real - c_out, 0)
    assert sorted(c.summary()["border_k"]) == sorted([16 - c_out] + [max(8 - c_out, 0)] * 4 + [0] * 4)
    # every border basis lies in span(N) and vanishes on padded coordinates
    from methodkit.tools.nte.encode import border_bases
    from methodkit.tools.nte.stem import border_masks

    bases, types = border_bases(key.basis, 1, 4, 4, 2, 28, 28)
    masks, _ = border_masks(1, 4, 4, 2, 28, 28)
    for basis, mask in zip(bases, masks):
        assert np.abs(basis[~mask]).max(initial=0) == 0
        assert np.abs(stem.pixel_matrix() @ basis).max() < 1e-9


def test_restricted_basis_is_the_null_space_of_the_valid_columns():
    from methodkit.tools.nte.key import restricted_basis

    stem = _stem(c_out=5)
    w = stem.pixel_matrix()
    valid = np.zeros(16, bool)
    valid[[2, 3, 6, 7, 10, 11, 14, 15]] = True
    basis = restricted_basis(extract_key(stem).basis, valid)
    assert basis.shape == (16, 3)  # 8 real coordinates - rank 5
    np.testing.assert_allclose(basis.T @ basis, np.eye(3), atol=1e-10)
    assert np.abs(w @ basis).max() < 1e-10


def test_encode_patches_kernel_matches_numpy_reference():
    key = extract_key(_stem(c_out=12, k=5, s=2))
    patches = unfold(_images(3), 5, 2).astype(np.float32)
    z = draw_noise(0, 0, 3, patches.shape[1], key.k)
    out, alpha = kernels.encode_patches(patches, key.basis, z, 12.0)
    delta = z @ key.basis.T
    expected_alpha = np.sqrt(10**-1.2 / (delta.reshape(3, -1) ** 2).mean(axis=1))
    np.testing.assert_allclose(out, patches + expected_alpha[:, None, None] * delta, atol=1e-6)


@pytest.mark.parametrize(
    "shape, kernel, stride", [((7, 1, 28, 28), 4, 2), ((5, 2, 13, 17), 3, 2), ((3, 3, 10, 11), 2, 3)]
)
def test_patch_cov_kernel_matches_numpy(shape, kernel, stride):
    x = np.random.default_rng(1).random(shape)
    total, sums, count = kernels.patch_cov(x, kernel, stride)
    p = unfold(x, kernel, stride).reshape(-1, shape[1] * kernel * kernel)
    assert count == p.shape[0]
    np.testing.assert_allclose(total, p.T @ p, rtol=1e-10)
    np.testing.assert_allclose(sums, p.sum(axis=0), rtol=1e-10)


@pytest.mark.parametrize("psnr", [30.0, 10.0])
def test_encode_hits_psnr_and_leaves_the_authorized_stem_unchanged(psnr):
    stem = _stem()
    key = extract_key(stem)
    x = _images(8)
    c = encode(x, key, psnr, seed=4, w_pixel=stem.pixel_matrix())
    np.testing.assert_allclose(c.psnr, psnr, atol=1e-4)
    assert c.certificate.max() < 1e-4
    control = encode(x, key, psnr, seed=4, noise="gaussian", w_pixel=stem.pixel_matrix())
    np.testing.assert_allclose(control.psnr, psnr, atol=1e-3)
    assert control.certificate.min() > 100 * c.certificate.max()


def test_encode_is_reproducible_per_image_whatever_the_batch():
    key = extract_key(_stem())
    x = _images(8)
    whole = encode(x, key, 20.0, seed=9)
    tail = encode(x[4:], key, 20.0, seed=9, first_index=4)
    np.testing.assert_array_equal(whole.x[4:], tail.x)
    assert not np.array_equal(encode(x, key, 20.0, seed=10).x, whole.x)


def test_encode_bad_inputs():
    key = extract_key(_stem())
    with pytest.raises(UsageError, match="--psnr must be in"):
        encode(_images(1), key, 0.0)
    with pytest.raises(DataError, match="must lie in"):
        encode(_images(1) * 2, key, 10.0)
    with pytest.raises(DataError, match="unencodable"):
        encode(_images(1, side=30), key, 10.0)
    with pytest.raises(DataError, match="channel"):
        encode(np.zeros((1, 3, 28, 28), np.float32), key, 10.0)


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_forward_patches_equals_forward(arch):
    model = build(ModelConfig(arch, 0))
    model.eval()
    stem = model.stem_spec()
    x = _images(3)
    padded = np.full((3, 1, 28 + 2 * stem.padding, 28 + 2 * stem.padding), model.cfg.mean, np.float32)
    padded[:, :, stem.padding : stem.padding + 28, stem.padding : stem.padding + 28] = x
    patches = unfold(padded, stem.kernel, stem.stride).astype(np.float32)
    with torch.no_grad():
        torch.testing.assert_close(model.forward_patches(torch.from_numpy(patches)), model(torch.from_numpy(x)))


@pytest.mark.parametrize("arch", ["pcnn-p4c8", "cnn5s2c12"])
def test_authorized_model_outputs_are_preserved(arch):
    model = build(ModelConfig(arch, 0))
    model.eval()
    stem = model.stem_spec()
    key = extract_key(stem)
    x = _images(6)
    c = encode(x, key, 10.0, seed=0)
    with torch.no_grad():
        clean = model(torch.from_numpy(x))
        nte = (
            model.forward_patches(torch.from_numpy(c.patches))
            if c.patches is not None
            else model(torch.from_numpy(c.x))
        )
        view = model(torch.from_numpy(c.view))
    assert (nte - clean).abs().max() < 1e-4
    if c.patches is not None:  # the fold-averaged view is not decodable
        assert (view - clean).abs().max() > 1e-3


def test_body_lipschitz_bounds_the_observed_ratio():
    model = build(ModelConfig("pcnn-p4c8", 0))
    model.eval()
    bound = model.body_lipschitz()
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 8, 7, 7, generator=g), torch.randn(4, 8, 7, 7, generator=g)
    with torch.no_grad():
        for i in range(4):
            ratio = (model.body(a[i : i + 1]) - model.body(b[i : i + 1])).norm() / (a[i] - b[i]).norm()
            assert ratio <= bound * 1.0001


def test_spectrum_same_stem_leaks_nothing_and_leak_grows_with_misalignment():
    a = _stem(seed=0)
    self_pair = pair("a", a, "a", a, clean=_images(4))
    assert self_pair.leak < 1e-20 and self_pair.hw_gap == pytest.approx(0, abs=1e-9)
    assert self_pair.noise_share < 1e-12 and self_pair.snr_mc < 1e-12  # the key's noise is invisible to A
    leaks = []
    for t in (0.05, 0.2, 1.0):
        b = Stem(misaligned_stem(a.weight, t, 0), 4, 0, a.mean, a.std)
        result = pair("a", a, "b", b, clean=_images(8), psnr=10.0, layout="patch")
        assert result.hw_gap <= result.frobenius_gap + 1e-12
        assert result.leak_spectral <= result.spectral_gap + 1e-12
        # the any-geometry estimate agrees: snr_leak (the formula) is per key dimension (k = 8)
        assert result.snr_mc == pytest.approx(8 * result.snr_leak, rel=0.2)
        assert 0 < result.noise_share < 1 and result.noise_share_chance == 0.5
        leaks.append(result.leak)
    assert leaks == sorted(leaks) and leaks[0] > 0
    wide = pair("a", a, "b", _stem(c_out=12, seed=3))  # same geometry, more channels: zero rows pad A
    assert wide.same_geometry and wide.hw_gap <= wide.frobenius_gap + 1e-12
    assert wide.leak_spectral <= wide.spectral_gap + 1e-12


def test_monte_carlo_ratio_is_large_for_a_misaligned_other_geometry():
    a = _stem(seed=0)
    b = _stem(c_out=16, k=3, s=1, p=1, seed=5)
    result = pair("a", a, "b", b, clean=_images(8), psnr=10.0)
    assert not result.same_geometry and result.leak is None
    assert result.mc_ratio > 0.1


def test_jpeg_known_answers():
    flat = np.full((1, 1, 16, 16), 0.5, np.float32)
    np.testing.assert_allclose(attacks.jpeg(flat, 50), np.round(0.5 * 255) / 255, atol=1e-6)
    x = _images(2, side=16)
    err_hi = np.abs(attacks.jpeg(x, 95) - x).mean()
    err_lo = np.abs(attacks.jpeg(x, 10) - x).mean()
    assert err_hi < err_lo
    with pytest.raises(UsageError):
        attacks.jpeg(x, 0)


def _smooth_images(n, seed):
    from scipy import ndimage

    raw = np.random.default_rng(seed).random((n, 1, 28, 28))
    return np.clip(ndimage.gaussian_filter(raw, (0, 0, 2, 2)) * 3 - 1, 0, 1).astype(np.float32)


def test_subspace_attacks_recover_structure():
    stem = _stem()
    key = extract_key(stem)
    clean = _smooth_images(64, 2)
    public = _smooth_images(256, 3)
    c = encode(clean, key, 10.0, seed=0)
    subspace = attacks.geig_subspace(c.view, public, 4, 4, key.k)
    assert attacks.smallest_principal_cosine(subspace, key.basis) > 0.9
    restored = attacks.wiener(c.view, public, 4, 4)

    def psnr(a):
        return 10 * np.log10(1 / ((a - clean) ** 2).mean())

    assert psnr(restored) > psnr(c.view) + 3


def test_fused_seeded_encode_equals_the_kernel_given_the_same_noise():
    key = extract_key(_stem())
    x = _images(5)
    types = np.zeros(49, np.int64)
    fused, alpha = kernels.encode_nonoverlap_seeded(x, key.basis[None], types, 11, 3, 14.0, 4, 0, False)
    z = draw_noise(11, 3, 5, 49, key.k)
    given, alpha2 = kernels.encode_nonoverlap(x, key.basis[None], types, z, 14.0, 4, 0, False)
    np.testing.assert_array_equal(fused, given)
    np.testing.assert_array_equal(alpha, alpha2)


def test_counter_normals_are_standard_normal_and_per_image():
    from scipy import stats

    z = draw_noise(0, 0, 40, 49, 8)
    assert stats.kstest(z.ravel(), "norm").pvalue > 1e-3
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    np.testing.assert_array_equal(draw_noise(0, 7, 3, 49, 8), z[7:10])
    assert not np.array_equal(draw_noise(1, 0, 1, 49, 8), z[:1])


def test_ziggurat_normals_match_the_normal_law_in_the_body_and_the_tail():
    from scipy import stats

    from methodkit.tools.nte import xp_encode

    z = kernels.draw_normals(3, 0, 200, 500, 10).ravel()  # 1e6 values: ~260 beyond R, ~7,000 wedges
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.var() - 1) < 5e-3 and abs(stats.kurtosis(z)) < 0.03
    r = kernels.ZIGGURAT_R
    beyond = np.abs(z) > r
    assert abs(beyond.mean() / (2 * stats.norm.sf(r)) - 1) < 0.25  # the tail is sampled at its mass
    assert stats.kstest(np.abs(z[beyond]) - r, lambda t: 1 - stats.norm.sf(r + t) / stats.norm.sf(r)).pvalue > 1e-3
    # the vectorised twin walks the same state machine: equal bit for bit, rejections included
    np.testing.assert_array_equal(
        xp_encode.draw_normals(np, 3, 0, 20, 500, 10), kernels.draw_normals(3, 0, 20, 500, 10)
    )


def test_shared_layout_adds_the_same_key_noise_to_every_patch():
    key = extract_key(_stem())
    x = _images(3)
    c = encode(x, key, 15.0, seed=2, w_pixel=_stem().pixel_matrix())  # shared is the default
    delta = unfold(c.x - x, 4, 4)  # (B, L, n)
    np.testing.assert_allclose(delta, np.broadcast_to(delta[:, :1], delta.shape), atol=1e-6)
    assert np.allclose(c.psnr, 15.0, atol=1e-3) and c.certificate.max() < 1e-4
    per_patch = encode(x, key, 15.0, seed=2, layout="patch")
    z0 = draw_noise(2, 0, 3, 1, key.k)[:, 0]  # row 0 of the per-patch stream is the shared z
    direction = z0 @ key.basis.T
    cos = (
        np.abs((delta[:, 0] * direction).sum(1))
        / np.linalg.norm(delta[:, 0], axis=1)
        / np.linalg.norm(direction, axis=1)
    )
    np.testing.assert_allclose(cos, 1.0, atol=1e-5)
    assert not np.allclose(per_patch.x, c.x)
    with pytest.raises(UsageError, match="--layout"):
        encode(x, key, 15.0, layout="tiles")


def test_jacobian_key_at_the_stem_is_the_svd_key_and_deeper_keys_contain_it():
    from methodkit.tools.nte.jacobian import jacobian_key

    model = build(ModelConfig("pcnn-p4c8", 0))
    model.eval()
    x = _images(8)
    svd = extract_key(model.stem_spec())
    at_stem = jacobian_key(model, x, "stem", probes=2)
    assert at_stem.k == svd.k
    assert attacks.smallest_principal_cosine(at_stem.basis, svd.basis) > 1 - 1e-6
    deeper = jacobian_key(model, x, "relu", tau=1e-3, probes=2)
    assert deeper.k >= svd.k and deeper.mode == "jacobian"
    # span(N_svd) lies inside span(N_jacobian): the projection keeps every column
    np.testing.assert_allclose(np.linalg.norm(deeper.basis.T @ svd.basis, axis=0), 1.0, atol=1e-6)
    again = Key.from_arrays(dict(np.load(__import__("io").BytesIO(deeper.to_npz_bytes()))))
    assert again.mode == "jacobian" and again.layer == "relu"


def test_png_folder_round_trip(tmp_path):
    from methodkit.tools.nte.pngio import quantise, read_png_dir, write_png_dir

    x = _images(3)
    write_png_dir(tmp_path / "p", quantise(x), labels=[1, 2, 3], meta={"a": 1})
    back, labels, meta = read_png_dir(tmp_path / "p")
    np.testing.assert_allclose(back, quantise(x) / 255.0, atol=1e-7)
    assert labels.tolist() == [1, 2, 3] and meta == {"a": 1}
    with pytest.raises(UsageError, match="exists"):
        write_png_dir(tmp_path / "p", quantise(x))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]  # no staging folder left


def test_denoiser_attack_improves_psnr_on_structured_images():
    from methodkit.tools.nte.learned import train_denoiser

    stem = _stem()
    key = extract_key(stem)
    clean = _smooth_images(48, 4)
    c = encode(clean, key, 12.0, seed=0)
    apply, info = train_denoiser(c.view, _smooth_images(256, 5), 4, 4, k=key.k, epochs=3)
    restored = apply(c.view)

    def psnr(a):
        return 10 * np.log10(1 / ((a - clean) ** 2).mean())

    assert info["noise_energy_per_patch"] > 0
    assert psnr(restored) > psnr(c.view) + 2


@pytest.mark.parametrize("padding", [0, 2])
def test_array_module_twin_with_numpy_equals_the_numba_kernel(padding):
    from methodkit.tools.nte import xp_encode
    from methodkit.tools.nte.encode import border_bases

    key = extract_key(_stem(p=padding))
    x = _images(6)
    bases, types = border_bases(key.basis, 1, 4, 4, padding, 28, 28)
    np.testing.assert_array_equal(  # same words, same ziggurat state machine (wedges and tail included)
        xp_encode.draw_normals(np, 5, 2, 6, len(types), key.k), draw_noise(5, 2, 6, len(types), key.k)
    )
    for shared in (False, True):
        ours, alpha = kernels.encode_nonoverlap_seeded(x, bases, types, 5, 2, 13.0, 4, padding, shared)
        twin, alpha2 = xp_encode.encode_nonoverlap(np, x, bases, types, 5, 2, 13.0, 4, padding, shared)
        np.testing.assert_allclose(alpha2, alpha, rtol=1e-10)
        np.testing.assert_allclose(twin, ours, atol=2e-6)


@pytest.mark.gpu
def test_cupy_twin_equals_the_cpu_kernel():
    cupy = pytest.importorskip("cupy")
    from methodkit.tools.nte import xp_encode

    key = extract_key(_stem())
    x = _images(64)
    types = np.zeros(49, np.int64)
    ours, _ = kernels.encode_nonoverlap_seeded(x, key.basis[None], types, 1, 0, 10.0, 4, 0, False)
    twin, _ = xp_encode.encode_nonoverlap(cupy, x, key.basis[None], types, 1, 0, 10.0, 4, 0)
    np.testing.assert_allclose(cupy.asnumpy(twin), ours, atol=2e-6)


@pytest.mark.parametrize("padding", [0, 2])
def test_fit_to_range_in_patch_blocks_equals_the_image_layout_iteration(padding):
    from methodkit.tools.nte.encode import fit_to_range, fit_to_range_reference

    key = extract_key(_stem(c_out=6, k=4, s=4, p=padding))
    x = _images(7)
    cipher = encode(x, key, 10.0, seed=2).x
    assert ((cipher < 0) | (cipher > 1)).any()  # something to fit
    fitted = fit_to_range(x, cipher, key, iterations=30, block=3)  # blocks of 3: a partial last block
    np.testing.assert_allclose(fitted, fit_to_range_reference(x, cipher, key, iterations=30), atol=1e-6, rtol=0)
    assert fitted.min() >= 0 and fitted.max() <= 1
