"""--workers, --fast-bins and the vectorised threshold count: faster, and the same where they must be."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from methodkit.tools.gbdt import attack
from methodkit.tools.gbdt.victim import Victim, metrics

from .helpers import problem


def _victim(seed=0):
    return Victim.from_json('{"num_boost_round": 20, "num_leaves": 7}', threads=1, seed=seed)


@pytest.fixture(scope="module")
def small():
    return problem(300, seed=2)


@pytest.mark.parametrize("search", ["zo", "threshold"])
def test_probe_workers_do_not_change_the_result(small, search):
    cfg = attack.AttackConfig(budget=0.1, eps=1.5, iters=1, q=2, seed=4, search=search)
    results = [attack.run(small, _victim(), replace(cfg, workers=w)) for w in (1, 3)]
    assert results[0].trace == results[1].trace
    np.testing.assert_array_equal(results[0].poisoned, results[1].poisoned)
    assert results[0].after == results[1].after and results[0].fits == results[1].fits


def test_fast_bins_searches_on_clean_bins_but_reports_a_true_retrain(small):
    cfg = attack.AttackConfig(budget=0.1, eps=1.5, iters=2, q=2, seed=4, fast_bins=True)
    r = attack.run(small, _victim(), cfg)
    assert r.feasible.all()
    # the reported victim is a plain retrain (own bins) on the poisoned matrix
    plain = _victim().fit(*r.released_matrix(), small.cat_idx)
    assert metrics(plain, small.X_te, small.y_te)["f1"] == r.after["test_f1"]
    # during the search, retrains borrow the clean bins: J of the clean point is then the clean model's
    assert r.trace[0]["J"] == pytest.approx(r.attacker["clean"]["objective"], abs=1e-12)


def _naive_thresholds(splits, dims, original, poisoned):
    crossed = set()
    for f, thr, _ in splits:
        for b in range(dims.shape[0]):
            for a in range(dims.shape[1]):
                if dims[b, a] == f and (original[b, a] <= thr) != (poisoned[b, a] <= thr):
                    crossed.add((f, thr))
    return len(crossed)


def test_threshold_count_matches_a_naive_loop():
    rng = np.random.default_rng(0)
    splits = [(int(f), float(t), 1.0) for f, t in zip(rng.integers(0, 4, 60), rng.integers(0, 20, 60) + 0.5)]
    splits += [(1, 3.0, 1.0), (1, 3.0, 2.0)]  # a threshold met exactly, twice
    dims = rng.integers(-1, 4, (40, 3))
    original = rng.integers(0, 20, (40, 3)).astype(float)
    poisoned = original + rng.integers(-4, 5, (40, 3))
    poisoned[0, 0], original[0, 0], dims[0, 0] = 3.0, 2.0, 1
    expected = _naive_thresholds(splits, dims, original, poisoned)
    assert expected > 5
    assert attack.thresholds_crossed(splits, dims, original, poisoned) == expected
