"""casper-solve through the installed executable: formats, determinism, bad input, nothing lost."""

from __future__ import annotations

import json

import numpy as np
import pytest

from methodkit.tools.casper.builders import grid_path_spec, sudoku_spec

PROG = "casper-solve"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("casper")


@pytest.fixture(scope="module")
def grid_program(folder):
    import subprocess
    import sys
    from pathlib import Path

    spec = folder / "grid.json"
    spec.write_text(json.dumps(grid_path_spec(4)))
    exe = Path(sys.executable).parent / PROG
    proc = subprocess.run([exe, "compile", spec, "-o", folder / "grid.npz"], capture_output=True)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["structure"] == "flow" and summary["n_vars"] == 16 + 84
    return folder / "grid.npz", summary


def test_compile_stdin_to_stdout_is_a_program(run_cli, folder):
    proc = run_cli([PROG, "compile", "-"], input=json.dumps(sudoku_spec(4)))
    assert proc.returncode == 0, proc.stderr
    import io

    arrays = np.load(io.BytesIO(proc.stdout))
    assert "A_data" in arrays.files


def test_project_file_to_file_and_jsonl(run_cli, folder, grid_program):
    program, summary = grid_program
    scores = np.random.default_rng(0).normal(size=(3, summary["n_vars"]))
    np.save(folder / "scores.npy", scores)
    out = folder / "out.npz"
    proc = run_cli([PROG, "project", folder / "scores.npy", "--program", program, "-o", out])
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert [r["i"] for r in rows] == [0, 1, 2]
    assert all(r["status"] == "ok" and r["certificate"]["valid"] for r in rows)
    arrays = np.load(out)
    assert arrays["soft"].shape == (3, summary["n_vars"]) and arrays["hard"].dtype == np.uint8


def test_project_log_p_decodes_the_probabilities(run_cli, folder, grid_program):
    program, summary = grid_program
    np.save(folder / "scores_p.npy", np.random.default_rng(5).normal(size=(2, summary["n_vars"])))
    proc = run_cli([PROG, "project", folder / "scores_p.npy", "--program", program, "--decode-weights", "log-p"])
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert [r["certificate"]["decoded_from"] for r in rows] == ["probabilities", "probabilities"]


def test_project_from_stdin_and_same_bytes_twice(run_cli, folder, grid_program):
    program, summary = grid_program
    scores = np.random.default_rng(1).normal(size=(2, summary["n_vars"]))
    import io

    buffer = io.BytesIO()
    np.save(buffer, scores)
    outs = []
    for k in range(2):
        target = folder / f"same{k}.npz"
        proc = run_cli([PROG, "project", "-", "--program", program, "-o", target], input=buffer.getvalue())
        assert proc.returncode == 0, proc.stderr
        outs.append(target.read_bytes())
    assert np.array_equal(np.load(io.BytesIO(outs[0]))["hard"], np.load(io.BytesIO(outs[1]))["hard"])


def test_gen_same_seed_same_bytes(run_cli, folder):
    outs = []
    for k in range(2):
        target = folder / f"add{k}.npz"
        proc = run_cli([PROG, "gen", "mnist-add", "--digits", "2", "--n", "5", "--n-test", "5", "-o", target])
        assert proc.returncode == 0, proc.stderr
        outs.append(dict(np.load(target)))
    assert all(np.array_equal(outs[0][k], outs[1][k]) for k in outs[0])


def test_wrong_score_shape_exits_2_and_keeps_existing_output(run_cli, folder, grid_program, one_line_error):
    program, summary = grid_program
    np.save(folder / "bad.npy", np.zeros((2, 7)))
    out = folder / "keep.npz"
    out.write_bytes(b"precious")
    proc = run_cli([PROG, "project", folder / "bad.npy", "--program", program, "-o", out, "--force"])
    one_line_error(proc, PROG, f"scores have shape (2, 7), expected (batch, {summary['n_vars']})")
    assert out.read_bytes() == b"precious"


def test_nan_scores_name_the_instances(run_cli, folder, grid_program, one_line_error):
    program, summary = grid_program
    scores = np.zeros((4, summary["n_vars"]))
    scores[2, 5] = np.nan
    np.save(folder / "nan.npy", scores)
    proc = run_cli([PROG, "project", folder / "nan.npy", "--program", program])
    one_line_error(proc, PROG, "NaN or Inf scores in instances 2; fix them or pass --nan zero")
    proc = run_cli([PROG, "project", folder / "nan.npy", "--program", program, "--nan", "zero"])
    assert proc.returncode == 0


