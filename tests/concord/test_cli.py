"""concord-plan through the installed executable."""

from __future__ import annotations

import csv
import io
import json

import pytest
import yaml

from .conftest import SMALL_CLUSTER, SMALL_MODEL, SMALL_SPACE

PROG = "concord-plan"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "model.yaml").write_text(yaml.safe_dump(SMALL_MODEL))
    (tmp_path / "cluster.json").write_text(json.dumps(SMALL_CLUSTER))
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(SMALL_SPACE))
    edited = {**SMALL_MODEL, "seq": 4096}
    (tmp_path / "model2.yaml").write_text(yaml.safe_dump(edited))
    return tmp_path


def test_help_lists_verbs(run_cli):
    proc = run_cli([PROG, "--help"])
    assert proc.returncode == 0
    for verb in ("plan", "verify", "sweep", "baseline", "explain", "cache", "fixtures", "reference"):
        assert verb in proc.stdout.decode()


def test_plan_stdin_to_stdout_and_file_output_are_identical(run_cli, files):
    model = (files / "model.yaml").read_bytes()
    piped = run_cli([PROG, "plan", "-", "cluster.json", "--space", "space.yaml", "-q"], input=model, cwd=files)
    assert piped.returncode == 0, piped.stderr
    record = json.loads(piped.stdout)
    assert record["candidates"] >= record["feasible"] > 0 and record["step_s"] > 0
    out = run_cli(
        [PROG, "plan", "model.yaml", "cluster.json", "--space", "space.yaml", "-o", "p.json", "--fail-below", "1e6"],
        cwd=files,
    )
    assert out.returncode == 3 and out.stdout == b""  # the plan is written, then the quality gate fails
    assert b"below --fail-below" in out.stderr
    assert (files / "p.json").read_bytes() == piped.stdout  # deterministic: same inputs, same bytes
    assert b"feasible" in out.stderr  # the top-k table goes to stderr


def test_explain_and_cache_verbs(run_cli, shell, files):
    args = [PROG, "plan", "model.yaml", "cluster.json", "--space", "space.yaml", "--cache", "c", "-q"]
    assert run_cli(args, cwd=files).returncode == 0
    args[2] = "model2.yaml"
    proc = run_cli([*args, "-o", "p2.json"], cwd=files)
    assert proc.returncode == 0
    reuse = run_cli([PROG, "explain", "p2.json", "--reuse"], cwd=files).stdout.decode()
    assert "global.seq 2048->4096" in reuse
    from methodkit.tools.concord.explain import layer_rows  # the table explain prints (its CLI: `| head -1` below)

    layers = layer_rows(json.loads((files / "p2.json").read_text()))
    assert list(layers[0])[:3] == ["unit", "kinds", "stage"] and len(layers) == 10
    stats = json.loads(run_cli([PROG, "cache", "stats", "c"], cwd=files).stdout)
    assert stats["entries"] > 0
    cleared = json.loads(run_cli([PROG, "cache", "clear", "c"], cwd=files).stdout)
    assert cleared["entries"] == 0 and cleared["removed"] == stats["entries"]
    quiet = shell(f"cd {files} && {PROG} explain p2.json | head -1")
    assert quiet.stderr == b"" and quiet.stdout.startswith(b"unit,")


