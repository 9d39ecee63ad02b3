"""core.compress and its Numba kernels: exact byte counts, known answers, EF contraction, fused = unfused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from methodkit.core import compress
from methodkit.core.errors import UsageError
from methodkit.core.kernels import compress as ck


@pytest.fixture
def x():
    return np.random.default_rng(0).standard_normal((8, 300)).astype(np.float32)


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("identity", lambda r, d: r * d * 4),
        ("topk:0.05", lambda r, d: r * math.ceil(0.05 * d) * (2 + 4)),
        ("randk:0.1", lambda r, d: 8 + r * math.ceil(0.1 * d) * 4),
        ("quant:2", lambda r, d: r * math.ceil(d * 2 / 8) + r * 4),
        ("quant:1", lambda r, d: r * math.ceil(d / 8) + r * 4),
        (
            "topk+quant:0.1:4",
            lambda r, d: r * math.ceil(0.1 * d) * 2 + r * math.ceil(math.ceil(0.1 * d) * 4 / 8) + r * 4,
        ),
        ("lowrank:3", lambda r, d: (r * 3 + d * 3) * 4),
    ],
)
def test_bytes_are_exact(x, spec, expected):
    c = compress.parse(spec, x.shape[1])
    assert c.nbytes(c.encode(x)) == expected(*x.shape)


def test_topk_keeps_the_largest_entries(x):
    c = compress.parse("topk:0.05", 300)
    decoded = c.decode(c.encode(x))
    for row, out in zip(x, decoded):
        keep = np.argsort(-np.abs(row))[: c.k]
        np.testing.assert_array_equal(np.flatnonzero(out), np.sort(keep))
        np.testing.assert_array_equal(out[keep], row[keep])


def test_quant_nearest_error_is_half_a_step(x):
    c = compress.parse("quant:4:nearest", 300)
    err = np.abs(c.decode(c.encode(x)) - x)
    scale = np.abs(x).max(axis=1, keepdims=True)
    assert (err <= scale / 15 + 1e-6).all()  # step is 2 * scale / 15; nearest error <= half of it


def test_stochastic_quant_is_unbiased():
    x = np.random.default_rng(1).standard_normal((1, 50)).astype(np.float32)
    c = compress.parse("quant:1", 50, seed=3)
    mean = np.mean([c.decode(c.encode(x)) for _ in range(4000)], axis=0)
    assert np.abs(mean - x).max() < 0.1 * np.abs(x).max()


@pytest.mark.parametrize("spec", ["topk:0.1", "quant:2:nearest", "quant:8"])
def test_fused_delta_update_equals_encode_then_decode(x, spec):
    m0 = np.random.default_rng(2).standard_normal(x.shape).astype(np.float32)
    fused, plain = compress.parse(spec, 300, seed=5), compress.parse(spec, 300, seed=5)
    m_fused = m0.copy()
    payload = fused.delta_update(x, m_fused)
    reference = plain.encode(x - m0)
    for key in payload:
        np.testing.assert_array_equal(payload[key], reference[key])
    np.testing.assert_allclose(m_fused, m0 + plain.decode(reference), atol=1e-6)


@pytest.mark.parametrize("spec", ["topk:0.05", "quant:2", "topk+quant:0.1:4", "lowrank:4"])
def test_error_feedback_tracks_a_fixed_target(x, spec):
    c = compress.parse(spec, 300)
    m = np.zeros_like(x)
    errors = []
    for _ in range(40):
        c.delta_update(x, m)
        errors.append(float(np.linalg.norm(m - x) / np.linalg.norm(x)))
    assert errors[-1] < 0.05 and errors[-1] < errors[0]


def test_kernels_match_python_reference(x):
    idx, val = ck.delta_topk_update(x, np.zeros_like(x), 7)
    py_idx, py_val = ck.delta_topk_update.py_func(x, np.zeros_like(x), 7)
    np.testing.assert_array_equal(idx, py_idx)
    np.testing.assert_array_equal(val, py_val)
    packed, scale = ck.quant_pack(x, 2, 11, True)
    py_packed, py_scale = ck.quant_pack.py_func(x, 2, 11, True)
    np.testing.assert_array_equal(packed, py_packed)
    np.testing.assert_array_equal(scale, py_scale)


def test_contraction_and_bad_specs(x):
    assert compress.contraction(x, x) == 1.0
    assert compress.contraction(x, np.zeros_like(x)) == 0.0
    for spec in ("topk:1.0", "quant:3", "lowrank:0", "nope", "topk"):
        with pytest.raises(UsageError):
            compress.parse(spec, 300)


def _reference_topk(a, m, k):
    """Top-k of |a - m| per row by a full stable sort (ties towards lower columns), indices ascending."""
    delta = a - m
    order = np.argsort(-np.abs(delta), axis=1, kind="stable")[:, :k]
    idx = np.sort(order, axis=1)
    return idx, np.take_along_axis(delta, idx, axis=1)


@pytest.mark.parametrize(
    "case",
    ["gaussian", "heavy-tail", "ties", "one-hot rows", "sorted rows"],
)
def test_sampled_topk_equals_a_full_sort(case):
    # d = 4096 with k = 5% takes the sampled-threshold path; the other cases force its fallbacks
    rng = np.random.default_rng(3)
    rows, d, k = 16, 4096, 205
    a = rng.standard_normal((rows, d)).astype(np.float32)
    if case == "heavy-tail":
        a = rng.standard_cauchy((rows, d)).astype(np.float32)
    elif case == "ties":
        a = rng.integers(-3, 4, (rows, d)).astype(np.float32)
    elif case == "one-hot rows":
        a = np.zeros((rows, d), np.float32)
        a[:, 7] = 1.0
    elif case == "sorted rows":
        a = np.sort(a, axis=1)
    m = rng.standard_normal((rows, d)).astype(np.float32) * 0.1
    want_idx, want_val = _reference_topk(a, m, k)
    m_after = m.copy()
    idx, val = ck.delta_topk_update(a, m_after, k)
    np.testing.assert_array_equal(idx, want_idx)
    np.testing.assert_array_equal(val, want_val)
    expected_m = m.copy()
    np.put_along_axis(expected_m, want_idx, np.take_along_axis(a, want_idx, axis=1), axis=1)
    np.testing.assert_allclose(m_after, expected_m, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("width", [300, 4096])  # the full-row path and the sampled-floor path
def test_topk_writes_exactly_k_valid_columns_when_a_row_has_nan(width):
    # NaN magnitudes used to fail every comparison, so fewer than k entries passed and the
    # receiver scattered through uninitialised indices. Now NaN entries are passed over while k
    # finite ones exist, and fill the row up when fewer do: exactly k valid columns every time.
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, width)).astype(np.float32)
    a[0, [5, 17]] = np.nan
    a[1, :] = np.nan
    k = 40
    idx, val = ck.delta_topk_update(a, np.zeros_like(a), k)
    for r in range(3):
        assert len(set(idx[r].tolist())) == k and idx[r].min() >= 0 and idx[r].max() < width
        assert np.all(np.diff(idx[r]) > 0)
    for r in (0, 2):
        magnitude = np.nan_to_num(np.abs(a[r]), nan=-1.0)
        assert set(idx[r].tolist()) == set(np.argsort(-magnitude, kind="stable")[:k].tolist())
