"""core/kernels/segments.py against plain references on fresh random inputs."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.kernels import segments as K


def _random_ids(rng, n_seg=40):
    lengths = rng.integers(1, 30, n_seg)
    return np.repeat(np.arange(n_seg), lengths).astype(np.int32)


def ref_auc(scores, labels):
    pos, neg = scores[labels == 1], scores[labels == 0]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def test_segment_ops_match_python_loops():
    rng = np.random.default_rng(1)
    ids = _random_ids(rng)
    v = rng.normal(size=len(ids))
    starts = K.segment_starts(ids)
    assert starts[0] == 0 and starts[-1] == len(ids) and len(starts) == 41
    for s in range(40):
        seg = v[ids == s]
        assert K.segment_sum(v, starts)[s] == pytest.approx(seg.sum(), abs=1e-12)
        assert K.segment_mean(v, starts)[s] == pytest.approx(seg.mean(), abs=1e-12)
        rtg, acc = [], 0.0
        for x in seg[::-1]:
            acc = x + 0.9 * acc
            rtg.append(acc)
        np.testing.assert_allclose(K.returns_to_go(v, starts, 0.9)[ids == s], rtg[::-1], atol=1e-12)
    two = np.stack([v, 2 * v], 1)
    np.testing.assert_allclose(K.segment_sum(two, starts)[:, 1], 2 * K.segment_sum(v, starts), atol=1e-12)


def test_roc_auc_with_ties_matches_pairwise_count_and_sklearn():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(2)
    for _ in range(5):
        s = rng.integers(0, 6, 80).astype(float)  # many ties
        y = rng.integers(0, 2, 80)
        assert K.roc_auc(s, y) == pytest.approx(ref_auc(s, y), abs=1e-12)
        assert K.roc_auc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert K.roc_auc(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0, 0, 1, 1])) == 1.0
    assert K.roc_auc(np.ones(4), np.array([0, 1, 0, 1])) == 0.5
    assert np.isnan(K.roc_auc(np.ones(3), np.ones(3, int)))


def test_grubbs_rows_and_critical_value():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(30, 5))
    g, arg = K.grubbs_rows(x)
    for r in range(30):
        dev = np.abs(x[r] - x[r].mean())
        assert g[r] == pytest.approx(dev.max() / x[r].std(ddof=1), abs=1e-12)
        assert arg[r] == dev.argmax()
    assert K.grubbs_critical(5, 0.05) == pytest.approx(1.7150, abs=1e-3)  # published table value
    assert K.grubbs_critical(10, 0.05) == pytest.approx(2.2900, abs=1e-3)


def _exact_nn(q, r, qg=None, rg=None):
    full = ((q[:, None, :].astype(np.float64) - r[None].astype(np.float64)) ** 2).sum(-1)
    if qg is not None:
        full = np.where((qg[:, None] >= 0) & (qg[:, None] == rg[None]), np.inf, full)
    return full.min(1), full.argmin(1)  # argmin: ties to the lowest index


def test_nn1_matches_brute_force_and_skips_same_group():
    rng = np.random.default_rng(4)
    q = rng.normal(size=(70, 5)).astype(np.float32)
    r = rng.normal(size=(300, 5)).astype(np.float32)
    qg, rg = rng.integers(0, 4, 70), rng.integers(0, 4, 300)
    for groups in ((None, None), (qg, rg)):
        d, i = K.nn1(q, r, *groups, block=16, panel=64)  # several query blocks and reference panels
        d_ref, i_ref = _exact_nn(q, r, *groups)
        np.testing.assert_array_equal(i, i_ref)
        np.testing.assert_allclose(d, d_ref, rtol=1e-6)
    assert (rg[i] != qg).all()


def test_nn1_is_exact_on_ties_and_float32_near_ties():
    rng = np.random.default_rng(7)
    # exact ties: points on a small integer grid, many references at the same distance
    q = rng.integers(0, 3, size=(90, 4)).astype(np.float32)
    r = rng.integers(0, 3, size=(260, 4)).astype(np.float32)
    for cap in (16, 2):  # cap 2 overflows: those queries take the full exact scan
        d, i = K.nn1(q, r, block=8, panel=32, cap=cap)
        np.testing.assert_array_equal(i, _exact_nn(q, r)[1])
    # near-ties: far from the origin, the float32 expansion |q|^2 - 2 q.r + |r|^2 misorders neighbours
    q = (50 + rng.normal(0, 0.02, size=(60, 6))).astype(np.float32)
    r = (50 + rng.normal(0, 0.02, size=(400, 6))).astype(np.float32)
    d_ref, i_ref = _exact_nn(q, r)
    q32, r32 = q.astype(np.float32), r.astype(np.float32)
    naive = ((q32**2).sum(1)[:, None] - 2 * q32 @ r32.T + (r32**2).sum(1)[None]).argmin(1)
    assert (naive != i_ref).any()  # the case is a real test of the candidate check
    d, i = K.nn1(q, r, block=8, panel=64)
    np.testing.assert_array_equal(i, i_ref)
    np.testing.assert_allclose(d, d_ref, rtol=1e-6)


def _nn_case(seed):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(70, 5)).astype(np.float32)
    r = rng.normal(size=(300, 5)).astype(np.float32)
    qg, rg = rng.integers(0, 4, 70), rng.integers(0, 4, 300)
    qg[0], rg[:] = 9, np.where(rg == 9, 0, rg)  # query 0's group is absent: it is never masked
    return q, r, qg, rg


def test_nn1_xp_with_numpy_equals_the_numba_kernel():
    from methodkit.core.kernels.nn_xp import nn1_xp

    q, r, qg, rg = _nn_case(5)
    for groups in ((None, None), (qg, rg)):
        d, i = K.nn1(q, r, *groups)
        d2, i2 = nn1_xp(q, r, *groups, xp=np, block=16, rblock=64)  # several tiles on both axes
        np.testing.assert_array_equal(i2, i)
        np.testing.assert_allclose(d2, d, rtol=1e-4, atol=1e-4)
    d3, i3 = nn1_xp(q[:3], r[:2], np.zeros(3), np.zeros(2), xp=np)  # every reference in the query's group
    assert (i3 == -1).all() and np.isinf(d3).all()


@pytest.mark.gpu
def test_nn1_xp_with_cupy_equals_the_numba_kernel():
    pytest.importorskip("cupy")
    from methodkit.core.backend import cuda_available
    from methodkit.core.kernels.nn_xp import nn1_xp

    if not cuda_available():
        pytest.skip("no CUDA device")
    q, r, qg, rg = _nn_case(6)
    d, i = K.nn1(q, r, qg, rg)
    d2, i2 = nn1_xp(q, r, qg, rg, xp="cupy", block=16, rblock=64)
    assert isinstance(d2, np.ndarray)
    np.testing.assert_array_equal(i2, i)
    np.testing.assert_allclose(d2, d, rtol=1e-4, atol=1e-4)
