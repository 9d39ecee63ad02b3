"""irt-sim and irt-fit through the installed executables."""

from __future__ import annotations

import json

import numpy as np
import pytest


def test_help_lists_verbs(run_cli):
    for exe, verbs in (("irt-sim", ("draw", "sweep", "profiles")), ("irt-fit", ("fit", "eval", "bench"))):
        proc = run_cli([exe, "--help"])
        assert proc.returncode == 0
        assert all(v in proc.stdout.decode() for v in verbs)


def test_profiles_list_and_toml(run_cli):
    proc = run_cli(["irt-sim", "profiles"])
    lines = proc.stdout.decode().splitlines()
    assert lines[0].startswith("profile,benchmark,n_items") and len(lines) == 11
    toml = run_cli(["irt-sim", "profiles", "--toml"]).stdout.decode()
    assert "[leaderboard.mmlu]" in toml and "n_items = 14042" in toml


def test_draw_same_seed_same_bytes_and_stdin_pipeline(run_cli, shell, tmp_path):
    args = ["irt-sim", "draw", "-N", "30", "-J", "20", "--seed", "4"]
    one, two = run_cli([*args, "-o", "a.npz"], cwd=tmp_path), run_cli([*args, "-o", "b.npz"], cwd=tmp_path)
    assert one.returncode == two.returncode == 0
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    proc = shell("irt-sim draw -N 30 -J 20 --seed 4 | irt-fit fit - --in-format npz --max-cycles 30", cwd=tmp_path)
    summary = json.loads(proc.stdout.decode().strip())
    assert proc.returncode == 0 and summary["estimator"] == "mml" and summary["n_models"] == 30


def test_fit_to_folder_then_eval(run_cli, tmp_path):
    assert run_cli(["irt-sim", "draw", "-N", "60", "-J", "25", "-o", "d.npz"], cwd=tmp_path).returncode == 0
    proc = run_cli(["irt-fit", "fit", "d.npz", "--out-dir", "f", "--se", "louis"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    items = (tmp_path / "f" / "items.csv").read_text().splitlines()
    assert items[0].startswith("item_id,a,b,c,a_sd,a_ci_low,a_ci_high,b_sd") and len(items) == 26
    info = json.loads((tmp_path / "f" / "fit.json").read_text())
    assert {
        "estimator",
        "settings",
        "n_iter",
        "converged",
        "status",
        "seconds",
        "peak_rss_mb",
        "rhat_max",
        "ess_min",
    } <= set(info)
    metrics = json.loads(run_cli(["irt-fit", "eval", "--truth", "d.npz", "--fit", "f"], cwd=tmp_path).stdout)
    assert metrics["corr_b"] > 0.8 and metrics["coverage_b"] is not None and metrics["sign_flip"] is False
    again = run_cli(["irt-fit", "fit", "d.npz", "--out-dir", "f"], cwd=tmp_path)
    assert again.returncode == 2 and b"--out-dir f: folder exists and is not empty; pass --force" in again.stderr


def test_long_and_headerless_wide_csv(run_cli, tmp_path):
    assert (
        run_cli(
            ["irt-sim", "draw", "-N", "12", "-J", "8", "--format", "csv", "-o", "long.csv"], cwd=tmp_path
        ).returncode
        == 0
    )
    proc = run_cli(["irt-fit", "fit", "long.csv", "--max-cycles", "20"], cwd=tmp_path)
    assert proc.returncode == 0 and json.loads(proc.stdout)["n_items"] == 8
    rng = np.random.default_rng(0)
    wide = "\n".join(",".join(str(v) for v in row) for row in (rng.random((10, 6)) < 0.5).astype(int)) + "\n"
    proc = run_cli(["irt-fit", "fit", "-", "--no-header", "--max-cycles", "20", "--drop-extreme"], input=wide)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "content, args, fragments",
    [
        (
            "model_id,q1,q2,q3\na,1,0,2\nb,0,1,1\n",
            [],
            ["responses must be 0, 1 or empty", "model 'a' item 'q3' = 2", "--binarize"],
        ),
        ("model_id,q1,q2,q3\na,1,0,1\na,0,1,1\n", [], ["duplicate model_id 'a'"]),
        ("model_id,q1,q2,q3\na,1,0,1\nb,0,1,1\n", [], ["2 models x 3 items is too small"]),
        ("model_id,q1,q2\na,1,0\nb,0,1,1\n", [], ["line 3: expected 3 fields, saw 4"]),
        ("model_id,item_id,correct\na,q1,1\na,q1,0\n", [], ["duplicate response for model 'a' item 'q1'"]),
    ],
)
def test_bad_input_one_line_exit_2(run_cli, one_line_error, tmp_path, content, args, fragments):
    (tmp_path / "bad.csv").write_text(content)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "items.csv").write_text("keep\n")
    proc = run_cli(["irt-fit", "fit", "bad.csv", "--out-dir", "out", "--force", *args], cwd=tmp_path)
    one_line_error(proc, "irt-fit", "bad.csv", *fragments)
    assert (tmp_path / "out" / "items.csv").read_text() == "keep\n"


