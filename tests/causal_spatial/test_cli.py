"""causal-spatial and cow-simulate through the installed executables: the command-line contract."""

from __future__ import annotations

import json


def test_help_and_exit_status(run_cli):
    for argv in (["causal-spatial", "--help"], ["cow-simulate", "--help"], ["causal-spatial", "eval", "--help"]):
        proc = run_cli(argv)
        assert proc.returncode == 0
    assert "EXIT STATUS" in run_cli(["causal-spatial", "--help"]).stdout.decode()
    text = run_cli(["causal-spatial", "eval", "--help"]).stdout.decode()
    for name in ("heuristic2d", "cow-reader", "text-prior"):
        assert name in text


def test_generate_is_deterministic_and_balanced(run_cli, bench, tmp_path):
    again = tmp_path / "again"
    proc = run_cli(["causal-spatial", "generate", "--gl", "none", "--per-task", "2", "--seed", "5", "-o", str(again), "-q"])
    assert proc.returncode == 0, proc.stderr.decode()
    summary = json.loads(proc.stdout)
    assert summary["items"] == 8
    assert (again / "items.jsonl").read_bytes() == (bench / "items.jsonl").read_bytes()
    items = [json.loads(x) for x in (bench / "items.jsonl").read_text().splitlines()]
    assert [it["id"] for it in items][:2] == ["Collision_Level_1_0", "Collision_Level_2_0"]
    for it in items:
        assert it["image"] is None and it["options"][-1] == "Not sure"
        assert (bench / it["scene"]).is_file()
    meta = json.loads((bench / "meta.json").read_text())
    assert meta["visibility_gt"] == "rays" and meta["mujoco_version"]


def test_oracle_cow_reader_answers_from_simulation(run_cli, one_line_error, bench, tmp_path):
    cow = tmp_path / "cow"
    proc = run_cli(["cow-simulate", "--gl", "none", "--bench", str(bench), "--scene", "oracle", "-o", str(cow), "-q"])
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    assert len(lines) == 8 and json.loads(lines[0])["id"] == "Collision_Level_1_0"
    preds = tmp_path / "p.jsonl"
    assert run_cli(["causal-spatial", "eval", "--bench", str(bench), "--model", "cow-reader", "--cow", str(cow),
                    "-o", str(preds), "-q"]).returncode == 0  # fmt: skip
    score = json.loads(run_cli(["causal-spatial", "score", str(preds)]).stdout)
    assert score["n"] == 8 and score["accuracy"] >= 7 / 8 and score["parse_error_rate"] == 0
    proc = run_cli(["causal-spatial", "eval", "--bench", str(bench), "--model", "cow-reader", "--cow", str(cow),
                    "--from-frames", "-o", str(tmp_path / "f.jsonl")])  # fmt: skip
    one_line_error(proc, "causal-spatial", "Collision_Level_1_0: no seg.npz", "cow-simulate --segmentation")


def test_missing_cow_ids_is_an_error_and_writes_nothing(run_cli, one_line_error, bench, tmp_path):
    cow = tmp_path / "cow1"
    assert run_cli(["cow-simulate", "--gl", "none", "--bench", str(bench), "--scene", "oracle", "--ids",
                    "Collision_Level_1_0", "-o", str(cow), "-q"]).returncode == 0  # fmt: skip
    out = tmp_path / "p.jsonl"
    proc = run_cli(["causal-spatial", "eval", "--bench", str(bench), "--model", "cow-reader", "--cow", str(cow),
                    "-o", str(out)])  # fmt: skip
    one_line_error(proc, "causal-spatial", "no COW output for 7 item(s)", "Collision_Level_2_0")
    assert not out.exists()


def test_bad_inputs_exit_2(run_cli, one_line_error, bench, tmp_path):
    out = tmp_path / "x"
    proc = run_cli(["causal-spatial", "generate", "--gl", "none", "--tasks", "collision,juggling", "-o", str(out)])
    one_line_error(proc, "causal-spatial", "unknown task 'juggling'")
    proc = run_cli(["causal-spatial", "generate", "--gl", "none", "--levels", "3", "-o", str(out)])
    one_line_error(proc, "causal-spatial", "--levels: only 1 and 2 exist")
    proc = run_cli(["causal-spatial", "eval", "--bench", str(bench), "--model", "majority", "-o", str(tmp_path / "p")])
    one_line_error(proc, "causal-spatial", "pass --train BENCH")
    proc = run_cli(["cow-simulate", "--gl", "none", "--bench", str(bench), "--ids", "Nope_1", "-o", str(out)])
    one_line_error(proc, "cow-simulate", "--ids: not in")
    proc = run_cli(["cow-simulate", "--gl", "none", "--bench", str(bench), "--segmentation", "-o", str(out)])
    one_line_error(proc, "cow-simulate", "--segmentation renders", "not with --gl none")
    proc = run_cli(["cow-simulate", "--bench", str(bench), "-o", str(out)])  # perceive needs images and sensors
    one_line_error(proc, "cow-simulate", "generated without images")
    assert not out.exists()
    bad = tmp_path / "bad.parquet"
    import pandas as pd

    pd.DataFrame({"id": ["a"], "question": ["q"], "answer": ["A"], "image": [b"not an image"]}).to_parquet(bad)
    proc = run_cli(["causal-spatial", "eval", "--bench", str(bad), "--model", "random", "-o", str(tmp_path / "p")])
    one_line_error(proc, "causal-spatial", "row 0: image cannot be decoded")


def test_eval_resumes_by_id(run_cli, one_line_error, bench, tmp_path):
    preds = tmp_path / "p.jsonl"
    assert run_cli(["causal-spatial", "eval", "--bench", str(bench), "--model", "random", "-o", str(preds)]).returncode == 0
    lines = preds.read_text().splitlines()
    preds.write_text("\n".join(lines[:3]) + "\n")
    proc = run_cli(["causal-spatial", "eval", "--bench", str(bench), "--model", "random", "-o", str(preds), "--resume"])
    assert proc.returncode == 0
    assert preds.read_text().splitlines() == lines
    proc = run_cli(["causal-spatial", "eval", "--bench", str(bench), "--model", "random", "-o", str(preds)])
    one_line_error(proc, "causal-spatial", "already exists")


def test_head_is_quiet(shell, bench, tmp_path):
    proc = shell(f"cow-simulate --gl none --bench {bench} --scene oracle -o {tmp_path / 'c'} -q | head -1")
    assert proc.returncode == 0 and proc.stderr == b""
    assert json.loads(proc.stdout)["id"] == "Collision_Level_1_0"


def test_generate_creates_missing_parents_and_leaves_no_staging(run_cli, tmp_path):
    target = tmp_path / "new" / "deeper" / "bench"
    proc = run_cli(["causal-spatial", "generate", "--gl", "none", "--per-task", "1", "-o", str(target), "-q"])
    assert proc.returncode == 0, proc.stderr
    assert (target / "items.jsonl").is_file()
    assert [p.name for p in target.parent.iterdir()] == ["bench"]  # the staging folder moved into place
