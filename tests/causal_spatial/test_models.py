"""causal-spatial eval with local cmd: models: per-id error records and the {id, question, images} protocol."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import textwrap

import pytest

LINE_MODEL = textwrap.dedent(
    """
    import json, os, sys
    line = sys.stdin.readline()
    request = json.loads(line)
    with open(os.environ["CS_LOG"], "a") as log:
        log.write(line)
    if request["id"] == os.environ.get("CS_FAIL"):
        print("loading model", file=sys.stderr)
        print("model weights not found", file=sys.stderr)
        sys.exit(3)
    if request["id"] == os.environ.get("CS_GARBAGE"):
        print("I think it is A")
        sys.exit(0)
    if request["id"].startswith("Occlusion"):
        print(json.dumps({"text": "The answer is (B)."}))
    else:
        print(json.dumps({"answer": "A"}))
    """
)

CHAT_MODEL = textwrap.dedent(
    """
    import json, os, sys
    request = json.loads(sys.stdin.readline())
    parts = request["messages"][-1]["content"]
    if os.environ.get("CS_FAIL") and "car" in parts[0]["text"]:
        print("out of memory", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"text": "{'Reasoning': 'r', 'Answer': '(A)'}"}))
    """
)


@pytest.fixture(scope="module")
def image_bench(bench, tmp_path_factory):
    """The physics-only bench with a small PNG per item (the protocol test needs image files, not renders)."""
    from PIL import Image

    folder = tmp_path_factory.mktemp("img") / "bench"
    shutil.copytree(bench, folder)
    items = [json.loads(x) for x in (folder / "items.jsonl").read_text().splitlines()]
    (folder / "images").mkdir()
    for k, it in enumerate(items):
        Image.new("RGB", (8, 8), (k * 20, 0, 0)).save(folder / "images" / f"{it['id']}.png")
        it["image"] = f"images/{it['id']}.png"
    (folder / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    return folder, items


def _model(tmp_path, source):
    script = tmp_path / "model.py"
    script.write_text(source)
    return "cmd:" + shlex.join([sys.executable, str(script)])


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_line_protocol_and_per_id_error_records(run_cli, image_bench, tmp_path):
    bench, items = image_bench
    spec, log, preds = _model(tmp_path, LINE_MODEL), tmp_path / "log.jsonl", tmp_path / "p.jsonl"
    failing, garbage = items[0]["id"], items[1]["id"]
    env = {"CS_LOG": str(log), "CS_FAIL": failing, "CS_GARBAGE": garbage}
    argv = ["causal-spatial", "eval", "--bench", bench, "--model", spec, "--cmd-protocol", "line", "--retries", "1",
            "--no-cache", "-o", preds]  # fmt: skip
    proc = run_cli(argv, env=env)
    err = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 1 and len(err) == 1, proc.stderr.decode()
    assert err[0].startswith("causal-spatial: error: 2 of 8 requests failed") and "model weights not found" in err[0]
    sent = [json.loads(x) for x in log.read_text().splitlines()]
    assert sorted(r["id"] for r in sent) == sorted(it["id"] for it in items)  # exit 3 is not retried
    first = next(r for r in sent if r["id"] == items[2]["id"])
    assert set(first) == {"id", "question", "images"} and first["question"].startswith(items[2]["question"])
    assert first["images"] == [str((bench / items[2]["image"]).resolve())]
    out = {r["id"]: r for r in _lines(preds)}  # everything written, in bench order
    assert list(out) == [it["id"] for it in items]
    assert "model weights not found" in out[failing]["error"] and out[failing]["text"] is None
    assert "not one JSON object" in out[garbage]["error"]
    assert all(r["error"] is None for k, r in out.items() if k not in (failing, garbage))
    score = json.loads(run_cli(["causal-spatial", "score", preds]).stdout)
    assert score["n"] == 8 and score["n_errors"] == 2 and score["error_rate"] == 0.25
    expected = sum((it["answer"] == "B") if it["task"] == "occlusion" else (it["answer"] == "A")
                   for it in items if it["id"] not in (failing, garbage))  # fmt: skip
    assert score["accuracy"] == expected / 8  # errors stay in the denominator, counted wrong
    # the rerun asks only the failed ids and keeps the rest
    log.unlink()
    proc = run_cli([*argv, "--resume"], env={**env, "CS_FAIL": "", "CS_GARBAGE": ""})
    assert proc.returncode == 0, proc.stderr.decode()
    assert sorted(json.loads(x)["id"] for x in log.read_text().splitlines()) == sorted([failing, garbage])
    again = {r["id"]: r for r in _lines(preds)}
    assert set(again) == set(out) and all(r["error"] is None for r in again.values())
    assert {k: again[k] for k in out if k not in (failing, garbage)} == {k: out[k] for k in out if k not in (failing, garbage)}


def test_chat_protocol_errors_are_per_id_too(run_cli, image_bench, tmp_path):
    bench, items = image_bench
    spec, preds = _model(tmp_path, CHAT_MODEL), tmp_path / "p.jsonl"
    argv = ["causal-spatial", "eval", "--bench", bench, "--model", spec, "--no-cache", "--retries", "0", "-o", preds]
    proc = run_cli(argv, env={"CS_FAIL": "1"})
    assert proc.returncode == 1 and "2 of 8 requests failed" in proc.stderr.decode()
    out = _lines(preds)
    assert [bool(r["error"]) for r in out] == [it["task"] == "collision" for it in items]
    assert all("out of memory" in r["error"] for r in out if r["error"])
    assert run_cli(argv + ["--force"]).returncode == 0


def test_a_model_needs_images(run_cli, one_line_error, bench, tmp_path):
    proc = run_cli(["causal-spatial", "eval", "--bench", bench, "--model", _model(tmp_path, CHAT_MODEL), "--no-cache",
                    "-o", tmp_path / "p.jsonl"])  # fmt: skip
    one_line_error(proc, "causal-spatial", "Collision_Level_1_0: no image", "--gl none")
    assert not (tmp_path / "p.jsonl").exists()
