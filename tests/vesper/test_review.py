"""review --interactive: the prompt loop (accept / reject + note / skip / quit), saved verdict by verdict."""

from __future__ import annotations

import json

import pytest

from methodkit.tools.vesper import review as rv


@pytest.fixture
def bench(tmp_path):
    """A manifest of 3 pairs (review needs nothing else without --sheet-dir)."""
    folder = tmp_path / "bench"
    folder.mkdir()
    items = [{"id": f"p{k:04d}{v[0]}", "pair_id": f"p{k:04d}", "variant": v, "factor": "timing", "person": "child",
              "pressure": "hard", "gt": {"decision": "stop" if v == "dangerous" else "continue"}, "status": "auto_ok"}
             for k in range(3) for v in ("dangerous", "safe")]  # fmt: skip
    (folder / "items.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    return folder


def _statuses(folder):
    return [json.loads(x)["status"] for x in (folder / "items.jsonl").read_text().splitlines()]


def _script(*answers):
    it = iter(answers)

    def ask(prompt):
        value = next(it)
        if isinstance(value, BaseException):
            raise value
        return value

    return ask


def test_interactive_verdicts_saved_one_by_one(bench):
    said = []
    n = len(_statuses(bench))
    ask = _script("x", "a", "reject", "danger not inferable", "s", "q")
    table, counts = rv.interactive(str(bench), "r1", ask, said.append, clock=lambda: "T")
    assert counts == {"accepted": 1, "rejected": 1, "skipped": 1, "remaining": n - 3}
    assert _statuses(bench) == ["accepted", "rejected"] + ["auto_ok"] * (n - 2)
    assert table.to_dict("records")[1] == {"id": table["id"][1], "verdict": "reject", "reviewer": "r1",
                                           "note": "danger not inferable", "time": "T"}  # fmt: skip
    assert any("'x': answer a" in s for s in said)
    # interrupted at the next prompt: the verdicts given so far are already in items.jsonl
    with pytest.raises(KeyboardInterrupt):
        rv.interactive(str(bench), "r2", _script("a", KeyboardInterrupt()), said.append, clock=lambda: "T")
    assert _statuses(bench)[:3] == ["accepted", "rejected", "accepted"]
    # the end of input quits; a new session asks only about items still unreviewed (the skipped one first)
    said.clear()
    _, counts = rv.interactive(str(bench), "r3", _script(None), said.append, clock=lambda: "T")
    assert counts["remaining"] == n - 3 and f"[1/{n - 3}]" in said[0]


def test_cli_interactive_reads_stdin_and_writes_review_csv(run_cli, bench, tmp_path):
    csv = tmp_path / "review.csv"
    proc = run_cli(["vesper-eval", "review", str(bench), "--interactive", "--reviewer", "me", "-o", str(csv)],
                   input="a\nr\nperson occluded\n")  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"[a/r/s/q]" in proc.stderr and proc.stdout == b""
    lines = csv.read_text().splitlines()
    assert lines[0] == "id,verdict,reviewer,note,time" and len(lines) == 3 and ",reject,me,person occluded," in lines[2]
    assert _statuses(bench)[:3] == ["accepted", "rejected", "auto_ok"]
    again = run_cli(["vesper-eval", "review", str(bench), "--apply", str(csv)])
    assert json.loads(again.stdout)["accepted"] == 1 and _statuses(bench)[:2] == ["accepted", "rejected"]
