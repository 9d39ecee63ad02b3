"""clapping-train through the installed executable."""

from __future__ import annotations

import json

import pytest


def _run(run_cli, *args, cwd, input=None):
    return run_cli(["clapping-train", *args], cwd=cwd, input=input)


def test_run_sim_writes_logs_and_is_deterministic(run_cli, tmp_path):
    args = ["run", "--task", "digits", "--stages", "2", "--steps", "16", "--backend", "sim", "--seed", "3"]
    first = _run(run_cli, *args, "-o", "a", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert result["config"]["stages"] == 2 and result["total_bytes"] > 0
    assert _run(run_cli, *args, "-o", "b", cwd=tmp_path).returncode == 0
    for name in ("log.csv", "comm.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_mlp_csv_from_stdin(run_cli, tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 3))
    y = x @ [1.0, -2.0, 0.5]
    lines = ["a,b,c,kind,y"] + [f"{r[0]},{r[1]},{r[2]},{'uv'[i % 2]},{t}" for i, (r, t) in enumerate(zip(x, y))]
    proc = _run(run_cli, "run", "-", "--task", "mlp-csv", "--target", "y", "--categorical", "kind", "--stages", "2",
                "--steps", "20", "--batch", "32", "--backend", "sim", "-o", "r", cwd=tmp_path, input="\n".join(lines) + "\n")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "rmse" in json.loads(proc.stdout)["val_metric"]


def test_bad_inputs(run_cli, tmp_path, one_line_error):
    proc = _run(run_cli, "run", "--stages", "9", "--backend", "sim", "-o", "x", cwd=tmp_path)
    one_line_error(proc, "clapping-train", "--stages 9: the model has 4 blocks; use 1..4")
    proc = _run(run_cli, "run", "--compressor", "quant:3", "--backend", "sim", "-o", "x", "--force", cwd=tmp_path)
    one_line_error(proc, "clapping-train", "quant bits must be one of (1, 2, 4, 8), got 3")
    proc = _run(run_cli, "run", "--reuse", "0", "--backend", "sim", "-o", "x", "--force", cwd=tmp_path)
    one_line_error(proc, "clapping-train", "--reuse must be at least 1, got 0")
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    proc = _run(
        run_cli,
        "run",
        "t.csv",
        "--task",
        "mlp-csv",
        "--target",
        "y",
        "--backend",
        "sim",
        "-o",
        "x",
        "--force",
        cwd=tmp_path,
    )
    one_line_error(proc, "clapping-train", "column 'y' not found in t.csv (columns: a, b)")


def test_plan_and_bench(shell, run_cli, tmp_path):
    proc = shell("clapping-train plan --task digits --stages 4 | head -1", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == b""
    assert proc.stdout.decode().startswith("stage,params,out_width,exact_bytes,compressed_bytes")
    proc = _run(
        run_cli, "bench", "--compressor", "topk:0.05", "--rows", "8", "--cols", "256", "--repeat", "2", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().splitlines()[0] == "compressor,size,ours_s,ref_s,ratio,reference"


def test_bad_numbers_are_refused_naming_the_flag_and_create_nothing(run_cli, tmp_path, one_line_error):
    cases = [
        (["--batch", "-4"], "--batch must be at least 1, got -4"),
        (["--batch", "0"], "--batch must be at least 1, got 0"),
        (["--lr", "-1"], "--lr must be a positive finite number, got -1.0"),
        (["--lr", "nan"], "--lr must be a positive finite number, got nan"),
        (["--clip", "inf"], "--clip must be a finite number, got inf"),
        (["--bandwidth-mbps", "0"], "--bandwidth-mbps must be a positive finite number, got 0.0"),
    ]
    for flags, message in cases:
        proc = _run(run_cli, "run", *flags, "--stages", "2", "--steps", "4", "-o", "x", cwd=tmp_path)
        line = one_line_error(proc, "clapping-train", message)
        assert line == f"clapping-train: error: {message}", line
        assert not (tmp_path / "x").exists(), flags


def test_infinite_cell_is_refused_by_file_row_and_column(run_cli, tmp_path, one_line_error):
    rows = [f"{i},{2 * i}" for i in range(40)]
    rows[7] = "7,inf"
    (tmp_path / "t.csv").write_text("a,y\n" + "\n".join(rows) + "\n")
    proc = _run(run_cli, "run", "t.csv", "--task", "mlp-csv", "--target", "y", "--stages", "2", "--steps", "4",
                "--batch", "8", "--backend", "sim", "-o", "x", cwd=tmp_path)  # fmt: skip
    line = one_line_error(proc, "clapping-train")
    assert line == "clapping-train: error: t.csv: line 9: column 'y' is infinite; remove or impute it", line
    assert not (tmp_path / "x").exists()


def test_help_documents_only_real_flags(run_cli):
    text = _run(run_cli, "run", "--help", cwd=None).stdout.decode() + _run(run_cli, "--help", cwd=None).stdout.decode()
    assert "--log-every" not in text
    assert "each stage's gradient norm" not in text and "over all stages" in text


def test_gloo_backend_reports_progress_from_rank_0(run_cli, tmp_path):
    args = ["run", "--stages", "2", "--width", "16", "--steps", "12", "--ckpt-every", "0", "--backend", "gloo"]
    proc = _run(run_cli, *args, "-v", "-o", "v", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.decode().splitlines()
    assert lines[0] == "train: started (12 steps)", lines
    assert lines[-1].startswith("train: done in "), lines  # reached only when rank 0 reported step 12


@pytest.mark.slow
def test_gloo_backend_is_quiet_with_q(run_cli, tmp_path):
    args = ["run", "--stages", "2", "--width", "16", "--steps", "12", "--ckpt-every", "0", "--backend", "gloo"]
    quiet = _run(run_cli, *args, "-q", "-o", "q", cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == b"", quiet.stderr