def test_mem_limit_refuses_before_starting(run_cli, one_line_error, tmp_path):
    run_cli(["irt-sim", "draw", "-N", "40", "-J", "30", "-o", "d.npz"], cwd=tmp_path)
    proc = run_cli(["irt-fit", "fit", "d.npz", "--mem-limit", "0.01", "--out-dir", "o"], cwd=tmp_path)
    one_line_error(proc, "irt-fit", "over --mem-limit 0.01 MB")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("flag", ["--time-limit", "--cpu-limit"])
def test_time_limit_keeps_partial_results_exit_1(run_cli, tmp_path, flag):
    run_cli(["irt-sim", "draw", "-N", "20", "-J", "10", "-o", "d.npz"], cwd=tmp_path)
    proc = run_cli(
        ["irt-fit", "fit", "d.npz", "--method", "mcmc", "--warmup", "1000000", flag, "0.5", "--out-dir", "o"],
        cwd=tmp_path,
    )
    assert proc.returncode == 1 and b"status timeout" in proc.stderr
    record = json.loads((tmp_path / "o" / "fit.json").read_text())
    assert record["status"] == "timeout" and record["cpu_seconds"] > 0
    if flag == "--cpu-limit":
        assert record["cpu_limit"] == 0.5 and record["cpu_seconds"] >= 0.5


def test_unknown_profile_and_existing_output(run_cli, one_line_error, tmp_path):
    one_line_error(
        run_cli(["irt-sim", "draw", "--profile", "nope", "-o", "x.npz"], cwd=tmp_path),
        "irt-sim",
        "unknown profile 'nope'",
    )
    (tmp_path / "x.npz").write_text("keep")
    one_line_error(
        run_cli(["irt-sim", "draw", "-N", "5", "-J", "3", "-o", "x.npz"], cwd=tmp_path), "irt-sim", "already exists"
    )
    assert (tmp_path / "x.npz").read_text() == "keep"


def test_head_is_quiet(shell):
    proc = shell("irt-sim draw -N 50 -J 40 --format csv | head -1")
    assert proc.returncode == 0 and proc.stderr == b"" and proc.stdout == b"model_id,item_id,correct\n"


GRID = """
seed = 1
reps = 1
[cells]
n_items = 10
n_models = 15
capability = ["normal", "skewed"]
[estimators]
mml = {max_cycles = 30}
"""


