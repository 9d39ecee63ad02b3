"""craft-finetune through the installed executable: the pipeline, determinism, bad inputs, nothing lost."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import assert_one_line_error

PROG = "craft-finetune"


def _tiny_suite(path):
    from methodkit.tools.craft import suites

    routes = [suites.route_for(f, 7) for f in ("merge", "stopped-vehicle")]
    for r in routes:
        r["params"]["duration"] = 10.0
    path.write_text(json.dumps(routes))
    return path


@pytest.fixture(scope="module")
def pipeline(
    tmp_path_factory,
):
    import subprocess
    import sys
    from pathlib import Path

    folder = tmp_path_factory.mktemp("craft")
    exe = Path(sys.executable).parent / PROG
    suite = _tiny_suite(folder / "suite.json")
    steps = [
        [exe, "demos", suite, "-o", folder / "demos.npz"],
        [exe, "pretrain", folder / "demos.npz", "--steps", "50", "-o", folder / "bc.safetensors"],
        [exe, "finetune", folder / "bc.safetensors", "--suite", suite, "--iterations", "1", "--episodes", "2",
         "--log", folder / "run.jsonl", "--run-dir", folder / "rd", "-o", folder / "craft.safetensors"],
    ]  # fmt: skip
    outs = []
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True)
        assert proc.returncode == 0, proc.stderr
        outs.append(json.loads(proc.stdout))
    return folder, suite, outs


def test_pipeline_outputs(pipeline):
    folder, _, (demos, bc, ft) = pipeline
    arrays = np.load(folder / "demos.npz")
    assert arrays["obs"].shape == (demos["decisions"], 53)
    assert arrays["expert_traj"].shape[1:] == (20, 2)
    meta = json.loads(str(arrays["meta"]))
    assert len(meta["vocabulary"]) == 16
    assert 0 <= bc["accuracy"] <= 1
    side = json.loads((folder / "craft.json").read_text())
    assert side["config"]["method"] == "craft" and side["config"]["parent"]
    assert side["config"]["hyper"]["beta"] == 0.05
    rows = [json.loads(line) for line in (folder / "run.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and "n_critical" in rows[0]
    assert ft["iterations"] == 1


def test_eval_routes_out_and_fail_below(run_cli, pipeline):
    folder, suite, _ = pipeline
    cmd = [PROG, "eval", folder / "craft.safetensors", "--suite", suite, "--routes-out", folder / "r.csv"]
    a = run_cli([*cmd, "--fail-below", "101"])
    assert a.returncode == 3, a.stderr  # the gate fails; the result is still written
    summary = json.loads(a.stdout)
    assert summary["routes"] == 2 and set(summary["families"]) == {"merge", "stopped-vehicle"}
    assert len((folder / "r.csv").read_text().splitlines()) == 3


def test_bad_suite_names_the_route(run_cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"family": "merge", "seed": 1}, {"family": "merge", "params": {"lanes": 0}}]))
    out = tmp_path / "d.npz"
    proc = run_cli([PROG, "demos", bad, "-o", out])
    assert_one_line_error(proc, PROG, "route 1", "lanes")
    assert not out.exists()
    bad.write_text(json.dumps([{"family": "roundabout"}]))
    assert_one_line_error(run_cli([PROG, "demos", bad, "-o", out]), PROG, "route 0", "unknown family")
    bad.write_text(json.dumps([{"family": "merge", "params": {"density": 0}}]))
    assert_one_line_error(run_cli([PROG, "demos", bad, "-o", out]), PROG, "route 0", "density")


def test_existing_output_is_kept(run_cli, pipeline):
    folder, suite, _ = pipeline
    target = folder / "bc.safetensors"
    before = target.read_bytes()
    proc = run_cli([PROG, "pretrain", folder / "demos.npz", "--steps", "5", "-o", target])
    assert proc.returncode == 2
    assert target.read_bytes() == before


def test_demos_of_another_layout_exit_3(run_cli, tmp_path):
    np.savez(tmp_path / "d.npz", obs=np.zeros((4, 10), np.float32), expert_idx=np.zeros(4, np.int64),
             meta=np.array(json.dumps({"vocabulary": []})))  # fmt: skip
    out = tmp_path / "p.safetensors"
    proc = run_cli([PROG, "pretrain", tmp_path / "d.npz", "-o", out])
    assert_one_line_error(proc, PROG, "observation dimension 10", code=3)
    assert not out.exists()


def test_resume_needs_run_dir(run_cli, pipeline, tmp_path):
    folder, suite, _ = pipeline
    proc = run_cli([PROG, "finetune", folder / "bc.safetensors", "--resume", "-o", tmp_path / "x.safetensors"])
    assert_one_line_error(proc, PROG, "--resume needs --run-dir")


def test_resume_from_finished_checkpoint_gives_the_same_policy(run_cli, pipeline, tmp_path):
    folder, suite, _ = pipeline
    out = tmp_path / "again.safetensors"
    proc = run_cli([PROG, "finetune", folder / "bc.safetensors", "--suite", suite, "--iterations", "1",
                    "--episodes", "2", "--run-dir", folder / "rd", "--resume", "-o", out])  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["resumed_from"] == 1
    assert out.read_bytes() == (folder / "craft.safetensors").read_bytes()


def test_unknown_critical_event_exits_2(run_cli, pipeline, tmp_path):
    folder, suite, _ = pipeline
    out = tmp_path / "x.safetensors"
    proc = run_cli([PROG, "finetune", folder / "bc.safetensors", "--critical-events", "collision,wobble", "-o", out])
    assert_one_line_error(proc, PROG, "--critical-events", "wobble")
    assert not out.exists()


def test_device_cuda_without_a_gpu_exits_1(run_cli, pipeline, tmp_path):
    from methodkit.core.backend import cuda_available

    if cuda_available():
        pytest.skip("a CUDA device is present")
    folder, suite, _ = pipeline
    out = tmp_path / "x.safetensors"
    proc = run_cli([PROG, "finetune", folder / "bc.safetensors", "--device", "cuda", "-o", out])
    assert_one_line_error(proc, PROG, "--device cuda", "no CUDA device", code=1)
    assert not out.exists()