def test_infeasible_spec_exits_2_naming_the_template(run_cli, folder, one_line_error):
    spec = {
        "variables": [{"name": "a", "domain": "bool"}, {"name": "b", "domain": "bool"}],
        "constraints": [
            {"type": "exactly_k", "vars": ["a", "b"], "k": 2},
            {"type": "fixed", "var": "a", "value": 0},
        ],
    }
    proc = run_cli([PROG, "compile", "-", "-o", folder / "never.npz"], input=json.dumps(spec))
    one_line_error(proc, PROG, "admit no solution", "constraints[1] (fixed)")
    assert not (folder / "never.npz").exists()


def test_program_file_that_is_not_a_program(run_cli, folder, one_line_error):
    np.save(folder / "x.npy", np.zeros(3))
    proc = run_cli([PROG, "project", folder / "x.npy", "--program", folder / "x.npy"])
    one_line_error(proc, PROG, "not a casper program")


def test_refuses_to_overwrite_without_force(run_cli, folder, grid_program, one_line_error):
    program, _ = grid_program
    proc = run_cli([PROG, "compile", "-", "-o", program], input=json.dumps(grid_path_spec(4)))
    one_line_error(proc, PROG, "already exists; pass --force")


def test_head_is_quiet(shell, folder, grid_program):
    program, summary = grid_program
    np.save(folder / "many.npy", np.zeros((30, summary["n_vars"])))
    proc = shell(f"casper-solve project {folder / 'many.npy'} --program {program} | head -1")
    assert proc.returncode == 0 and proc.stderr == b""
    assert json.loads(proc.stdout)["i"] == 0


def test_parquet_scores_by_variable_name(run_cli, folder, grid_program, one_line_error):
    import pandas as pd

    program, summary = grid_program
    names = [f"path.v{i // 4}_{i % 4}" for i in range(16)]
    frame = pd.DataFrame(np.zeros((2, 16)), columns=names)
    frame.to_parquet(folder / "partial.parquet")
    proc = run_cli([PROG, "project", folder / "partial.parquet", "--program", program])
    one_line_error(proc, PROG, "missing variable columns path.e0_1")


def test_gen_train_eval_pipeline(run_cli, folder, one_line_error):
    data, model = folder / "tiny.npz", folder / "tiny.safetensors"
    proc = run_cli([PROG, "gen", "warcraft", "--size", "4", "--n", "8", "--n-test", "4", "-o", data])
    assert proc.returncode == 0, proc.stderr
    proc = run_cli([PROG, "train", data, "--epochs", "1", "--batch-size", "4", "-o", model])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.decode().splitlines()[-1])["epoch"] == 1
    assert json.loads(model.with_suffix(".json").read_text())["task"] == "warcraft"
    proc = run_cli([PROG, "eval", data, "--model", model, "-o", folder / "pred.npz"])
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.decode().splitlines()[-1])
    assert summary["instances"] == 4 and summary["valid"] == 1.0
    proc = run_cli([PROG, "eval", data, "--task", "sudoku", "--model", model])
    one_line_error(proc, PROG, "holds a warcraft dataset, not sudoku; pass --task warcraft")


def test_a_baseline_on_the_wrong_task_is_a_usage_error(run_cli, folder, one_line_error):
    data = folder / "tiny-w.npz"
    proc = run_cli([PROG, "gen", "warcraft", "--size", "4", "--n", "4", "--n-test", "2", "-o", data])
    assert proc.returncode == 0, proc.stderr
    proc = run_cli([PROG, "train", data, "--method", "pishield", "-o", folder / "x.safetensors"])
    one_line_error(proc, PROG, "--method pishield applies to --task sudoku or shidoku only, not warcraft")


@pytest.mark.slow
def test_deepproblog_through_the_executable(run_cli, folder):
    pytest.importorskip("deepproblog")
    data, model = folder / "add.npz", folder / "add.safetensors"
    proc = run_cli([PROG, "gen", "mnist-add", "--digits", "1", "--n", "0", "--n-test", "2", "-o", data])
    assert proc.returncode == 0, proc.stderr
    proc = run_cli([PROG, "train", data, "--epochs", "1", "--limit", "32", "-o", model])
    assert proc.returncode == 0, proc.stderr
    proc = run_cli([PROG, "eval", data, "--method", "deepproblog", "--model", model, "--time-limit", "120"])
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.decode().splitlines()[-1])
    assert summary["method"] == "deepproblog" and summary["timeouts"] == 0 and summary["instances"] == 2


