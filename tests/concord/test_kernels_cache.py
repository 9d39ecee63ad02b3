"""Partition kernel against brute force, kernel vs its Python form, and the SQLite cache's guarantees."""

from __future__ import annotations

import itertools
import sqlite3

import numpy as np
import pytest

from methodkit.tools.concord import kernels
from methodkit.tools.concord.cache import Cache


def _brute(t, st, ac, p2p, nchunks, pp, vpp, micro, limit):
    """Minimal bottleneck over every split of the units into nchunks non-empty contiguous chunks."""
    n = len(t)
    best = np.inf
    for cuts in itertools.combinations(range(1, n), nchunks - 1):
        b = (0, *cuts, n)
        ok, worst = True, 0.0
        for c in range(nchunks):
            infl = kernels.inflight(c, pp, vpp, micro)
            mem = sum(st[u] + infl * ac[u] for u in range(b[c], b[c + 1]))
            if mem > limit:
                ok = False
                break
            worst = max(worst, p2p + sum(t[b[c] : b[c + 1]]))
        if ok:
            best = min(best, worst)
    return best


def test_partition_is_exact_against_brute_force():
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(150):
        n = int(rng.integers(3, 10))
        pp = int(rng.integers(1, min(n, 4) + 1))
        t = rng.uniform(0.1, 1.0, n)
        st = rng.uniform(0.0, 1.0, n)
        ac = rng.uniform(0.0, 1.0, n)
        micro = int(rng.integers(1, 8))
        limit = float(rng.uniform(0.5, 8.0))
        p2p = float(rng.uniform(0, 0.1))
        ref = _brute(t, st, ac, p2p, pp, pp, 1, micro, limit)
        bounds = np.zeros(pp + 1, dtype=np.int64)
        ok = kernels.partition_one(t, st, ac, p2p, pp, pp, 1, micro, limit, bounds, 200, 1e-12)
        assert ok == np.isfinite(ref)
        if ok:
            got = max(p2p + t[bounds[c] : bounds[c + 1]].sum() for c in range(pp))
            assert got == pytest.approx(ref, rel=1e-9)
            assert all(bounds[c] < bounds[c + 1] for c in range(pp))
            checked += 1
    assert checked > 40


def test_kernel_equals_its_python_form_and_threads_do_not_matter():
    rng = np.random.default_rng(2)
    c, u = 40, 12
    time, state, act = rng.uniform(0.1, 1, (c, u)), rng.uniform(0, 1, (c, u)), rng.uniform(0, 1, (c, u))
    p2p = rng.uniform(0, 0.05, c)
    pp = rng.choice([1, 2, 4], c).astype(np.int64)
    vpp = rng.choice([1, 2], c).astype(np.int64)
    micro = rng.integers(4, 16, c).astype(np.int64)
    limit = rng.uniform(2, 8, c)
    out = np.zeros((c, 9), dtype=np.int64)
    ok = kernels.partition_min_bottleneck(time, state, act, p2p, pp, vpp, micro, limit, out, 100, 1e-9)
    for i in range(c):
        ref = np.zeros(9, dtype=np.int64)
        r = kernels.partition_one.py_func(
            time[i], state[i], act[i], p2p[i], pp[i] * vpp[i], pp[i], vpp[i], micro[i], limit[i], ref, 100, 1e-9
        )
        assert r == ok[i]
        if r:
            assert np.array_equal(ref[: pp[i] * vpp[i] + 1], out[i, : pp[i] * vpp[i] + 1])


def test_stage_aggregate_against_numpy():
    rng = np.random.default_rng(3)
    c, u = 5, 10
    arrays = [rng.uniform(0, 1, (c, u)) for _ in range(5)]
    p2p = rng.uniform(0, 0.1, c)
    pp = np.array([1, 2, 2, 4, 1], dtype=np.int64)
    vpp = np.array([1, 1, 2, 1, 2], dtype=np.int64)
    micro = np.full(c, 8, dtype=np.int64)
    bounds = np.zeros((c, 9), dtype=np.int64)
    kernels.uniform_partition(u, pp, vpp, bounds)
    outs = [np.zeros((c, 4)) for _ in range(4)]
    kernels.stage_aggregate(*arrays, p2p, pp, vpp, micro, bounds, *outs)
    time, state, act, dp, opt = arrays
    for i in range(c):
        for j in range(pp[i]):
            chunks = [k for k in range(pp[i] * vpp[i]) if k % pp[i] == j]
            sl = [np.arange(bounds[i, k], bounds[i, k + 1]) for k in chunks]
            infl = kernels.inflight(j, pp[i], vpp[i], micro[i])
            assert outs[0][i, j] == pytest.approx(sum(p2p[i] + time[i, s].sum() for s in sl))
            assert outs[1][i, j] == pytest.approx(sum((state[i, s] + infl * act[i, s]).sum() for s in sl))
            assert outs[2][i, j] == pytest.approx(sum(dp[i, s].sum() for s in sl))


