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
    cases = [("5\n5\n", "duplicated ids 5")]  # the other id refusals: tests/cure/test_data.py
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
    from methodkit.core import io
    from methodkit.tools.cure.data import Spec, collect, default_spec

    from .conftest import TINY_SPEC

    folder, data, model = tiny_files
    other = tmp_path / "other.npz"
    io.write_arrays(other, collect(Spec.parse(default_spec(**TINY_SPEC)), seed=5))
    out = tmp_path / "u.safetensors"
    argv = ["cure-unlearn", "forget", model, other, "--forget-contributor", "F-mix", "--steps", "4",
            "--baseline-steps", "4", "--calib-trajs", "4", "-o", out, *QUIET]  # fmt: skip
    proc = run_cli(argv)
    assert proc.returncode == 2 and "--allow-dataset-mismatch" in _line(proc) and not out.exists()
    proc = run_cli([*argv, "--allow-dataset-mismatch", "--checkpoint-every", "2"])
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["method"] == "cure" and result["steps"] == 4 and out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.npz", "u.safetensors"]  # checkpoint removed


def test_forget_resume_of_another_run_exits_2_and_cuda_without_gpu_exits_1(run_cli, tiny_files, tiny_ds, tmp_path):
    from methodkit.tools.cure.backbones import load_model
    from methodkit.tools.cure.forget_run import forget
    from methodkit.tools.cure.unlearn import ForgetConfig

    folder, data, model = tiny_files
    out, partial = tmp_path / "u.safetensors", tmp_path / "u.partial.safetensors"
    cfg = ForgetConfig(method="cure-uniform", steps=4, baseline_steps=4, calib_trajs=4)
    forget(load_model(model)[0], tiny_ds, tiny_ds.ids_of("F-mix"), cfg, checkpoint=partial, checkpoint_every=2)
    kept = partial.read_bytes()
    argv = ["cure-unlearn", "forget", model, data, "--forget-contributor", "F-mix", "--method", "cure-uniform",
            "--steps", "4", "--baseline-steps", "4", "--calib-trajs", "4", "-o", out, *QUIET]  # fmt: skip
    proc = run_cli([*argv, "--lambda-s", "2", "--resume"])
    line = _line(proc)
    assert proc.returncode == 2 and "does not match this run (lambda_s 1.0 there, 2.0 here)" in line, line
    assert not out.exists() and partial.read_bytes() == kept
    proc = run_cli([*argv, "--device", "cuda"])
    if proc.returncode != 0:  # no CuPy or no GPU here
        assert proc.returncode == 1 and "--device cuda: no CUDA device found" in _line(proc)
        assert not out.exists() and partial.read_bytes() == kept


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


def test_same_seed_same_tensors(run_cli, tiny_files, tmp_path, tiny_ds):
    from safetensors.numpy import load_file

    from methodkit.tools.cure.train import train

    folder, data, model = tiny_files
    path = tmp_path / "m.safetensors"
    proc = run_cli(["cure-unlearn", "train", data, "--steps", "6", "--hidden", "8", "--seed", "4", "-o", path, *QUIET])
    assert proc.returncode == 0, proc.stderr
    got = load_file(path)  # another process than the library runs below: the same seed gives the same tensors
    same = train(tiny_ds, "td3bc", steps=6, hidden=8, seed=4)[0].state_dict()
    assert got.keys() == same.keys() and all((got[k] == same[k].numpy()).all() for k in got)
    other = train(tiny_ds, "td3bc", steps=6, hidden=8, seed=1)[0].state_dict()
    assert any((got[k] != other[k].numpy()).any() for k in got)


def test_audit_report_and_fail_above_exits_3(run_cli, tiny_files, tiny_ds):
    from methodkit.tools.cure.backbones import save_model
    from methodkit.tools.cure.train import train

    folder, data, model = tiny_files
    retrain = folder / "retrain.safetensors"
    agent, info, _ = train(tiny_ds, "td3bc", steps=30, hidden=32, exclude=tiny_ds.ids_of("F-mix"))
    save_model(retrain, agent, info, force=True)
    proc = run_cli(["cure-unlearn", "audit", data, "--original", model, "--reference-retrain", retrain, model,
                    "--forget-contributor", "F-mix", "--episodes", "1", "--max-episode-steps", "20", "--shadows",
                    "3", "--shadow-steps", "3", "--fail-above", "0.5", *QUIET])  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert "fir 1.000 of" in proc.stderr.decode()
    report = json.loads(proc.stdout)
    row = report["models"][0]
    assert row["return_ratio"] == pytest.approx(1.0) and row["fir"] == pytest.approx(1.0)
    assert 0 <= row["mia_auc"] <= 1 and 0 <= row["unlearn_rate"] <= 1
    assert report["models"][1]["fir"] == pytest.approx(0.0) and report["models"][1]["cost_ratio"] == 1.0
