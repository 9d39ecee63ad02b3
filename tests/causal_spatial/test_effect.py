"""The paper's effect at small size: simulating from perception beats image-plane reasoning."""

from __future__ import annotations

import json


def test_cow_from_perception_beats_static_reasoning(run_cli, renderer, tmp_path):
    bench, cow = tmp_path / "bench", tmp_path / "cow"
    proc = run_cli(["causal-spatial", "generate", "--per-task", "4", "--size", "128", "--seed", "11", "-o", str(bench), "-q"])
    assert proc.returncode == 0, proc.stderr.decode()
    proc = run_cli(["cow-simulate", "--bench", str(bench), "--frames", "2", "--no-video", "-o", str(cow), "-q"])
    assert proc.returncode == 0, proc.stderr.decode()
    acc = {}
    for model, extra in (("heuristic2d", []), ("cow-reader", ["--cow", str(cow)])):
        out = tmp_path / f"{model}.jsonl"
        assert run_cli(["causal-spatial", "eval", "--bench", str(bench), "--model", model, *extra, "-o", str(out),
                        "-q"]).returncode == 0  # fmt: skip
        acc[model] = json.loads(run_cli(["causal-spatial", "score", str(out)]).stdout)["accuracy"]
    assert acc["cow-reader"] >= 0.8, acc
    assert acc["cow-reader"] >= acc["heuristic2d"] + 0.1, acc
    frame = json.loads((cow / "Collision_Level_1_0" / "cow.json").read_text())
    assert frame["scene"] == "perceive" and len(frame["frames"]) == 3 and frame["primitives"]
    # a model through core/endpoint's cmd: transport sees the image, then the asked-for COW frames and the note
    model = tmp_path / "model.py"
    model.write_text(
        "import json, sys\n"
        "body = json.load(sys.stdin)\n"
        "parts = body['messages'][-1]['content']\n"
        "n = sum(p['type'] == 'image_url' for p in parts)\n"
        "note = 'simulated scenarios' in parts[0]['text']\n"
        "print(json.dumps({'text': json.dumps({'Reasoning': f'{n} {note}', 'Answer': '(A)'})}))\n"
    )
    import sys

    out = tmp_path / "cmd.jsonl"
    proc = run_cli(["causal-spatial", "eval", "--bench", str(bench), "--model", f"cmd:{sys.executable} {model}",
                    "--cow", str(cow), "--frames", "1,2", "--no-cache", "-o", str(out), "-q"])  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 16 and all(json.loads(r["text"])["Reasoning"] == "3 True" for r in rows)
