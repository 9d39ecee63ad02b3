"""The cita-* executables through their installed scripts: the command-line contract."""

from __future__ import annotations

import json

import pytest

SCRIPTS = ["cita-data", "cita-sim", "cita-train", "cita-rank", "cita-eval"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_has_examples_and_exit_status(run_cli, name):
    proc = run_cli([name, "--help"])
    assert proc.returncode == 0
    text = proc.stdout.decode()
    assert "EXAMPLES" in text or "Commands" in text


@pytest.fixture(scope="module")
def pipeline(sim_files, small_train_file, run_cli_module):
    """train.jsonl -> graph -> synthetic contexts (sim_files) -> a small model, through the executables."""
    work = sim_files
    proc = run_cli_module(
        [*train_argv(small_train_file, work), "-o", work / "cim", "--save-pairs", work / "pairs.parquet"]
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return work


def train_argv(train_file, work) -> list:
    """The pipeline's cita-train call (--device at its default, auto), less -o."""
    return ["cita-train", train_file, "--graph", work / "g.npz", "--synthetic", "30", "--epochs", "2", "-R", "16", "-q"]


@pytest.fixture(scope="module")
def run_cli_module():
    # imported as the package path: putting tests/ on sys.path made tests/core importable as bare `core`
    from tests.conftest import _run

    return _run


def test_data_import_is_deterministic_and_validates(run_cli, tmp_path):
    a = run_cli(["cita-data", "bfcl", "--limit", "5"])
    b = run_cli(["cita-data", "bfcl", "--limit", "5"])
    assert a.returncode == 0 and a.stdout == b.stdout
    rows = [json.loads(line) for line in a.stdout.decode().splitlines()]
    assert [r["task_id"] for r in rows] == [f"multi_turn_base_{i}" for i in range(5)]
    assert all(set(r) >= {"task_id", "instruction", "tools", "steps", "success", "env", "split"} for r in rows)
    out = run_cli(["cita-data", "validate"], input=a.stdout)
    assert json.loads(out.stdout)["n_records"] == 5


def test_malformed_jsonl_names_file_and_line(run_cli, tmp_path, one_line_error):
    bad = tmp_path / "bad.jsonl"
    good = run_cli(["cita-data", "bfcl", "--limit", "2"]).stdout.decode().splitlines()
    bad.write_text(good[0] + "\n{not json\n" + good[1] + "\n")
    one_line_error(run_cli(["cita-data", "validate", bad]), "cita-data", "bad.jsonl:2", "invalid JSON")
    one_line_error(run_cli(["cita-sim", "fit", bad, "-o", tmp_path / "g.npz"]), "cita-sim", "bad.jsonl:2")
    assert not (tmp_path / "g.npz").exists() and not (tmp_path / "g.json").exists()
    proc = run_cli(["cita-data", "validate", bad, "--skip-bad"])
    assert proc.returncode == 0 and json.loads(proc.stdout)["n_skipped"] == 1
    missing = tmp_path / "missing.jsonl"
    missing.write_text('{"task_id": "x", "tools": [], "steps": []}\n')
    one_line_error(run_cli(["cita-data", "validate", missing]), "cita-data", "missing.jsonl:1", "instruction")


def test_sim_sample_same_seed_same_bytes_and_values(pipeline, run_cli):
    again = run_cli(["cita-sim", "sample", "--graph", pipeline / "g.npz", "-n", "12", "--seed", "3"])
    assert again.stdout == (pipeline / "s.jsonl").read_bytes()
    other = run_cli(["cita-sim", "sample", "--graph", pipeline / "g.npz", "-n", "12", "--seed", "4"])
    assert other.stdout != again.stdout
    v1 = run_cli(["cita-sim", "value", pipeline / "s.jsonl", "--graph", pipeline / "g.npz", "-R", "32", "-j", "1"])
    v2 = run_cli(["cita-sim", "value", pipeline / "s.jsonl", "--graph", pipeline / "g.npz", "-R", "32", "-j", "2"])
    assert v1.returncode == 0 and v1.stdout == v2.stdout
    rows = [json.loads(line) for line in v1.stdout.decode().splitlines()]
    assert rows and all(0 <= r["value"] <= 1 and r["std"] >= 0 for r in rows)


def test_train_folder_and_pairs(pipeline):
    import pandas as pd

    side = json.loads((pipeline / "cim" / "cim.json").read_text())
    assert side["sources"] == ["B", "S", "L"] and side["spec"]["embedder"] == "hash"
    assert not (pipeline / "cim" / "pairs.ckpt.npz").exists()  # the pair-building checkpoint goes on success
    assert set(side["pair_counts"]) == {"B", "S", "L"} and side["judge_sources"] == {
        "offline": side["pair_counts"]["L"]
    }
    pairs = pd.read_parquet(pipeline / "pairs.parquet")
    assert set(pairs["source"]) == {"behavior", "sim", "llm"}
    assert pairs["y"].between(0, 1).all() and (pairs["w"] >= 0).all()
    assert (pairs.loc[pairs.source == "behavior", "y"] == 1).all()


def test_rank_top1_dedupes_and_flags_unknown_tools(pipeline, run_cli, tmp_path):
    rec = json.loads((pipeline / "s.jsonl").read_text().splitlines()[0])
    rec["candidates"] = [*rec["candidates"], rec["candidates"][0], {"name": "no_such_tool", "arguments": {}}]
    empty = {**rec, "context_id": "empty", "candidates": []}
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(rec) + "\n" + json.dumps(empty) + "\n")
    full = [json.loads(line) for line in run_cli(["cita-rank", pipeline / "cim", path]).stdout.decode().splitlines()]
    ranked = full[0]["ranked"]
    assert len(ranked) == len(rec["candidates"]) - 1  # the duplicate merged
    assert ranked[-1]["name"] == "no_such_tool" and ranked[-1]["unknown_tool"]
    assert [r["score"] for r in ranked[:-1]] == sorted((r["score"] for r in ranked[:-1]), reverse=True)
    assert full[1]["error"] == "empty candidate list"
    top = [
        json.loads(line)
        for line in run_cli(["cita-rank", pipeline / "cim", path, "--top", "1"]).stdout.decode().splitlines()
    ]
    assert top[0]["name"] == ranked[0]["name"]


def test_rank_refuses_another_embedder(pipeline, run_cli, one_line_error, tmp_path):
    proc = run_cli(["cita-rank", pipeline / "cim", pipeline / "s.jsonl", "--embedder", "minilm"])
    one_line_error(proc, "cita-rank", "--embedder hash")
    one_line_error(run_cli(["cita-rank", tmp_path, pipeline / "s.jsonl"]), "cita-rank", "not a cita-train model")


def test_train_refuses_bad_sources_and_existing_folder(pipeline, run_cli, one_line_error, small_train_file):
    one_line_error(
        run_cli(
            ["cita-train", small_train_file, "--graph", pipeline / "g.npz", "--sources", "S", "-o", pipeline / "x"]
        ),
        "cita-train",
        "--sources S",
    )
    assert not (pipeline / "x").exists()
    proc = run_cli(["cita-train", small_train_file, "--graph", pipeline / "g.npz", "-o", pipeline / "cim"])
    assert proc.returncode == 2 and b"--force" in proc.stderr
    torn = pipeline / "torn"
    torn.mkdir()
    (torn / "pairs.ckpt.npz").write_bytes(b"cut short")
    argv = ["cita-train", small_train_file, "--graph", pipeline / "g.npz", "--sources", "B,S", "--synthetic", "2"]
    proc = run_cli([*argv, "--resume", "-o", torn])
    one_line_error(proc, "cita-train", "pairs.ckpt.npz: not a readable pair-building checkpoint")
    assert sorted(p.name for p in torn.iterdir()) == ["pairs.ckpt.npz"]  # no model file written


def test_train_device_cpu_equals_auto_and_cuda_without_one_exits_1(pipeline, run_cli, one_line_error, small_train_file):
    import torch

    # on a machine without CUDA, auto is the CPU: the same model bytes and cim.json as --device cpu
    proc = run_cli([*train_argv(small_train_file, pipeline), "--device", "cpu", "-o", pipeline / "cim-cpu"])
    assert proc.returncode == 0, proc.stderr.decode()
    for name in ("cim.safetensors", "cim.json"):
        assert (pipeline / "cim-cpu" / name).read_bytes() == (pipeline / "cim" / name).read_bytes(), name
    assert json.loads((pipeline / "cim-cpu" / "cim.json").read_text())["train"]["device"] == "cpu"
    if torch.cuda.is_available():
        return
    proc = run_cli([*train_argv(small_train_file, pipeline), "--device", "cuda", "-o", pipeline / "cim-cuda"])
    one_line_error(proc, "cita-train", "--device cuda: torch sees no CUDA device", code=1)
    assert not (pipeline / "cim-cuda").exists()


@pytest.mark.slow
def test_eval_metrics_and_gate(pipeline, run_cli, tmp_path):
    out = tmp_path / "tasks.csv"
    proc = run_cli(["cita-eval", "--model", pipeline / "cim", "--policy", "random", "--limit", "12", "--out", out])
    assert proc.returncode == 0, proc.stderr.decode()
    result = json.loads(proc.stdout)
    names = [r["policy"] for r in result["runs"]]
    assert names == ["random", "cim"]
    n = result["runs"][0]["n_tasks"]
    for r in result["runs"]:
        assert r["n_tasks"] == n >= 1 and r["n_crashed"] == 0 and 0 <= r["success"] <= 1
    assert 0 <= result["runs"][1]["pair_acc"] <= 1
    assert out.read_text().count("\n") == 1 + 2 * n
    gate = run_cli(["cita-eval", "--policy", "random", "--limit", "12", "--fail-below", "1.0"])
    assert gate.returncode == 3


def test_head_ends_quietly(shell, pipeline):
    proc = shell(f"cita-sim value {pipeline / 's.jsonl'} --graph {pipeline / 'g.npz'} -R 8 | head -1")
    assert proc.returncode == 0 and proc.stderr == b""
