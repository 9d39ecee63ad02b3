"""autoscale-mix through the installed executable: the command-line contract and the bad inputs."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests.conftest import assert_one_line_error

PROG = "autoscale-mix"


def test_help_lists_verbs_and_exit_status(run_cli):
    proc = run_cli([PROG, "--help"])
    assert proc.returncode == 0
    for verb in ("pools", "embed", "run", "eval"):
        assert verb in proc.stdout.decode()
    for verb in ("pools", "embed", "run", "eval"):
        assert "EXIT STATUS" in run_cli([PROG, verb, "--help"]).stdout.decode()


def test_bad_spec_key_exit_2_nothing_written(run_cli, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"real": 100, "lanes": 3}))
    proc = run_cli([PROG, "pools", str(spec), "-o", str(tmp_path / "out")])
    assert_one_line_error(proc, PROG, "unknown key 'lanes'")
    assert not (tmp_path / "out").exists()


def test_bad_synth_mix_exit_2(run_cli, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"synth_mix": {"cruise": 0.5, "jam": 0.2}}))
    assert_one_line_error(run_cli([PROG, "pools", str(spec), "-o", str(tmp_path / "o")]), PROG, "summing to 1")


@pytest.fixture
def folder(embedded, tmp_path):
    src = embedded[0]
    dst = tmp_path / "pools"
    shutil.copytree(src, dst)
    return dst


def test_budget_out_of_range_exit_2(run_cli, folder, tmp_path):
    proc = run_cli([PROG, "run", str(folder), "-o", str(tmp_path / "r"), "--budget", "100000"])
    assert_one_line_error(proc, PROG, "--budget 100000 is outside [1, 300]")
    assert not (tmp_path / "r").exists()


def test_embedding_rows_mismatch_exit_2(run_cli, folder, tmp_path):
    np.save(folder / "emb.npy", np.zeros((5, 32), dtype=np.float32))
    proc = run_cli([PROG, "run", str(folder), "-o", str(tmp_path / "r")])
    assert_one_line_error(proc, PROG, "emb.npy", "expected [440, d]")


def test_nan_embedding_exit_2_names_rows(run_cli, folder, tmp_path):
    emb = np.load(folder / "emb.npy")
    emb[7, 3] = np.nan
    np.save(folder / "emb.npy", emb)
    assert_one_line_error(run_cli([PROG, "run", str(folder), "-o", str(tmp_path / "r")]), PROG, "rows [7]")


def test_leakage_exit_2_unless_allowed(run_cli, folder, tmp_path):
    # a val scene copied into the real train pool
    with np.load(folder / "real.npz") as z:
        real = dict(z)
    with np.load(folder / "val.npz") as z:
        val = dict(z)
    for key in real:
        if key != "meta":
            real[key] = real[key].copy()
            real[key][0] = val[key][0]
    np.savez(folder / "real.npz", **real)
    proc = run_cli([PROG, "run", str(folder), "-o", str(tmp_path / "r")])
    assert_one_line_error(proc, PROG, "val scene id", "--allow-overlap")


def test_schema_error_names_key(run_cli, folder, tmp_path):
    with np.load(folder / "test.npz") as z:
        test = {k: v for k, v in z.items() if k != "cand_scores"}
    np.savez(folder / "test.npz", **test)
    proc = run_cli([PROG, "embed", str(folder), "-o", str(tmp_path / "e")])
    assert_one_line_error(proc, PROG, "missing key cand_scores")


def test_run_then_eval_through_the_cli(run_cli, folder, tmp_path, shell):
    """The default-run twin of the slow test below: one tiny run (closed-loop feedback), eval = its test
    figure through a pipe, the run folder refused the second time. Same seed = same bytes is checked in
    process (test_run_files_same_seed_same_bytes) and through the CLI in the slow test."""
    args = ["--budget", "30", "--rounds", "1", "--clusters", "4", "--steps", "20", "--batch-size", "16", "-j", "1"]
    a = run_cli([PROG, "run", str(folder), "-o", str(tmp_path / "a"), *args, "--eval", "closed-loop", "-q"])
    assert a.returncode == 0, a.stderr.decode()
    out = json.loads(a.stdout)
    assert out["eval"] == "closed-loop" and set(out["val_closed_loop"]) >= {"score", "ds", "rc", "penalty"}
    for name in ("mixture.json", "selected.csv", "rounds.jsonl", "planner.safetensors"):
        assert (tmp_path / "a" / name).is_file()
    piped = shell(f"{PROG} eval {tmp_path / 'a' / 'planner.safetensors'} {folder / 'test.npz'} -q | head -1")
    assert piped.returncode == 0 and piped.stderr == b""
    assert json.loads(piped.stdout)["pdms"] == pytest.approx(out["test"]["pdms"])
    again = run_cli([PROG, "run", str(folder), "-o", str(tmp_path / "a"), *args, "-q"])
    assert_one_line_error(again, PROG, "not empty", "--force")


def test_run_files_same_seed_same_bytes(embedded, tmp_path):
    from methodkit.tools.autoscale import data, runner
    from methodkit.tools.autoscale.files import write_folder

    folder, arrays, metas, _, _ = embedded
    emb = data.read_embeddings(folder, arrays)
    cfg = runner.config("autoscale", 40, 2, 4, 30, 16, 0.5, 0.5, "hypergrad", "resample")
    outs = []
    for name in ("a", "b"):
        result, files = runner.run(arrays, metas, emb, cfg, seed=4)
        write_folder(tmp_path / name, files, lambda *p: None)
        outs.append(json.dumps(result, sort_keys=True))
    assert outs[0] == outs[1]
    for name in ("mixture.json", "selected.csv", "rounds.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


@pytest.mark.slow
def test_run_eval_end_to_end_same_seed_same_bytes(run_cli, folder, tmp_path, shell):
    args = ["--budget", "60", "--rounds", "2", "--clusters", "4", "--steps", "60", "--batch-size", "32", "-j", "1"]
    a = run_cli([PROG, "run", str(folder), "-o", str(tmp_path / "a"), *args, "-q"])
    assert a.returncode == 0, a.stderr.decode()
    out = json.loads(a.stdout)
    assert set(out["test"]) == {"nc", "dac", "ttc", "ep", "comfort", "pdms"}
    b = run_cli([PROG, "run", str(folder), "-o", str(tmp_path / "b"), *args, "-q"])
    assert a.stdout == b.stdout
    for name in ("mixture.json", "selected.csv", "rounds.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    rounds = [json.loads(x) for x in (tmp_path / "a" / "rounds.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rounds] == [0, 1]
    ev = run_cli([PROG, "eval", str(tmp_path / "a" / "planner.safetensors"), str(folder / "test.npz"),
                  "--per-scene", str(tmp_path / "ps.csv"), "-q"])  # fmt: skip
    assert ev.returncode == 0, ev.stderr.decode()
    summary = json.loads(ev.stdout)
    assert summary["pdms"] == pytest.approx(out["test"]["pdms"])
    lines = (tmp_path / "ps.csv").read_text().splitlines()
    assert lines[0] == "scene_id,candidate,nc,dac,ttc,ep,comfort,pdms" and len(lines) == 41
    again = run_cli([PROG, "run", str(folder), "-o", str(tmp_path / "a"), *args, "-q"])
    assert_one_line_error(again, PROG, "not empty", "--force")
    piped = shell(f"{PROG} eval {tmp_path / 'a' / 'planner.safetensors'} {folder / 'test.npz'} -q | head -1")
    assert piped.returncode == 0 and piped.stderr == b""


def test_eval_rejects_non_planner(folder):
    # in process (the exit-2 mapping of DataError is the CLI contract the tests above check)
    from methodkit.core.errors import DataError
    from methodkit.tools.autoscale import runner

    with pytest.raises(DataError, match="not an autoscale-mix planner checkpoint"):
        runner.evaluate_file(folder / "graphrae.safetensors", folder / "test.npz")