def test_uniform_bounds_put_embedding_first_and_head_last():
    b = np.zeros(5, dtype=np.int64)
    kernels.uniform_bounds(12, 4, b)  # 10 blocks + embedding + head
    assert b.tolist() == [0, 4, 7, 9, 12]


def test_cache_is_wal_and_ignores_foreign_versions(tmp_path):
    cache = Cache(tmp_path)
    assert cache.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cache.store([(b"s" * 16, "compute", 1, "abc", "{}", b"p", b"\x90")])
    assert b"s" * 16 in cache.lookup("compute", [b"s" * 16])
    assert cache.lookup("activation", [b"s" * 16]) == {}
    cache.close()


def test_crashed_write_leaves_nothing(tmp_path):
    cache = Cache(tmp_path)
    rows = [(b"a" * 16, "compute", 1, "abc", "{}", b"p", b"\x90"), (b"b" * 16, "compute", 1, "abc", None, b"p", b"x")]
    with pytest.raises(sqlite3.IntegrityError):
        cache.store(rows)  # the second row violates NOT NULL: the whole transaction rolls back
    assert cache.stats()["entries"] == 0
    cache.close()


def test_corrupt_database_is_moved_aside(tmp_path):
    (tmp_path / "concord.sqlite").write_bytes(b"this is not a database" * 100)
    cache = Cache(tmp_path)
    assert cache.warnings and "corrupt" in cache.warnings[0]
    assert cache.stats()["entries"] == 0
    assert list(tmp_path.glob("concord.sqlite.corrupt-*"))
    cache.close()


def test_gc_drops_entries_of_outdated_templates(small, tmp_path):
    from methodkit.tools.concord.explain import current_templates
    from methodkit.tools.concord.search import plan

    model, cluster, space = small()
    cache = Cache(tmp_path)
    plan(model, cluster, space, cache=cache)
    total = cache.stats()["entries"]
    cache.db.execute("UPDATE entries SET code_hash = 'old' WHERE template = 'compute'")
    stale = cache.db.execute("SELECT COUNT(*) FROM entries WHERE template = 'compute'").fetchone()[0]
    assert cache.gc(current_templates()) == stale > 0
    assert cache.stats()["entries"] == total - stale
    cache.close()


def test_concurrent_writers_both_land(tmp_path):
    import threading

    errors = []

    def writer(tag: bytes):
        try:
            cache = Cache(tmp_path)
            for k in range(20):
                cache.store([(tag + bytes([k]) * 15, "compute", 1, "abc", "{}", b"p", b"\x90")])
            cache.close()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(t,)) for t in (b"x", b"y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    cache = Cache(tmp_path)
    assert cache.stats()["entries"] == 40
    cache.close()


def test_every_partition_covers_all_units_even_with_one_chunk():
    """Regression: with one chunk the bisection ends at hi = the forward-summed total, which the
    greedy (summing backwards) could miss by an ulp, leaving unit 0 out of every chunk."""
    rng = np.random.default_rng(0)
    size, units = 400, 42
    t = rng.uniform(0, 0.02, (size, units))
    st, ac = rng.uniform(0, 1e8, (size, units)), rng.uniform(0, 1e8, (size, units))
    p2p = rng.uniform(0, 1e-3, size)
    pp = rng.choice([1, 2, 4, 8], size).astype(np.int64)
    vpp = rng.choice([1, 2, 4], size).astype(np.int64)
    micro = np.full(size, 8, dtype=np.int64)
    bounds = np.zeros((size, 33), dtype=np.int64)
    ok = kernels.partition_min_bottleneck(t, st, ac, p2p, pp, vpp, micro, np.full(size, np.inf), bounds, 100, 1e-9)
    assert ok.all()
    for i in range(size):
        b = bounds[i, : pp[i] * vpp[i] + 1]
        assert b[0] == 0 and b[-1] == units and (np.diff(b) > 0).all(), (i, b)
