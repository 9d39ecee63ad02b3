"""Issue 36 items 8, 9, 12: the stale-hit audit can be shown without patching code, the raw template's code
hash covers what it executes, and bad targets are refused with one line."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import yaml

from methodkit.tools.concord import templates
from methodkit.tools.concord.verify import verify

from .conftest import SMALL_CLUSTER, SMALL_MODEL, SMALL_SPACE

# dp_sync with 'hw.ib_bw' left out of its declared dependencies: an author's slip the strict proxy refuses
PATCH = """
import dataclasses
from methodkit.tools.concord import templates as t
i = next(k for k, x in enumerate(t.TEMPLATES) if x.id == "dp_sync")
old = t.TEMPLATES[i]
slip = dataclasses.replace(old, declared=lambda kind: tuple(d for d in old.declared(kind) if d != "hw.ib_bw"))
t.TEMPLATES = t.TEMPLATES[:i] + (slip,) + t.TEMPLATES[i + 1:]
t.instance.cache_clear()
"""


@pytest.fixture
def slipped():
    saved = templates.TEMPLATES
    exec(PATCH, {})
    try:
        yield saved
    finally:
        templates.TEMPLATES = saved
        templates.instance.cache_clear()


def _specs(small):
    slower = copy.deepcopy(SMALL_CLUSTER)
    slower["links"]["inter"]["bandwidth"] = "12.5GB/s"
    model, cluster, space = small()
    _m, cluster2, _s = small(cluster=slower)
    return model, cluster, cluster2, space


def test_strict_checking_refuses_an_undeclared_read(small, slipped):
    model, cluster, cluster2, space = _specs(small)
    with pytest.raises(templates.UndeclaredDependency, match="dp_sync.*hw.ib_bw"):
        verify(model, model, cluster, space, trials=1, new_cluster=cluster2)


def test_lax_checking_yields_stale_hits_that_the_audit_catches(small, slipped):
    model, cluster, cluster2, space = _specs(small)
    report = verify(model, model, cluster, space, trials=1, new_cluster=cluster2, strict=False)
    assert report.to_dict()["stale_mismatches"] > 0 and not report.ok
    # the same edit with the declared set intact: the edited bandwidth misses, nothing is stale
    templates.TEMPLATES = slipped
    templates.instance.cache_clear()
    clean = verify(model, model, cluster, space, trials=1, new_cluster=cluster2, strict=False)
    assert clean.ok and clean.to_dict()["stale_mismatches"] == 0


def test_verify_flag_exits_3_on_stale_hits_and_strict_is_one_line_exit_1(tmp_path):
    slower = copy.deepcopy(SMALL_CLUSTER)
    slower["links"]["inter"]["bandwidth"] = "12.5GB/s"
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(SMALL_MODEL))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(SMALL_CLUSTER))
    (tmp_path / "c2.yaml").write_text(yaml.safe_dump(slower))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(SMALL_SPACE))
    args = ["verify", "m.yaml", "m.yaml", "c.yaml", "--cluster-new", "c2.yaml", "--space", "s.yaml", "--trials", "1"]
    script = (
        PATCH
        + "import sys\nfrom methodkit.cli.concord_plan import main\nsys.argv = ['concord-plan'] + sys.argv[1:]\nmain()\n"
    )

    def run(*extra):
        return subprocess.run([sys.executable, "-c", script, *args, *extra], capture_output=True, cwd=tmp_path)

    lax = run("--no-dependency-check", "-q")
    assert lax.returncode == 3, lax.stderr
    assert json.loads(lax.stdout)["stale_mismatches"] > 0
    strict = run("-q")
    lines = strict.stderr.decode().strip().splitlines()
    assert strict.returncode == 1 and len(lines) == 1 and "undeclared symbol 'hw.ib_bw'" in lines[0], lines


def test_raw_template_hash_covers_the_helpers_it_calls(monkeypatch):
    before = templates.instance("dp_sync", "mlp_dense").code_hash

    def _steps(n):  # same name, another body: an edit of a helper without a version bump
        import numpy as np

        return np.ceil(np.log2(np.maximum(np.asarray(n, dtype=np.float64), 1.0)))

    monkeypatch.setattr(templates, "_steps", _steps)
    templates.instance.cache_clear()
    try:
        after = templates.instance("dp_sync", "mlp_dense").code_hash
    finally:
        monkeypatch.undo()
        templates.instance.cache_clear()
    assert after != before
    assert templates.instance("dp_sync", "mlp_dense").code_hash == before  # deterministic


def test_fixtures_refuse_a_folder_whose_parent_is_missing(run_cli, tmp_path, one_line_error):
    target = tmp_path / "missing" / "deeper" / "fx"
    proc = run_cli(["concord-plan", "fixtures", str(target)])
    one_line_error(proc, "concord-plan", "does not exist")
    assert not (tmp_path / "missing").exists()
    assert run_cli(["concord-plan", "fixtures", str(tmp_path / "fx"), "-q"]).returncode == 0


@pytest.mark.parametrize("tp_max", [8, 16])
def test_an_inter_node_bandwidth_edit_keeps_the_collectives_that_stay_in_a_node(small, tp_max, tmp_path):
    """Item 11: with tp <= devices per node, tp_comm never reads the inter-node link, so it hits."""
    from methodkit.tools.concord.verify import run_trial

    slower = copy.deepcopy(SMALL_CLUSTER)
    slower["links"]["inter"]["bandwidth"] = "12.5GB/s"
    slower["links"]["inter"]["latency"] = "20us"
    model, cluster, _ = small()
    _m, cluster2, space = small(cluster=slower, space={**SMALL_SPACE, "tp_max": tp_max})
    trial, warm = run_trial(model, model, cluster, cluster2, space, cache_dir=tmp_path)
    assert trial.ok and trial.stale_mismatches == 0 and trial.audited == trial.hits
    tp = warm.reuse["by_template"]["tp_comm"]
    if tp_max == 8:
        assert tp["misses"] == 0 and tp["hits"] > 0
    else:  # some tp groups span two nodes: the edit reaches tp_comm
        assert tp["misses"] > 0
    assert warm.reuse["by_template"]["dp_sync"]["misses"] > 0  # the data-parallel sync does leave the node


def test_verify_reports_three_columns_cold_warm_without_and_with_the_cache(small):
    """Item 7: the cache's own speedup (warm without cache / warm with it) is reported beside the total."""
    model, cluster, space = small()
    edited = copy.deepcopy(SMALL_MODEL)
    edited["seq"] = 4096
    _m2, _c, _s = small(model=edited)
    report = verify(model, _m2, cluster, space, trials=1).to_dict()
    trial = report["trials"][0]
    assert trial["cold_s"] > 0 and trial["warm_s"] > 0 and trial["warm_nocache_s"] > 0
    assert trial["cache_speedup"] == pytest.approx(trial["warm_nocache_s"] / trial["warm_s"])
    assert report["median_cache_speedup"] == pytest.approx(trial["cache_speedup"])


