"""k-best paths kernel against the pure-Python best-first reference on random layered DAGs."""

import numpy as np

from methodkit.tools.mcd import kernels


def _dag(seed, n=40, density=0.25, sources=6):
    rng = np.random.default_rng(seed)
    dense = np.tril(rng.random((n, n)) * (rng.random((n, n)) < density), -1)  # dense[v, u]: edge u -> v, u < v
    dense[:sources] = 0
    rows, cols = np.nonzero(dense)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n))]).astype(np.int64)
    is_source = np.zeros(n, dtype=bool)
    is_source[:sources] = True
    return indptr, cols.astype(np.int64), dense[rows, cols], is_source, dense


def test_k_best_paths_match_the_reference_and_are_real_paths():
    for seed in range(5):
        indptr, idx, w, src, dense = _dag(seed)
        weights, paths = kernels.k_best_paths(indptr, idx, w, src, len(indptr) - 2, 10, 40)
        ref = kernels.k_best_paths_reference(indptr, idx, w, src, len(indptr) - 2, 10)
        assert np.allclose(weights[: len(ref)], [r[0] for r in ref])
        for weight, path in zip(weights, paths):
            nodes = path[path >= 0]
            if weight == 0:
                continue
            assert src[nodes[0]] and nodes[-1] == len(indptr) - 2
            assert np.isclose(np.prod([dense[v, u] for u, v in zip(nodes[:-1], nodes[1:])]), weight)
        assert np.all(np.diff(weights) <= 1e-15)


def test_jitted_and_python_versions_agree():
    indptr, idx, w, src, _ = _dag(7)
    a = kernels.k_best_paths(indptr, idx, w, src, 39, 5, 40)
    b = kernels.k_best_paths.py_func(indptr, idx, w, src, 39, 5, 40)
    assert np.allclose(a[0], b[0]) and np.array_equal(a[1], b[1])