def test_verify_reports_equivalence(run_cli, files):
    proc = run_cli(
        [PROG, "verify", "model.yaml", "model2.yaml", "cluster.json", "--space", "space.yaml", "--trials", "1", "-q"],
        cwd=files,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["equivalent"] and report["stale_mismatches"] == 0 and report["audited_hits"] > 0


def test_force_strategy_and_baseline(run_cli, files):
    proc = run_cli(
        [PROG, "plan", "model.yaml", "cluster.json", "--force-strategy", "tp=2,pp=2,mbs=1", "--partition", "uniform"],
        cwd=files,
    )
    record = json.loads(proc.stdout)
    assert record["candidates"] == 1 and record["sigma"]["dp"] == 8
    assert record["best"]["partition"]["blocks_per_chunk"] == [4, 4]
    base = json.loads(run_cli([PROG, "baseline", "model.yaml", "cluster.json"], cwd=files).stdout)
    assert base["mode"] == "baseline" and base["step_s"] > 0


def test_bad_spec_exits_2_with_one_line_and_keeps_the_output(run_cli, files, one_line_error):
    bad = {**SMALL_MODEL, "layers": [{**SMALL_MODEL["layers"][0], "attention": {"heads": 16, "kv_heads": 5}}]}
    (files / "bad.yaml").write_text(yaml.safe_dump(bad))
    (files / "keep.json").write_text("precious")
    proc = run_cli([PROG, "plan", "bad.yaml", "cluster.json", "-o", "keep.json", "--force"], cwd=files)
    one_line_error(
        proc, PROG, "bad.yaml: layers[0].attention.kv_heads: heads 16 is not a multiple of kv_heads 5", code=2
    )
    assert (files / "keep.json").read_text() == "precious"
    assert sorted(p.name for p in files.iterdir() if p.name.startswith(".keep")) == []


def test_bad_units_and_flags(run_cli, files, one_line_error):
    bad = {**SMALL_CLUSTER, "hbm": "16 gigaparsecs"}
    (files / "badc.json").write_text(json.dumps(bad))
    proc = run_cli([PROG, "plan", "model.yaml", "badc.json"], cwd=files)
    one_line_error(proc, PROG, "badc.json: hbm: unknown unit", code=2)
    proc = run_cli([PROG, "plan", "model.yaml", "cluster.json", "--force-strategy", "tp=two"], cwd=files)
    one_line_error(proc, PROG, "--force-strategy: tp must be an integer", code=2)
    proc = run_cli([PROG, "plan", "model.yaml", "cluster.json", "--max-candidates", "5"], cwd=files)
    one_line_error(proc, PROG, "exceed --max-candidates 5", code=2)
    proc = run_cli([PROG, "cache", "stats", "nowhere"], cwd=files)
    one_line_error(proc, PROG, "nowhere: no concord cache here", code=2)


def test_infeasible_and_empty_candidate_sets_exit_1(run_cli, files, one_line_error):
    tiny = {**SMALL_CLUSTER, "hbm": "1.01GiB"}
    (files / "tiny.json").write_text(json.dumps(tiny))
    proc = run_cli([PROG, "plan", "model.yaml", "tiny.json", "--space", "space.yaml"], cwd=files)
    one_line_error(proc, PROG, "no feasible candidate among", "closest miss", code=1)
    proc = run_cli([PROG, "plan", "model.yaml", "cluster.json", "--force-strategy", "tp=32"], cwd=files)
    one_line_error(proc, PROG, "constraint 'heads'", code=1)


def test_fixtures_export_and_sweep(run_cli, files):
    assert run_cli([PROG, "fixtures", "fx", "-q"], cwd=files).returncode == 0
    assert (files / "fx" / "fixtures.yaml").is_file() and (files / "fx" / "edits.yaml").is_file()
    from methodkit.tools.concord.reference import load_table

    table = load_table(yaml.safe_load((files / "fx" / "reference" / "narayanan2021-table1.yaml").read_text()))
    assert len(table.rows) == 10 and "Table 1" in table.source
    # a one-fixture sweep on the small specs, with a two-edit list
    (files / "mine").mkdir()
    for name in ("model.yaml", "cluster.json", "space.yaml"):
        (files / "mine" / name).write_bytes((files / name).read_bytes())
    index = [{"name": "small", "model": "model.yaml", "cluster": "cluster.json", "space": "space.yaml"}]
    (files / "mine" / "fixtures.yaml").write_text(yaml.safe_dump(index))
    edits = [{"name": "seq_x2", "op": "scale", "key": "seq", "factor": 2}, {"name": "bw", "op": "cluster_inter_bw"}]
    (files / "edits.yaml").write_text(yaml.safe_dump(edits))
    proc = run_cli([PROG, "sweep", "mine", "edits.yaml", "--trials", "1", "-q"], cwd=files)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout.decode())))
    assert len(rows) == 2 and {"fixture", "edit", "top1_match", "stale_mismatches", "speedup"} <= set(rows[0])
    assert all(row["ok"] == "True" and row["stale_mismatches"] == "0" for row in rows)