def test_plan_and_explain_split_stage_memory_into_state_and_activations(small, run_cli, tmp_path):
    """Item 10: per stage, weights+optimizer state and activations (with the microbatches in flight) add up
    to the stage memory; 1F1B keeps min(pp - j, microbatches) in flight on stage j (vpp = 1)."""
    import csv
    import io

    from methodkit.tools.concord.candidates import parse_forced
    from methodkit.tools.concord.search import plan

    model, cluster, space = small()
    result = plan(model, cluster, space, forced=parse_forced("tp=2,pp=4,mbs=1", cluster), top_k=1)
    best = result.best
    pp = best["sigma"]["pp"]
    assert pp == 4 and best["sigma"]["vpp"] == 1
    micro = best["microbatches"]
    assert best["stage_inflight_microbatches"] == [float(min(pp - j, micro)) for j in range(pp)]
    transient = best["stage_memory_bytes"][0] - best["stage_state_bytes"][0] - best["stage_activation_bytes"][0]
    assert transient >= 0
    for j in range(pp):
        total = best["stage_state_bytes"][j] + best["stage_activation_bytes"][j] + transient
        assert total == pytest.approx(best["stage_memory_bytes"][j], rel=1e-12)
    (tmp_path / "plan.json").write_text(json.dumps(result.to_dict()))
    rows = list(
        csv.DictReader(io.StringIO(run_cli(["concord-plan", "explain", tmp_path / "plan.json"]).stdout.decode()))
    )
    assert {"stage_state_gib", "stage_activation_gib", "stage_inflight_mb"} <= set(rows[0])
    assert float(rows[0]["stage_inflight_mb"]) == min(pp, micro)
