"""CONCORD's contract: a warm re-plan equals the cache-disabled full search, and the audit can tell."""

from __future__ import annotations

import copy

import msgpack
import numpy as np
import pytest

from methodkit.tools.concord import spec
from methodkit.tools.concord.cache import Cache
from methodkit.tools.concord.evaluate import decode_value, encode_value
from methodkit.tools.concord.fixtures import EDITS, apply_edit
from methodkit.tools.concord.search import plan
from methodkit.tools.concord.verify import audit, compare, run_trial


@pytest.mark.parametrize("which", ["dense", "moe"])
@pytest.mark.parametrize("edit", EDITS, ids=[e["name"] for e in EDITS])
def test_warm_replan_equals_cold_full_search(docs, which, edit):
    dense, moe, cluster_doc, space_doc = docs
    model_doc = dense if which == "dense" else moe
    space = spec.load_space(space_doc)
    old, cluster = spec.load_model(model_doc), spec.load_cluster(cluster_doc)
    new_doc, new_cluster_doc = apply_edit(model_doc, cluster_doc, edit)
    new, new_cluster = spec.load_model(new_doc), spec.load_cluster(new_cluster_doc)
    trial, warm = run_trial(old, new, cluster, new_cluster, space, top_k=5)
    assert trial.candidates_warm == trial.candidates_cold
    assert trial.feasible_warm == trial.feasible_cold
    assert trial.top1_match and trial.topk_match and trial.steps_bitwise
    assert trial.stale_mismatches == 0 and trial.audited == trial.hits
    assert trial.hits > 0  # every edit leaves some primitive untouched
    cold = plan(new, new_cluster, space, mode="cold", top_k=5)
    assert warm.reuse["rows_evaluated"] < cold.reuse["rows_evaluated"] / 5


def test_seq_edit_misses_activation_and_compute_but_hits_parameters(small, tmp_path):
    model, cluster, space = small()
    cache = Cache(tmp_path)
    plan(model, cluster, space, cache=cache)
    doc = copy.deepcopy(model.raw)
    doc["seq"] *= 2
    warm = plan(spec.load_model(doc), cluster, space, cache=cache)
    by = warm.reuse["by_template"]
    assert by["activation"]["hits"] == 0 and by["compute"]["hits"] == 0
    assert by["params_dense"]["misses"] == 0 and by["state"]["misses"] == 0 and by["optimizer"]["misses"] == 0
    assert any("global.seq" in r["reason"] for r in warm.reuse["miss_reasons"])
    cache.close()


def test_identical_layers_share_one_evaluation(small):
    model, cluster, space = small()
    result = plan(model, cluster, space)
    # 8 identical blocks: each block template is evaluated once, the other 7 reuse it
    assert result.reuse["unique_signatures"] < result.reuse["instances"] / 3
    assert result.reuse["intra_run_reuse"] == result.reuse["instances"] - result.reuse["unique_signatures"]


def test_audit_catches_a_tampered_cache_entry(small, tmp_path):
    model, cluster, space = small()
    cache = Cache(tmp_path)
    plan(model, cluster, space, cache=cache)
    sig, value = cache.db.execute("SELECT sig, value FROM entries WHERE template = 'compute' LIMIT 1").fetchone()
    forged = decode_value(value) * (1 + 1e-15) + 1e-30
    cache.db.execute("UPDATE entries SET value = ? WHERE sig = ?", (encode_value(forged), sig))
    warm = plan(model, cluster, space, cache=cache, record_hits=True)
    audited, stale = audit(warm)
    assert audited == warm.reuse["hits"] and stale == 1
    cache.close()


def test_entries_with_another_version_or_code_hash_are_not_trusted(small, tmp_path):
    model, cluster, space = small()
    cache = Cache(tmp_path)
    cold = plan(model, cluster, space, mode="cold")
    plan(model, cluster, space, cache=cache)
    cache.db.execute("UPDATE entries SET code_hash = 'stale', value = ?", (msgpack.packb([0.0]),))
    warm = plan(model, cluster, space, cache=cache)
    assert warm.reuse["hits"] == 0
    assert all(compare(warm, cold).values())
    cache.close()


def test_cold_search_is_a_pure_function_of_its_inputs(small):
    model, cluster, space = small()
    a = plan(model, cluster, space, mode="cold")
    b = plan(model, cluster, space, mode="cold", block=300)  # block size changes nothing
    assert np.array_equal(a.scored.step.view(np.uint64), b.scored.step.view(np.uint64))


def test_value_encoding_is_exact_and_reads_the_older_list_layout():
    x = np.array([0.1, 1e-300, -2.5, np.pi, 7.0])
    assert np.array_equal(decode_value(encode_value(x)), x) and decode_value(encode_value(x)).dtype == np.float64
    assert np.array_equal(decode_value(msgpack.packb([float(v) for v in x])), x)
