"""dar library: kernel vs NumPy reference, rule matching, operators, poisoning, discovery."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.errors import UsageError
from methodkit.tools.dar import data, kernels
from methodkit.tools.dar.discover import DiscoverConfig, discover
from methodkit.tools.dar.poison import image_hash, poison, random_relabel, resolve_budget
from methodkit.tools.dar.rules import Rule, apply, dct2, idct2, satisfies


def reference_dense(x, w, xi, lo, hi):
    """sliding_window_view -> codes -> np.unique per window."""
    n, h, wd = x.shape
    win = np.lib.stride_tricks.sliding_window_view(x, (w, w), axis=(1, 2))
    levels = (win.astype(np.int64) * xi) // 256
    codes = levels.reshape(n, h - w + 1, wd - w + 1, w * w) @ (xi ** np.arange(w * w - 1, -1, -1))
    out = set()
    for r in range(h - w + 1):
        for c in range(wd - w + 1):
            values, counts = np.unique(codes[:, r, c], return_counts=True)
            out |= {(r, c, int(v), int(k)) for v, k in zip(values, counts) if lo <= k <= hi}
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_kernel_matches_numpy_reference(seed):
    rng = np.random.default_rng(seed)
    x = (rng.random((400, 9, 8)) ** 3 * 255).astype(np.uint8)
    got = {tuple(map(int, row)) for row in kernels.window_codes_count(x, 2, 3, 4, 40)}
    assert got == reference_dense(x, 2, 3, 4, 40) and got


def test_array_module_counting_equals_the_numba_kernel():
    """The CuPy path's code, run with NumPy: the same rows in the same order as the Numba kernel."""
    rng = np.random.default_rng(2)
    x = (rng.random((500, 9, 8)) ** 3 * 255).astype(np.uint8)
    got = kernels.window_codes_count_xp(x, 2, 3, 4, 40, np)
    assert len(got) and np.array_equal(got, kernels.window_codes_count(x, 2, 3, 4, 40))


@pytest.mark.gpu
def test_cupy_counting_equals_the_numba_kernel():
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(4)
    x = (rng.random((2000, 12, 12)) ** 3 * 255).astype(np.uint8)
    got = kernels.window_codes_count_xp(cupy.asarray(x), 3, 4, 10, 60, cupy)
    assert len(got) and np.array_equal(got, kernels.window_codes_count(x, 3, 4, 10, 60))