def test_sweep_dry_run_local_dask_resume_report(run_cli, tmp_path):
    (tmp_path / "g.toml").write_text(GRID)
    dry = json.loads(run_cli(["irt-sim", "sweep", "g.toml", "-o", "r.jsonl", "--dry-run"], cwd=tmp_path).stdout)
    assert dry["tasks"] == 2 and dry["pending"] == 2 and dry["estimated_seconds"] > 0
    proc = run_cli(
        ["irt-sim", "sweep", "g.toml", "-o", "r.jsonl", "--report", "s.md", "--table", "t.parquet"], cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["status"] == "ok" for r in rows)
    assert "# irt-sim sweep summary" in (tmp_path / "s.md").read_text() and (tmp_path / "t.parquet").exists()
    again = run_cli(["irt-sim", "sweep", "g.toml", "-o", "r.jsonl"], cwd=tmp_path)
    assert again.returncode == 2 and b"--resume" in again.stderr
    resumed = run_cli(["irt-sim", "sweep", "g.toml", "-o", "r.jsonl", "--resume", "--scheduler", "sync"], cwd=tmp_path)
    assert resumed.returncode == 0 and len((tmp_path / "r.jsonl").read_text().splitlines()) == 2


def test_fit_warns_about_items_at_the_bound(run_cli, tmp_path):
    assert (
        run_cli(["irt-sim", "draw", "-N", "50", "-J", "200", "--seed", "0", "-o", "d.npz"], cwd=tmp_path).returncode
        == 0
    )
    proc = run_cli(["irt-fit", "fit", "d.npz", "--out-dir", "f"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    fit = json.loads((tmp_path / "f" / "fit.json").read_text())
    upper = fit["items_at_bound"]["a_upper"]
    assert fit["n_items_at_bound"] == len(upper) >= 1 and json.loads(proc.stdout)["n_items_at_bound"] == len(upper)
    line = f"irt-fit fit: warning: {len(upper)} item(s) have a at the upper bound 5 (first: {upper[0]}"
    assert line in proc.stderr.decode()


def test_fail_if_unconverged_exits_3_with_outputs_written(run_cli, tmp_path):
    assert (
        run_cli(["irt-sim", "draw", "-N", "30", "-J", "20", "--seed", "5", "-o", "d.npz"], cwd=tmp_path).returncode == 0
    )
    args = ["irt-fit", "fit", "d.npz", "--method", "mcmc", "--warmup", "10", "--draws", "10"]
    plain = run_cli([*args, "--out-dir", "a"], cwd=tmp_path)
    assert plain.returncode == 0 and json.loads(plain.stdout)["converged"] is False
    assert "irt-fit fit: warning: MCMC not converged: R-hat max" in plain.stderr.decode()
    gated = run_cli([*args, "--out-dir", "b", "--fail-if-unconverged"], cwd=tmp_path)
    assert gated.returncode == 3 and (tmp_path / "b" / "fit.json").is_file()
    assert (
        gated.stderr.decode().splitlines()[-1].startswith("irt-fit: error: --fail-if-unconverged: MCMC not converged")
    )
    ok = run_cli(["irt-fit", "fit", "d.npz", "--fail-if-unconverged"], cwd=tmp_path)
    assert ok.returncode == 0 and json.loads(ok.stdout)["converged"] is True


@pytest.mark.parametrize("content", [None, b"not an npz\n"])
def test_nonempty_out_dir_is_refused_before_the_input_is_read(run_cli, one_line_error, tmp_path, content):
    """A folder of unrelated files is refused up front: with a missing or a garbage input, the refusal
    (not the input's error) is what the user sees, and nothing is written into the folder."""
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_bytes(b"keep\n")
    if content is not None:
        (tmp_path / "d.npz").write_bytes(content)
    proc = run_cli(["irt-fit", "fit", "d.npz", "--out-dir", "busy"], cwd=tmp_path)
    one_line_error(proc, "irt-fit", "--out-dir busy: folder exists and is not empty; pass --force")
    assert sorted(p.name for p in (tmp_path / "busy").iterdir()) == ["notes.txt"]
    (tmp_path / "file").write_bytes(b"x\n")
    proc = run_cli(["irt-fit", "fit", "d.npz", "--out-dir", "file"], cwd=tmp_path)
    one_line_error(proc, "irt-fit", "--out-dir file: exists and is not a folder")