def test_eval_reads_the_scale_calibrated_at_the_map_side_from_the_sidecar(tmp_path):
    from methodkit.tools.casper.commands import sidecar_scale as _sidecar_scale

    model = tmp_path / "m.safetensors"
    assert _sidecar_scale(str(model), 12) == 1.0  # no sidecar
    model.with_suffix(".json").write_text(json.dumps({"task": "warcraft", "decode_scale": 4.0}))
    assert _sidecar_scale(str(model), 30) == 4.0  # an older sidecar: one temperature for every side
    sidecar = {"task": "warcraft", "decode_scale": 4.0, "decode_scales": {"12": 4.0, "30": 16.0}}
    model.with_suffix(".json").write_text(json.dumps(sidecar))
    assert [_sidecar_scale(str(model), side) for side in (12, 30, 8, 20, 21, 40)] == [4, 16, 4, 4, 16, 16]


def test_train_calibrates_on_another_map_side(run_cli, folder, one_line_error):
    small, large, model = folder / "c4.npz", folder / "c6.npz", folder / "c.safetensors"
    for path, size in ((small, "4"), (large, "6")):
        proc = run_cli([PROG, "gen", "warcraft", "--size", size, "--n", "6", "--n-test", "2", "-o", path])
        assert proc.returncode == 0, proc.stderr
    args = [PROG, "train", small, "--epochs", "1", "--batch-size", "6", "--calibrate-on", large, "-o", model]
    proc = run_cli(args)
    assert proc.returncode == 0, proc.stderr
    config = json.loads(model.with_suffix(".json").read_text())
    assert set(config["decode_scales"]) == {"4", "6"} and set(config["calibration"]) == {"4", "6"}
    proc = run_cli([PROG, "eval", large, "--model", model])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.decode().splitlines()[-1])["scale"] == config["decode_scales"]["6"]
    proc = run_cli([PROG, "train", small, "--method", "unconstrained", "--calibrate-on", large, "-o", model, "--force"])
    one_line_error(proc, PROG, "--calibrate-on applies to --task warcraft --method casper with --calibrate only")


def test_project_resolves_the_device_flag(run_cli, folder, grid_program, one_line_error):
    # --device is resolved, not passed through: asking for a GPU that is absent fails clearly
    try:
        import cupy  # noqa: F401

        pytest.skip("a GPU stack is present")
    except ImportError:
        pass
    program, summary = grid_program
    np.save(folder / "scores.npy", np.zeros((1, summary["n_vars"])))
    proc = run_cli([PROG, "project", folder / "scores.npy", "--program", program, "--device", "cuda"])
    one_line_error(proc, PROG, "cuda", code=1)
    proc = run_cli([PROG, "project", folder / "scores.npy", "--program", program, "--device", "cpu"])
    assert proc.returncode == 0, proc.stderr


def test_flags_are_checked_before_the_input_is_read(run_cli, tmp_path, one_line_error):
    """issue 22 item 10: the input is garbage, so a flag checked after reading it would be a parse error."""
    missing = tmp_path / "garbage.npy"
    missing.write_bytes(bytes(range(256)))
    one_line_error(run_cli([PROG, "project", missing]), PROG, "missing option '--program'")
    one_line_error(run_cli([PROG, "train", missing]), PROG, "pass -o PATH.safetensors")
    one_line_error(run_cli([PROG, "eval", missing]), PROG, "missing option '--model'")
    (tmp_path / "w.json").write_text("{}\n")
    proc = run_cli([PROG, "train", missing, "-o", tmp_path / "w.safetensors"])
    one_line_error(proc, PROG, "w.json")  # the sidecar that exists, before the dataset is read
    assert "exists" in proc.stderr.decode()


def test_gen_refuses_a_dataset_that_cannot_fit_with_the_estimate(run_cli, tmp_path, one_line_error):
    out = tmp_path / "big.npz"
    proc = run_cli([PROG, "gen", "warcraft", "--size", "3000", "--n", "100000", "-o", out])
    one_line_error(proc, PROG, "--n: a warcraft dataset needs about")
    assert "lower --n" in proc.stderr.decode() and not out.exists()


def test_dataset_bytes_grows_with_every_size_flag():
    from methodkit.tools.casper.tasks import dataset_bytes

    warcraft = dataset_bytes("warcraft", size=12, digits=1, n=100)
    assert dataset_bytes("warcraft", size=24, digits=1, n=100) > 3.9 * warcraft
    assert dataset_bytes("warcraft", size=12, digits=1, n=200) == 2 * warcraft
    assert dataset_bytes("sudoku", size=12, digits=1, n=10) > dataset_bytes("shidoku", size=12, digits=1, n=10)
    assert dataset_bytes("mnist-add", size=12, digits=15, n=10) > dataset_bytes("mnist-add", size=12, digits=1, n=10)