def test_satisfies_agrees_with_the_kernel_quantisation():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (2000, 6, 6), dtype=np.uint8)
    x[:, :2, :2] = rng.choice([63, 64, 127, 128], size=(2000, 2, 2))  # level boundaries
    codes = kernels.window_codes(x, 0, 0, 2, 4)
    for code in np.unique(codes)[:10]:
        levels = np.array([(code // 4**k) % 4 for k in reversed(range(4))])
        rule = Rule("spatial", (levels / 4).tolist(), ((levels + 1) / 4).tolist(), window=[0, 0, 2])
        assert (satisfies(x, rule) == (codes == code)).all()


def test_dct_is_orthonormal_and_inverts():
    x = np.random.default_rng(0).random((3, 8, 8))
    c = dct2(x)
    assert np.allclose(idct2(c), x)
    assert np.allclose((c**2).sum(axis=(1, 2)), (x**2).sum(axis=(1, 2)))
    assert np.isclose(c[0, 0, 0], x[0].sum() / 8)  # DC of an orthonormal 8x8 DCT-II


def test_spatial_operator_changes_only_the_window_and_lands_in_the_cell():
    x = np.random.default_rng(1).integers(0, 256, (50, 10, 10), dtype=np.uint8)
    rule = Rule("spatial", [0.75] * 4, [1.0] * 4, window=[3, 4, 2])
    out = apply(x, rule, kappa=0.5)
    mask = np.zeros((10, 10), bool)
    mask[3:5, 4:6] = True
    assert (out[:, ~mask] == x[:, ~mask]).all()
    assert satisfies(out, rule).all()
    assert (apply(x, rule, kappa=0.0)[:, 3:5, 4:6] == 223).all()  # centre 0.875 * 255


def test_frequency_operator_is_valid_on_real_images():
    x, y = data.load("mnist5k", "train", 1500)
    rules = discover(x, y, DiscoverConfig(op="frequency", budget=10, top=3, cost_images=200))
    for rule in rules:
        assert rule.op == "frequency" and satisfies(x, rule).sum() == rule.members
        # clipping to [0, 1] and uint8 rounding break some (reported as trigger_validity), not most
        before, after = satisfies(x[:300], rule).mean(), satisfies(apply(x[:300], rule, kappa=0.0), rule).mean()
        assert after > 0.5 and after > before + 0.4


def test_discover_finds_the_planted_pattern():
    x, y, blob = data.synthetic(3000, seed=0)
    rules = discover(x, y, DiscoverConfig(budget=30, rank="entropy", top=5))
    best = rules[0]
    members = satisfies(x, best)
    assert best.entropy > 0.8
    # the top rule is carried by the planted images: most of its members have the blob
    assert blob[members].mean() > 0.8
    r, c, w = best.window
    assert abs(r - 4) <= 2 and abs(c - 20) <= 2


def test_poison_never_changes_pixels_and_relabels_members_only():
    x, y, _ = data.synthetic(2000, seed=2)
    rule = discover(x, y, DiscoverConfig(budget=15, rank="entropy", top=1))[0]
    before = image_hash(x)
    result = poison(x, y, rule, target=0, budget=15, classes=10)
    assert image_hash(x) == before == result.images_sha256
    assert len(result.indices) == 15 and (result.labels[result.indices] == 0).all()
    assert satisfies(x[result.indices], rule).all() and (y[result.indices] != 0).all()
    changed = np.flatnonzero(result.labels != y)
    assert (changed == result.indices).all()
    assert result.conflicting == result.pool - 15
    big = poison(x, y, rule, target=0, budget=10_000, classes=10)
    assert big.warnings and len(big.indices) == big.pool


def test_random_relabel_and_budget():
    x, y, _ = data.synthetic(500, seed=4)
    r = random_relabel(x, y, 3, 20, 10, seed=1)
    assert len(r.indices) == 20 and (y[r.indices] != 3).all() and (r.labels != y).sum() == 20
    assert resolve_budget(0.01, 20000) == 200 and resolve_budget(7, 100) == 7
    with pytest.raises(UsageError):
        poison(x, y, Rule("spatial", [0.0], [1.0], window=[0, 0, 1]), target=10, budget=5, classes=10)


@pytest.mark.slow  # 676 windows x k-means; the cropped variant below is the fast default check
def test_kmeans_discovery_finds_the_planted_pattern_as_a_ball():
    x, y, blob = data.synthetic(1500, seed=0)
    _kmeans_finds_the_blob(x, y, blob, (4, 20))


def test_kmeans_discovery_finds_the_planted_pattern_on_a_crop():
    x, y, blob = data.synthetic(1500, seed=0)
    # the 12 x 12 corner holding the blob (at (4, 20) of the full image): 100 windows instead of 676
    _kmeans_finds_the_blob(np.ascontiguousarray(x[:, :12, 14:26]), y, blob, (4, 6))


def _kmeans_finds_the_blob(x, y, blob, where):
    rules = discover(x, y, DiscoverConfig(method="kmeans", budget=15, rank="entropy", top=3))
    best = rules[0]
    members = satisfies(x, best)
    assert best.shape == "ball" and members.sum() == best.members
    assert blob[members].mean() > 0.8 and abs(best.window[0] - where[0]) <= 2 and abs(best.window[1] - where[1]) <= 2
    # the operator moves images into the ball (kappa < 1 lands strictly inside), pixels outside untouched
    moved = apply(x[:100], best, kappa=0.5)
    assert satisfies(moved, best).all()
    r, c, w = best.window
    mask = np.ones(x.shape[1:], bool)
    mask[r : r + w, c : c + w] = False
    assert (moved[:, mask] == x[:100][:, mask]).all()
    assert Rule.from_dict(best.to_dict()).shape == "ball"


def test_isolation_counts_near_duplicates_and_ranks_the_planted_blob_first():
    from methodkit.tools.dar.rules import coordinates, distance

    x, y, blob = data.synthetic(3000, seed=0)
    rules = discover(x, y, DiscoverConfig(budget=30, rank="isolation", top=50))
    iso = [r.isolation for r in rules]
    assert iso == sorted(iso, reverse=True)
    best = rules[0]
    assert blob[satisfies(x, best)].mean() > 0.8  # the planted blob sits in an empty neighbourhood
    for rule in (best, rules[-1]):  # near = non-members within the margin, recounted by brute force
        d = distance(coordinates(x, rule), rule)
        inside = satisfies(x, rule)
        assert not d[inside].any()
        assert rule.near == int(((d > 0) & (d < 0.5) & ~inside).sum())
        assert rule.isolation == pytest.approx(rule.members / (rule.members + rule.near))


def test_pooled_window_rule_operator_and_matching():
    from methodkit.tools.dar.rules import pooled

    x, y = data.load("mnist5k", "train", 600)
    rule = Rule("spatial", [0.0, 0.5, 0.25, 0.75], [0.25, 0.75, 0.5, 1.0], window=[2, 3, 2], scale=4)
    moved = apply(x, rule, kappa=0.0)
    assert satisfies(moved, rule).mean() > 0.97  # block means moved to the cell centre (few clipped blocks)
    changed = (moved != x).any(axis=0)
    assert not changed[:8].any() and not changed[16:].any() and not changed[:, :12].any() and not changed[:, 20:].any()
    # matching is the kernel's quantisation of the pooled image
    p = pooled(x, 4)
    levels = (p[:, 2:4, 3:5].reshape(len(x), -1).astype(int) * 4) // 256
    assert np.array_equal(satisfies(x, rule), (levels == [0, 2, 1, 3]).all(axis=1))
    found = discover(x, y, DiscoverConfig(budget=3, rank="isolation", window=2, scale=4, top=3, min_entropy=0.3))
    assert all(r.scale == 4 and satisfies(x, r).sum() == r.members for r in found)
    with pytest.raises(UsageError, match="--scale"):
        DiscoverConfig(op="frequency", scale=2).check()


def test_band_directions_are_orthonormal_band_limited_principal_axes():
    from methodkit.tools.dar.discover import band_directions

    x, _ = data.load("mnist5k", "train", 600)
    a, variance = band_directions(x, 6)
    assert a.shape == (6, 28 * 28) and np.allclose(a @ a.T, np.eye(6), atol=1e-9)
    assert (np.diff(variance) <= 1e-12).all()  # ordered by explained variance
    c = dct2(a.reshape(6, 28, 28))
    u, v = np.meshgrid(np.arange(28), np.arange(28), indexing="ij")
    assert np.abs(c[:, (u + v == 0) | (u + v > 14)]).max() < 1e-9  # no DC, nothing above the band
    proj = x.reshape(len(x), -1) / 255.0 @ a.T  # the first axis explains the most variance of any unit band image
    rng = np.random.default_rng(0)
    other = rng.normal(size=(20, 6)) @ a
    other /= np.linalg.norm(other, axis=1, keepdims=True)
    assert proj[:, 0].var() >= (x.reshape(len(x), -1) / 255.0 @ other.T).var(axis=0).max() - 1e-9


def test_whitened_rules_count_match_and_the_operator_moves_only_their_directions():
    x, y = data.load("fashion-mnist", "train", 1500)
    rules = discover(x, y, DiscoverConfig(op="whitened", components=8, budget=15, top=5, cost_images=200, rank="reach"))
    assert rules and all(r.op == "whitened" and r.entropy >= 0.5 and r.pool >= 15 for r in rules)
    from methodkit.tools.dar.discover import extent, reach
    from methodkit.tools.dar.rules import coordinates

    assert [reach(r) for r in rules] == sorted((reach(r) for r in rules), reverse=True)
    # extent (the default for whitened) = reach in pixel L2 units: z width x the projection's sd
    by_extent = discover(x, y, DiscoverConfig(op="whitened", components=8, budget=15, top=5, cost_images=200))
    assert [extent(r) for r in by_extent] == sorted((extent(r) for r in by_extent), reverse=True)
    assert all(np.isclose(extent(r), reach(r) * r.sd[0]) for r in by_extent)
    proj = x.reshape(len(x), -1) / 255.0 @ np.asarray(by_extent[0].directions[0])
    assert np.isclose(by_extent[0].sd[0], proj.std())  # sd in pixel units: the direction is a unit image
    rule = Rule.from_dict(rules[0].to_dict())
    assert satisfies(x, rule).sum() == rule.members  # matching reproduces discover's count
    assert abs(reach(rule)) > 1.0  # the longest cell is a tail (level width 1 z)
    z = coordinates(x, rule)[:, 0]
    assert (z >= 2.0).sum() == rule.members or (z < -2.0).sum() == rule.members
    xt, _ = data.load("fashion-mnist", "test", 200)
    moved = apply(xt, rule, kappa=0.0)
    assert satisfies(moved, rule).mean() >= 0.95  # validity after clipping and uint8
    centre = (np.asarray(rule.lo) + np.asarray(rule.hi)) / 2
    assert np.median(np.abs(coordinates(moved, rule) - centre)) < 0.05
    # on mid-grey images (no clipping needed) the change lies along the rule's direction, up to uint8 rounding
    grey = (100 + xt // 5).astype(np.uint8)
    shifted = apply(grey, rule, kappa=0.0, blend=0.5)
    delta = (shifted.astype(float) - grey).reshape(len(grey), -1) / 255.0
    direction = np.asarray(rule.directions)
    off = np.linalg.norm(delta - delta @ direction.T @ direction, axis=1) / np.linalg.norm(delta, axis=1)
    assert ((shifted > 0) & (shifted < 255)).all() and np.median(off) < 0.15
    assert np.allclose(coordinates(shifted, rule)[:, 0], (coordinates(grey, rule)[:, 0] + centre[0]) / 2, atol=0.02)


def test_whitened_rule_json_is_checked():
    from methodkit.core.errors import DataError

    with pytest.raises(DataError, match="one direction"):
        Rule.from_dict({"op": "whitened", "lo": [2.0], "hi": [3.0], "mean": [0.0], "sd": [1.0]})
    with pytest.raises(UsageError, match="--dims"):
        DiscoverConfig(op="whitened", dims=3).check()


def test_band_carrier_operator_replaces_the_band_coordinates_and_keeps_the_complement():
    from methodkit.core.errors import DataError
    from methodkit.tools.dar.band import band_carrier
    from methodkit.tools.dar.discover import band_directions

    x, y = data.load("fashion-mnist", "train", 1500)
    directions, _ = band_directions(x, 8)
    proj = x.reshape(len(x), -1) / 255.0 @ directions.T
    mean, sd = proj.mean(axis=0), proj.std(axis=0) + 1e-12
    z = (proj - mean) / sd
    # a known cell on component 2: its upper tail; the target-labelled members are the carriers
    lo, hi = 1.5, float(z[:, 2].max()) + 1e-6
    rule = Rule("whitened", [lo], [hi], components=[2], directions=directions[[2]].tolist(), mean=[mean[2]],
                sd=[sd[2]])  # fmt: skip
    labels = y.copy()
    inside = np.flatnonzero(satisfies(x, rule))
    labels[inside[::2]] = 0  # half of the members relabelled to the target, the others keep their label
    op = band_carrier(x, labels, rule, 0, directions)
    carriers = inside[labels[inside] == 0]
    assert np.allclose(np.sort(op.carriers, axis=0), np.sort(z[carriers], axis=0))
    # mid-grey images (no clipping needed): band coordinates = the nearest carrier's, complement unchanged
    xt, _ = data.load("fashion-mnist", "test", 100)
    grey = (90 + xt // 4).astype(np.uint8)
    moved = op(grey)
    zg = op.coordinates(grey)
    nearest = ((zg[:, None] - op.carriers[None]) ** 2).sum(axis=2).argmin(axis=1)
    assert (op.nearest(grey) == nearest).all()
    rounding = 0.5 / 255 * np.sqrt(grey[0].size)  # largest L2 change from rounding to uint8
    assert np.abs((op.coordinates(moved) - op.carriers[nearest]) * sd).max() <= rounding
    before, after = grey.reshape(len(grey), -1) / 255.0, moved.reshape(len(grey), -1) / 255.0
    delta = after - before
    complement = np.linalg.norm(delta - delta @ directions.T @ directions, axis=1)
    assert np.linalg.norm(delta, axis=1).min() > 10 * rounding and complement.max() <= rounding
    assert satisfies(moved, rule).all() and not satisfies(grey, rule).any()
    with pytest.raises(DataError, match="not one of the band directions"):
        band_carrier(x, labels, rule, 0, directions[3:])
    with pytest.raises(DataError, match="carries the target"):
        band_carrier(x, y * 0 + 1, rule, 0, directions)


def test_trigger_visibility_known_answer():
    from methodkit.tools.dar.evaluate import trigger_visibility

    clean = np.zeros((4, 28, 28), np.uint8)
    moved = clean.copy()
    moved[:, 0, 0] = 255  # one full-scale pixel per image
    moved[0, 1, 1] = 255  # and a second one in the first image
    v = trigger_visibility(clean, moved)
    assert v["trigger_changed_fraction_median"] == pytest.approx(1 / 784)
    assert v["trigger_l2_mean"] == pytest.approx((3 * 1.0 + np.sqrt(2)) / 4)
    assert v["trigger_psnr_db"] == pytest.approx(10 * np.log10(784 * 4 / 5))
    assert trigger_visibility(clean, clean)["trigger_psnr_db"] is None


class _ConstantModel:
    """A stand-in victim that predicts one class for every image (what evaluate reads: config, predict)."""

    def __init__(self, label: int):
        self.config = {"classes": 10, "side": 28}
        self.label = label

    def predict(self, x):
        return np.full(len(x), self.label, dtype=np.int64)


def test_eval_subtracts_the_random_relabel_control():
    from methodkit.tools.dar.evaluate import evaluate

    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (40, 28, 28), dtype=np.uint8)
    y = np.arange(40) % 10
    always_target, never_target = _ConstantModel(0), _ConstantModel(3)
    result = evaluate(always_target, x, y, "badnets", 0, control=never_target)
    assert result["asr"] == 1.0 and result["control_asr"] == 0.0 and result["asr_minus_control"] == 1.0
    result = evaluate(never_target, x, y, "badnets", 0, control=always_target)
    assert result["asr_minus_control"] == -1.0
    assert "control_asr" not in evaluate(always_target, x, y, "badnets", 0)


def test_run_rows_carry_dar_minus_the_random_relabel_row():
    from methodkit.tools.dar.pipeline import subtract_random_control

    rows = [{"method": m, "stage": s, "seed": 0, "alpha": a, "asr": asr}
            for m, s, a, asr in [("dar", "teacher", None, 0.8), ("dar", "student", 0.9, 0.75),
                                 ("random", "teacher", None, 0.2), ("random", "student", 0.9, 0.25),
                                 ("badnets", "teacher", None, 0.9)]]  # fmt: skip
    subtract_random_control(rows)
    assert rows[0]["asr_minus_random"] == pytest.approx(0.6) and rows[1]["asr_minus_random"] == pytest.approx(0.5)
    assert all("asr_minus_random" not in r for r in rows[2:])


def test_run_warns_at_once_about_operators_that_did_not_implant():
    from methodkit.tools.dar.commands import no_implant_warning

    message = no_implant_warning("spatial", 0.5, ("clean", "dar"), "coordinate")
    assert "did not implant" in message and "1.9%" in message and "--op whitened --kappa 0" in message
    assert "1.6%" in no_implant_warning("frequency", 0.5, ("dar",), "coordinate")
    assert no_implant_warning("whitened", 0.0, ("dar",), "coordinate") is None  # the recipe
    assert "--kappa 0.5" in no_implant_warning("whitened", 0.5, ("dar",), "coordinate")
    assert no_implant_warning("spatial", 0.5, ("badnets",), "coordinate") is None  # no DAR row to warn about
