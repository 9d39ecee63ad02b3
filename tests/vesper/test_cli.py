"""vesper-eval through the installed executable: the command-line contract."""

from __future__ import annotations

import json


def test_help_and_exit_status(run_cli):
    proc = run_cli(["vesper-eval", "--help"])
    assert proc.returncode == 0 and "EXIT STATUS" in proc.stdout.decode()
    assert "extrapolate" in run_cli(["vesper-eval", "run", "--help"]).stdout.decode()


def test_pipeline_same_seed_same_bytes(run_cli, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        proc = run_cli(["vesper-eval", "generate", "--pairs", "2", "--no-video", "--seed", "1", "-o", str(out), "-q"])
        assert proc.returncode == 0, proc.stderr.decode()
    assert (a / "items.jsonl").read_bytes() == (b / "items.jsonl").read_bytes()
    preds = tmp_path / "p.jsonl"
    proc = run_cli(["vesper-eval", "run", "--bench", str(a), "--model", "always-stop", "-o", str(preds), "-q"])
    assert proc.returncode == 0, proc.stderr.decode()
    out = json.loads(run_cli(["vesper-eval", "score", str(preds), "--bootstrap", "20"]).stdout)
    assert out["pair_accuracy"] == 0.0 and out["decision_accuracy"] == 0.5
    again = run_cli(["vesper-eval", "run", "--bench", str(a), "--model", "always-stop", "-o", str(preds), "-q"])
    assert again.returncode == 2 and preds.read_bytes()  # exists without --force: refused, unchanged
    cmd = run_cli(["vesper-eval", "run", "--bench", str(a), "--model",
                   'cmd:python3 -c "import sys, json; sys.stdin.read(); print(json.dumps({chr(116) + \'ext\': \'continue\'}))"',
                   "--frames", "2", "--no-cache", "-o", "-", "-q"])  # fmt: skip
    assert cmd.returncode == 0, cmd.stderr.decode()
    rows = [json.loads(x) for x in cmd.stdout.decode().splitlines()]
    assert rows and all(r["decision"] == "continue" and r["frames_used"] == 2 for r in rows)
    fail = run_cli(["vesper-eval", "score", str(preds), "--fail-below", "0.5", "--bootstrap", "0"])
    assert fail.returncode == 3


def test_bad_inputs_exit_2_one_line(run_cli, tmp_path):
    bad = tmp_path / "t.yaml"
    bad.write_text("robot_tasks: {}\n")
    proc = run_cli(["vesper-eval", "generate", "--taxonomy", str(bad), "--pairs", "1", "-o", str(tmp_path / "o")])
    err = proc.stderr.decode().strip()
    assert proc.returncode == 2 and err.count("\n") == 0 and "hazards: missing" in err, err
    assert not (tmp_path / "o").exists()
    proc = run_cli(["vesper-eval", "run", "--bench", str(tmp_path), "--model", "always-stop", "-o", "-"])
    assert proc.returncode == 2 and "no items.jsonl" in proc.stderr.decode() and not proc.stdout
    junk = tmp_path / "p.jsonl"
    junk.write_text('{"id": "x"}\n')
    proc = run_cli(["vesper-eval", "score", str(junk)])
    assert proc.returncode == 2 and "has no 'pair_id'" in proc.stderr.decode()


def test_review_sheets_and_apply(run_cli, tmp_path):
    bench = tmp_path / "b"
    assert run_cli(["vesper-eval", "generate", "--pairs", "1", "--recognition-frac", "0", "-o", str(bench), "-q"]).returncode == 0
    sheets, csv = tmp_path / "sheets", tmp_path / "review.csv"
    proc = run_cli(["vesper-eval", "review", str(bench), "--sheet-dir", str(sheets), "-o", str(csv)])
    assert proc.returncode == 0, proc.stderr.decode()
    assert (sheets / "p0000.png").is_file()
    lines = csv.read_text().splitlines()
    assert lines[0] == "id,verdict,reviewer,note,time" and len(lines) == 3
    csv.write_text(lines[0] + "\np0000d,accept,r1,,\np0000s,reject,r1,danger not inferable,\n")
    out = json.loads(run_cli(["vesper-eval", "review", str(bench), "--apply", str(csv)]).stdout)
    assert out == {"accepted": 1, "rejected": 1, "unreviewed": 0}
    items = [json.loads(x) for x in (bench / "items.jsonl").read_text().splitlines()]
    assert [it["status"] for it in items] == ["accepted", "rejected"]
    csv.write_text("id,verdict\nnope,accept\n")
    bad = run_cli(["vesper-eval", "review", str(bench), "--apply", str(csv)])
    assert bad.returncode == 2 and "id 'nope' is not in" in bad.stderr.decode()
