"""Issue 36 item 7: the partition search's own sub-problems are reused under the signature of their inputs,
with full-search equivalence, exact invalidation and a stale audit."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from methodkit.tools.concord import partition_memo, templates
from methodkit.tools.concord.cache import Cache
from methodkit.tools.concord.candidates import enumerate_candidates
from methodkit.tools.concord.evaluate import WarmValues, unit_channels
from methodkit.tools.concord.search import BISECTION_RTOL, BISECTION_STEPS, plan
from methodkit.tools.concord.verify import compare, verify

from .conftest import SMALL_CLUSTER, SMALL_MODEL


def _edited(small, model_edit=None, cluster_edit=None):
    m, c = copy.deepcopy(SMALL_MODEL), copy.deepcopy(SMALL_CLUSTER)
    if model_edit:
        model_edit(m)
    if cluster_edit:
        cluster_edit(c)
    return small(model=m, cluster=c)


def _inputs(model, cluster, cands):
    """Per candidate (by strategy row): the exact bytes the partition kernel reads, evaluated cold."""
    index = np.arange(len(cands))
    ch, p2p = unit_channels(model, cluster, cands, index, None)
    pp, vpp = cands.columns["pp"], cands.columns["vpp"]
    micro = int(model.globals["global.batch"]) // (cands.columns["mbs"] * cands.columns["dp"])
    limit = (cluster.hbm - cluster.values["hw.reserve"] - ch["transient"].max(axis=1)) / vpp
    out = {}
    for i in range(len(cands)):
        key = tuple(sorted(cands.sigma(i).items()))
        body = [ch["time"][i], ch["state"][i], ch["act"][i], [p2p[i], limit[i], pp[i], vpp[i], min(micro[i], pp[i])]]
        out[key] = b"".join(np.asarray(x, dtype=np.float64).tobytes() for x in body)
    return out


EDITS = {
    "batch x2": (lambda m: m.update(global_batch=128), None),
    "seq x2": (lambda m: m.update(seq=4096), None),
    "hbm": (None, lambda c: c.update(hbm="15GiB")),
    "hbm bandwidth": (None, lambda c: c.update(hbm_bandwidth="1TB/s")),
    "reserve": (None, lambda c: c.update(reserve="2GiB")),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edit_invalidates_exactly_the_partitions_whose_inputs_changed(small, tmp_path, edit):
    model, cluster, space = small()
    new_model, new_cluster, _s = _edited(small, *EDITS[edit])
    cache = Cache(tmp_path)
    plan(model, cluster, space, cache=cache)
    cands = enumerate_candidates(new_model, new_cluster, space, None)
    memo = partition_memo.build(
        new_model, new_cluster, cands, WarmValues(new_model, new_cluster, cands), cache, BISECTION_STEPS,
        BISECTION_RTOL,
    )  # fmt: skip
    cache.close()
    served = memo.known[memo.inverse]
    old = _inputs(model, cluster, enumerate_candidates(model, cluster, space, None))
    new = _inputs(new_model, new_cluster, cands)
    unchanged = np.array([old.get(tuple(sorted(cands.sigma(i).items()))) == new[k] for i, k in enumerate(new)])
    # served = exactly the candidates whose kernel inputs are bitwise those of a cached solve: a key that left
    # out an input would serve a changed one, a key with a needless input would re-solve an unchanged one
    assert np.array_equal(served, unchanged), (int(served.sum()), int(unchanged.sum()))
    assert edit not in ("hbm bandwidth", "batch x2") or served.sum() > 0


@pytest.mark.parametrize("edit", ["batch x2", "seq x2", "hbm bandwidth"])
def test_cached_partitions_give_the_cold_search_bitwise(small, tmp_path, edit):
    model, cluster, space = small()
    new_model, new_cluster, _s = _edited(small, *EDITS[edit])
    cache = Cache(tmp_path)
    plan(model, cluster, space, cache=cache)
    warm = plan(new_model, new_cluster, space, cache=cache)
    again = plan(new_model, new_cluster, space, cache=cache)  # every row served now
    cache.close()
    cold = plan(new_model, new_cluster, space, mode="cold")
    assert again.reuse["partitions"]["misses"] == 0 and again.reuse["partitions"]["hits"] > 0
    for result in (warm, again):
        assert all(compare(result, cold).values())
        assert result.to_dict() == {**cold.to_dict(), "mode": "warm", "reuse": result.reuse}


def test_a_plan_without_cache_solves_each_row_once_and_equals_cold(small):
    model, cluster, space = small()
    warm = plan(model, cluster, space)
    parts = warm.reuse["partitions"]
    assert parts["hits"] == 0 and parts["misses"] == parts["rows"]
    assert all(compare(warm, plan(model, cluster, space, mode="cold")).values())


@pytest.fixture
def slipped_time():
    """dp_sync re-routed into the time channel (a partition input), reading 'hw.hbm_bw' it does not declare."""
    saved = templates.TEMPLATES
    i = next(k for k, t in enumerate(saved) if t.id == "dp_sync")
    old = saved[i]

    def raw(env, kind):
        out = old.raw(env, kind)
        return out + 2e-3 * (2e12 / env["hw.hbm_bw"]) if kind == "embedding" else out

    templates.TEMPLATES = saved[:i] + (dataclasses.replace(old, channel="time", raw=raw),) + saved[i + 1 :]
    templates.instance.cache_clear()
    try:
        yield
    finally:
        templates.TEMPLATES = saved
        templates.instance.cache_clear()


def test_the_audit_catches_stale_partitions_from_an_undeclared_dependency(small, slipped_time):
    model, cluster, space = small()
    _m, slower, _s = _edited(small, None, lambda c: c.update(hbm_bandwidth="1TB/s"))
    report = verify(model, model, cluster, space, trials=1, new_cluster=slower, strict=False).to_dict()
    assert report["audited_partition_hits"] > 0 and report["stale_partition_mismatches"] > 0
    assert not report["equivalent"]
    with pytest.raises(templates.UndeclaredDependency, match="hw.hbm_bw"):
        verify(model, model, cluster, space, trials=1, new_cluster=slower)


def test_gc_keeps_current_partition_entries_and_explain_lists_their_misses(small, tmp_path):
    from methodkit.tools.concord.explain import current_templates, reuse_rows

    model, cluster, space = small()
    cache = Cache(tmp_path)
    result = plan(model, cluster, space, cache=cache)
    assert cache.stats()["templates"]["partition"]["entries"] == 1
    assert cache.gc(current_templates()) == 0 and cache.stats()["templates"]["partition"]["entries"] == 1
    cache.close()
    rows = reuse_rows(result.to_dict())
    assert [r["misses"] for r in rows if r["template"] == "partition"] == [result.reuse["partitions"]["rows"]]


def test_the_audit_catches_a_tampered_partition_entry_and_an_unreadable_one_is_ignored(small, tmp_path):
    import msgpack

    model, cluster, space = small()
    cache = Cache(tmp_path)
    plan(model, cluster, space, cache=cache)
    (blob,) = cache.db.execute("SELECT value FROM entries WHERE template = 'partition'").fetchone()
    cols, k, w, rows_b, ok_b, bounds_b = msgpack.unpackb(blob)
    bounds = np.frombuffer(bounds_b, dtype="<u2").reshape(k, w).copy()
    bounds[:, 1] += 1  # every row's first chunk one unit longer
    tampered = msgpack.packb([cols, k, w, rows_b, ok_b, bounds.tobytes()])
    cache.db.execute("UPDATE entries SET value = ? WHERE template = 'partition'", (tampered,))
    served = plan(model, cluster, space, cache=cache, record_hits=True)
    audited, stale = served.partition_audit()
    assert audited == served.reuse["partitions"]["hits"] > 0 and stale > 0
    cache.db.execute("UPDATE entries SET value = ? WHERE template = 'partition'", (b"\x93junk",))
    fresh = plan(model, cluster, space, cache=cache)
    cache.close()
    assert fresh.reuse["partitions"]["hits"] == 0 and "unreadable" in fresh.reuse["partitions"]["miss_reason"]
    assert all(compare(fresh, plan(model, cluster, space, mode="cold")).values())
