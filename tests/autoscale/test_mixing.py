"""Known answers and properties of quotas, retrieval, the GA step and the search fallbacks."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.autoscale import mixing, search


def test_quotas_largest_remainder_known_answer():
    # 10 x (0.45, 0.35, 0.2) = 4.5, 3.5, 2: floors 4, 3, 2, one left -> the largest remainder (first tie)
    assert mixing.quotas(np.array([0.45, 0.35, 0.2]), np.array([100, 100, 100]), 10).tolist() == [5, 3, 2]


def test_quotas_cap_and_redistribute():
    n = mixing.quotas(np.array([0.8, 0.1, 0.1]), np.array([3, 100, 100]), 20)
    assert n.tolist() == [3, 9, 8] or n.tolist() == [3, 8, 9]
    assert n.sum() == 20
    assert mixing.quotas(np.array([0.5, 0.5]), np.array([2, 3]), 10).tolist() == [2, 3]


def test_retrieve_nearest_first_unique_and_filled():
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(200, 8)).astype(np.float32)
    members = np.arange(50, 150)
    q = emb[[60, 70]]
    got = mixing.retrieve(emb, members, q, 10, rng)
    assert len(got) == len(set(got)) == 10 and set(got) <= set(members)
    assert {60, 70} <= set(got)  # each query's own vector is its top hit
    assert len(mixing.retrieve(emb, members, q, 100, rng)) == 100


def test_ascent_moves_toward_positive_gradient_and_smooths():
    w = np.full(4, 0.25)
    new = mixing.ascent(w, np.array([1.0, 0.0, 0.0, -1.0]), 0.5, 0.05)
    assert new[0] > w[0] > new[3] and np.isclose(new.sum(), 1.0)
    assert new.min() >= 0.05 / 4 - 1e-12
    assert np.allclose(mixing.ascent(w, np.zeros(4), 0.5, 0.05), w)


def test_faiss_and_numpy_topk_identical():
    if not search.have_faiss():
        pytest.skip("faiss-cpu not installed")
    rng = np.random.default_rng(1)
    base, q = rng.normal(size=(500, 32)), rng.normal(size=(40, 32))
    s1, i1 = search.topk_ip(base, q, 7, use_faiss=True)
    s2, i2 = search.topk_ip(base, q, 7, use_faiss=False)
    np.testing.assert_array_equal(i1, i2)
    np.testing.assert_allclose(s1, s2, rtol=1e-5)


def test_kmeans_finds_planted_clusters_and_no_empty():
    rng = np.random.default_rng(2)
    centres = np.eye(6, 16) * 5
    x = np.concatenate([c + rng.normal(0, 0.3, (50, 16)) for c in centres])
    cent = search.kmeans(x, 6, seed=0)
    lab = search.assign(x, cent)
    assert np.bincount(lab, minlength=6).min() > 0
    # every planted group maps to one cluster
    assert all(len(set(lab[g * 50 : (g + 1) * 50])) == 1 for g in range(6))
    assert search.knn_purity(x, np.repeat(np.arange(6), 50)) == 1.0


def test_cluster_gradient_sign_on_a_linear_model():
    """g_k > 0 for a cluster whose loss gradient aligns with the val loss gradient, < 0 for one opposed."""
    import torch

    torch.manual_seed(0)
    build = lambda: torch.nn.Linear(2, 2)  # noqa: E731
    model = build()
    loss = lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y, reduction="none")  # noqa: E731
    x = torch.randn(64, 2).numpy().astype(np.float32)
    y_val = (x[:, 0] > 0).astype(np.int64)
    same = (x, y_val)
    flipped = (x, 1 - y_val)
    g = mixing.cluster_gradients([model.state_dict()], build, [same[0], flipped[0]], [same[1], flipped[1]], x,
                                 y_val, np.ones(64), loss)  # fmt: skip
    assert g[0] > 0.99 and g[1] < 0
