"""Importers of τ²-bench results and ComplexFuncBench JSONL: known answers on fixture files written from
the public formats, and malformed input refused (exit 2) naming the file and the row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from methodkit.core.errors import DataError

FIXTURES = Path(__file__).parent / "fixtures"
TAU2 = FIXTURES / "tau2_results.json"
CFB = FIXTURES / "complexfuncbench.jsonl"


def test_tau2_results_known_answer():
    from methodkit.tools.cita.importers import tau2_results

    a, b = tau2_results(TAU2.read_text(), "r.json")
    assert a["task_id"] == "tau2:retail:7:0" and a["success"] is True and b["success"] is False
    assert a["instruction"] == ["Cancel my order #W1, email ann@x.com.", "Yes, no longer needed."]
    calls = [(s["turn"], s["call"]["name"], s["call"]["arguments"].get("order_id"), s["error"]) for s in a["steps"]]
    assert calls == [
        (0, "find_user_id_by_email", None, False),
        (0, "get_order_details", "#W9", True),  # answered second, matched by its id
        (0, "get_order_details", "#W1", False),
        (1, "cancel_pending_order", "#W1", False),
    ]
    assert a["steps"][1]["observation"] == "Error: order not found" and a["steps"][0]["observation"] == "ann_1"
    assert a["gold_tools"] == ["find_user_id_by_email", "cancel_pending_order"]
    assert [t["name"] for t in a["tools"]] == ["find_user_id_by_email", "get_order_details", "cancel_pending_order"]
    assert a["tools"][2]["parameters"]["required"] == ["order_id", "reason"]
    assert b["steps"][0]["call"] == {"name": "transfer_to_human_agents", "arguments": {"summary": "cancel"}}
    assert b["tools"][-1]["name"] == "transfer_to_human_agents"  # a called tool with no definition is named


def test_complexfuncbench_known_answer():
    from methodkit.tools.cita.importers import complexfuncbench

    car, hotel = complexfuncbench(CFB.read_text(), "c.jsonl")
    assert car["task_id"] == "cfb:Car-Rental-0" and car["success"] is True and car["source"] == "cfb"
    assert [s["call"]["name"] for s in car["steps"]] == ["Search_Car_Location", "Search_Cars_Rentals", "Get_Currency"]
    assert [s["error"] for s in car["steps"]] == [False, False, True]
    assert json.loads(car["steps"][1]["observation"])["data"]["search_results"][0]["price"] == 52.1
    assert hotel["steps"][0]["call"]["arguments"] == {"query": "Paris"} and len(hotel["tools"]) == 1


def test_imported_trajectories_fit_the_graph():
    from methodkit.tools.cita import graph as tg
    from methodkit.tools.cita.importers import complexfuncbench, tau2_results
    from methodkit.tools.cita.records import dumps_jsonl, parse_jsonl

    tasks = tau2_results(TAU2.read_text(), "r.json") + complexfuncbench(CFB.read_text(), "c.jsonl")
    again, _ = parse_jsonl(dumps_jsonl(tasks), "x.jsonl")  # the unified format's own checks accept them
    g = tg.fit(again)
    i, j = g.index["find_user_id_by_email"], g.index["get_order_details"]
    assert g.counts[i, j] == 1  # one logged transition
    assert g.rho_ab[g.index["Get_Currency"]].tolist() == [1, 2]  # Beta(1 + 0 successes, 1 + 1 error)


@pytest.mark.parametrize(
    "importer, text, message",
    [
        ("tau2_results", '{"simulations": [{"task_id": "1", "messages": [{"role": "robot"}]}]}', "simulations[0]"),
        ("tau2_results", '{"tasks": []}', "no 'simulations' list"),
        (
            "tau2_results",
            '{"simulations": [{"task_id": "1", "messages": [{"role": "tool", "id": "x"}]}]}',
            "no pending",
        ),
        ("complexfuncbench", '{"id": 1, "conversations": []}\n{"id": 2}\n', "x:2: needs 'id'"),
        ("complexfuncbench", '{"id": 1, "conversations": [{"role": "observation", "content": [1, 2]}]}', "x:1"),
    ],
)
def test_malformed_input_names_the_row(importer, text, message):
    from methodkit.tools.cita import importers

    with pytest.raises(DataError, match=message.replace("[", r"\[").replace("]", r"\]")):
        getattr(importers, importer)(text, "x")


def test_cli_imports_and_refuses_malformed_files(run_cli, one_line_error, tmp_path):
    out = tmp_path / "t.jsonl"
    proc = run_cli(["cita-data", "tau2", TAU2, "--split", "all", "-o", out])
    assert proc.returncode == 0, proc.stderr.decode()
    ids = [json.loads(line)["task_id"] for line in out.read_text().splitlines()]
    assert ids == ["tau2:retail:7:0", "tau2:retail:7:1"]
    cfb = run_cli(["cita-data", "cfb", CFB])
    assert [json.loads(line)["source"] for line in cfb.stdout.decode().splitlines()] == ["cfb", "cfb"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(CFB.read_text().splitlines()[0] + "\n" + '{"id": "x", "conversations": [{"role": 3}]}\n')
    target = tmp_path / "keep.jsonl"
    target.write_text("old\n")
    proc = run_cli(["cita-data", "cfb", bad, "-o", target, "--force"])
    one_line_error(proc, "cita-data", f"{bad.name}:2: conversations[0]: unknown role 3")
    assert target.read_text() == "old\n"


def test_tau2_user_tool_calls_are_not_agent_steps():
    """τ² telecom: the user runs tools of their own (requestor user); those are not the agent's steps."""
    from methodkit.tools.cita.importers import tau2_results

    user_call = {"id": "u1", "name": "toggle_airplane_mode", "arguments": {}, "requestor": "user"}
    messages = [
        {"role": "user", "content": "My phone has no signal."},
        {"role": "assistant", "tool_calls": [{"id": "a1", "name": "get_line_status", "arguments": {"line": "L1"}}]},
        {"role": "user", "content": None, "tool_calls": [user_call]},
        {"role": "tool", "id": "u1", "content": "airplane mode off", "requestor": "user"},
        {"role": "tool", "id": "a1", "content": "active", "requestor": "assistant"},
    ]
    doc = {"simulations": [{"task_id": "t", "messages": messages, "reward_info": {"reward": 1}}]}
    (record,) = tau2_results(json.dumps(doc), "r.json")
    assert [(s["call"]["name"], s["observation"]) for s in record["steps"]] == [("get_line_status", "active")]
    assert record["instruction"] == ["My phone has no signal."]
