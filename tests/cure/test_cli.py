"""cure-unlearn through the installed executable: help, refusals (exit 2, one line, nothing written),
existing outputs, same seed same tensors, and audit's --fail-above gate (exit 3)."""

from __future__ import annotations

import json

import pytest

QUIET = ["-j", "1", "-q"]


def _line(proc) -> str:
    text = proc.stderr.decode()
    assert proc.stdout == b"", proc.stdout[:200]
    assert text.count("\n") == 1, text
    return text.strip()


def test_help_lists_verbs_and_examples(run_cli):
    proc = run_cli(["cure-unlearn", "--help"])
    out = proc.stdout.decode()
    assert proc.returncode == 0
    for word in ("collect", "train", "forget", "audit", "EXAMPLES", "EXIT STATUS"):
        assert word in out
    for verb in ("collect", "train", "forget", "audit"):
        assert run_cli(["cure-unlearn", verb, "--help"]).returncode == 0


def test_forget_refusals_exit_2_and_write_nothing(run_cli, tiny_files, tmp_path):
    folder, data, model = tiny_files
    out = tmp_path / "u.safetensors"
    ids = tmp_path / "ids.txt"
    cases = [
        ("5\n5\n", "duplicated ids 5"),
        ("3\n99999\n", "ids not in"),
        ("", "no forget set"),
    ]
    for text, message in cases:
        ids.write_text(text)
        proc = run_cli(["cure-unlearn", "forget", model, data, "--forget", ids, "-o", out, *QUIET])
        assert proc.returncode == 2, proc.stderr
        line = _line(proc)
        assert line.startswith("cure-unlearn: error:") and message in line, line
        assert not out.exists()
    proc = run_cli(["cure-unlearn", "forget", model, data, "--forget-contributor", "F-mix", "--algo", "iql",
                    "-o", out, *QUIET])  # fmt: skip
    assert proc.returncode == 2 and "a td3bc model, not iql" in _line(proc)
    proc = run_cli(["cure-unlearn", "forget", model, data, "--forget-contributor", "Nobody", "-o", out, *QUIET])
    assert proc.returncode == 2 and "no contributor 'Nobody'" in _line(proc)
    assert not out.exists()


def test_dataset_mismatch_is_refused_unless_allowed(run_cli, tiny_files, tmp_path):
    folder, data, model = tiny_files
    other = tmp_path / "other.npz"
    assert run_cli(["cure-unlearn", "collect", "--scale", "0.1", "--chunk", "40", "--behaviour", "cpg", "--seed", "5", "-o", other,
                    *QUIET]).returncode == 0  # fmt: skip
    out = tmp_path / "u.safetensors"
    argv = ["cure-unlearn", "forget", model, other, "--forget-contributor", "F-mix", "--steps", "4",
            "--baseline-steps", "4", "--calib-trajs", "4", "-o", out, *QUIET]  # fmt: skip
    proc = run_cli(argv)
    assert proc.returncode == 2 and "--allow-dataset-mismatch" in _line(proc) and not out.exists()
    proc = run_cli([*argv, "--allow-dataset-mismatch"])
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["method"] == "cure" and result["steps"] == 4 and out.exists()


def test_bad_data_and_existing_output(run_cli, tiny_files, tmp_path):
    folder, data, model = tiny_files
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not an npz")
    out = tmp_path / "m.safetensors"
    proc = run_cli(["cure-unlearn", "train", bad, "-o", out, *QUIET])
    assert proc.returncode == 2 and "not a NPY/NPZ file" in _line(proc) and not out.exists()
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"env": "HalfCheetah-v5", "chunk": 1, "contributors": []}))
    proc = run_cli(["cure-unlearn", "collect", "--spec", spec, "-o", tmp_path / "d.npz", *QUIET])
    assert proc.returncode == 2 and "chunk must be an integer >= 2" in _line(proc)
    out.write_text("keep")
    proc = run_cli(["cure-unlearn", "train", data, "--steps", "2", "--hidden", "8", "-o", out, *QUIET])
    assert proc.returncode == 2 and out.read_text() == "keep"


def test_same_seed_same_tensors(run_cli, tiny_files, tmp_path):
    from safetensors.numpy import load_file

    folder, data, model = tiny_files
    paths = []
    for k, seed in enumerate((0, 0, 1)):
        path = tmp_path / f"m{k}.safetensors"
        proc = run_cli(["cure-unlearn", "train", data, "--steps", "6", "--hidden", "8", "--seed", seed, "-o", path,
                        *QUIET])  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        paths.append(load_file(path))
    assert all((paths[0][k] == paths[1][k]).all() for k in paths[0])
    assert any((paths[0][k] != paths[2][k]).any() for k in paths[0])


@pytest.mark.parametrize("threshold, code", [("0", 3), ("1000", 0)])
def test_audit_fail_above(run_cli, tiny_files, tmp_path, threshold, code):
    folder, data, model = tiny_files
    retrain = folder / "retrain.safetensors"
    if not retrain.exists():
        assert run_cli(["cure-unlearn", "train", data, "--steps", "30", "--hidden", "32", "--exclude-contributor",
                        "F-mix", "-o", retrain, *QUIET]).returncode == 0  # fmt: skip
    proc = run_cli(["cure-unlearn", "audit", data, "--original", model, "--reference-retrain", retrain, model,
                    "--forget-contributor", "F-mix", "--episodes", "1", "--max-episode-steps", "20", "--shadows",
                    "3", "--shadow-steps", "3", "--fail-above", threshold, *QUIET])  # fmt: skip
    assert proc.returncode == code, proc.stderr
    report = json.loads(proc.stdout)
    row = report["models"][0]
    assert row["return_ratio"] == pytest.approx(1.0) and row["fir"] == pytest.approx(1.0)
    assert 0 <= row["mia_auc"] <= 1 and 0 <= row["unlearn_rate"] <= 1
