"""mcd-distill through the installed executable: a tiny pipeline, determinism, bad inputs."""

from __future__ import annotations

import json

import pytest

from tests.conftest import assert_one_line_error

pytestmark = pytest.mark.filterwarnings("ignore")


def _run(run_cli, *args, cwd):
    return run_cli(["mcd-distill", *args], cwd=cwd)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    """data -> teacher -> transcoders on micro sizes (a few seconds of training)."""
    from tests.conftest import _run as raw

    work = tmp_path_factory.mktemp("mcd")

    def go(*args):
        proc = raw(["mcd-distill", *args], cwd=work)
        assert proc.returncode == 0, proc.stderr.decode()[-800:]
        return proc

    go("data", "--task", "instr", "--n-tasks", "400", "--eval-n", "3", "-o", "tok.npz", "-q")
    go("teacher", "tok.npz", "--preset", "micro", "--ctx", "24", "--steps", "20", "--batch-size", "8", "-o", "t", "-q")
    go("transcoders", "tok.npz", "--model", "t", "--steps", "40", "--k", "8", "-o", "tc", "-q")
    return work


def test_help_and_version(run_cli, tmp_path):
    proc = _run(run_cli, "--help", cwd=tmp_path)
    assert proc.returncode == 0 and b"EXIT STATUS" in proc.stdout
    for verb in ("data", "teacher", "transcoders", "graph", "distill", "eval", "selftest"):
        assert _run(run_cli, verb, "--help", cwd=tmp_path).returncode == 0


def test_data_same_seed_same_bytes(run_cli, tmp_path):
    for name in ("a", "b"):
        proc = _run(run_cli, "data", "--task", "math", "--n-tasks", "50", "--eval-n", "2", "-o", f"{name}.npz", "-q", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    suites = [json.loads(line)["suite"] for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert sorted(set(suites)) == ["compose", "long", "math", "seen"]


def test_distill_graph_eval_pipeline(run_cli, shell, pipeline):
    work = pipeline
    proc = _run(run_cli, "distill", "tok.npz", "--teacher", "t", "--teacher-tc", "tc", "--student", "micro", "--width",
                "8", "--steps", "4", "--batch-size", "2", "--targets", "2", "--mcd", "0.1", "--mcd-warmup", "1",
                "--max-fvu", "10", "--graph-cache", "gc", "-o", "s", "-q", cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()[-800:]
    out = json.loads(proc.stdout)
    assert out["mcd_batches"] == 3 and out["layer_map"] == [0, 1]
    assert (work / "s" / "student.safetensors").is_file() and (work / "s" / "stc_L1.safetensors").is_file()
    assert list((work / "gc").glob("teacher-graphs-*.npz"))
    proc = _run(run_cli, "graph", "--model", "t", "--transcoders", "tc", "--prompt", "Q: upper: cat\nA: ", "--json",
                cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    graph = json.loads(proc.stdout)
    assert graph["target"].startswith("logit") and all(p["nodes"][0].startswith("emb@") for p in graph["pathways"])
    proc = shell("mcd-distill eval tok.jsonl --model s --tokens tok.npz -q | head -1", cwd=work)
    assert proc.returncode == 0 and proc.stderr == b""
    assert proc.stdout.decode().startswith("model\t")


def test_bad_inputs_exit_2_with_one_line(run_cli, pipeline, tmp_path):
    work = pipeline
    base = ["distill", "tok.npz", "--teacher", "t", "--teacher-tc", "tc", "--steps", "2", "--max-fvu", "10"]
    proc = _run(run_cli, *base, "--student", "micro", "--layers", "3", "-o", str(tmp_path / "x"), cwd=work)
    assert_one_line_error(proc, "mcd-distill", "pass an explicit --layer-map")
    assert not (tmp_path / "x").exists()
    proc = _run(run_cli, *base, "--student", "micro", "--layer-map", "0,7", "-o", str(tmp_path / "y"), cwd=work)
    assert_one_line_error(proc, "mcd-distill", "--layer-map '0,7'")
    proc = _run(run_cli, "distill", "tok.npz", "--teacher", "t", "--teacher-tc", "tc", "--max-fvu", "0.0001",
                "-o", str(tmp_path / "z"), cwd=work)  # fmt: skip
    assert_one_line_error(proc, "mcd-distill", "above --max-fvu 0.0001")
    # transcoders of another model (a second teacher of its own, so this test does not need the pipeline test's)
    other_model = tmp_path / "t_other"
    proc = _run(run_cli, "teacher", "tok.npz", "--preset", "micro", "--ctx", "24", "--steps", "2", "--batch-size", "2",
                "--seed", "1", "-o", str(other_model), "-q", cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()[-800:]
    proc = _run(run_cli, "graph", "--model", str(other_model), "--transcoders", "tc", "--prompt", "abc", cwd=work)
    assert_one_line_error(proc, "mcd-distill", "trained on model")
    # a token file with another tokenizer than the teacher's
    import numpy as np

    from methodkit.core.text.tokens import TokenFile

    tok = TokenFile.load(work / "tok.npz")
    other = TokenFile(tok.ids.astype(np.uint16), tok.offsets, tok.split,
                      {**tok.meta, "tokenizer": {"kind": "bpe", "vocab_size": 512, "sha256": "x"}})  # fmt: skip
    other.save(tmp_path / "bpe.npz")
    proc = _run(run_cli, "distill", str(tmp_path / "bpe.npz"), "--teacher", "t", "--teacher-tc", "tc",
                "-o", str(tmp_path / "w"), cwd=work)  # fmt: skip
    assert_one_line_error(proc, "mcd-distill", "differs from the teacher's")
    proc = _run(run_cli, "teacher", str(tmp_path / "missing.npz"), "-o", str(tmp_path / "v"), cwd=work)
    assert_one_line_error(proc, "mcd-distill", "missing.npz")
    assert not (tmp_path / "v").exists()


def test_teacher_resume_continues_from_the_checkpoint(run_cli, pipeline, tmp_path):
    import shutil

    shutil.copytree(pipeline / "t", tmp_path / "t")
    shutil.copy(pipeline / "tok.npz", tmp_path / "tok.npz")
    args = ["teacher", "tok.npz", "--preset", "micro", "--ctx", "24", "--batch-size", "8", "-o", "t", "-q"]
    proc = _run(run_cli, *args, "--steps", "30", "--resume", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()[-800:]
    out = json.loads(proc.stdout)
    assert out["resumed_from"] == 20 and out["steps"] == 30
    log = (tmp_path / "t" / "log.csv").read_text().splitlines()
    assert int(log[1].split(",")[0]) <= 20 < int(log[-1].split(",")[0])  # the old rows kept, new ones appended
    proc = _run(run_cli, *args, "--steps", "40", "--resume", "--width", "24", cwd=tmp_path)  # another model's checkpoint
    assert proc.returncode == 2 and b"--width" not in proc.stdout, proc.stderr


def test_selftest_bound(run_cli, tmp_path):
    proc = _run(run_cli, "selftest", "--bound", "--trials", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ok"] is True
