"""The six negative generators (ToolPRMBench's offline sampling) and the gold turn structure of a task.

A context is (turn k, position i) of a successful trajectory: its positive is the i-th gold call of turn
k, or `end_turn` once the turn's gold calls are done. The same generators, with other seeds, make the
distractors of the evaluation episodes.
"""

from __future__ import annotations

import copy
from collections import defaultdict

import numpy as np

from methodkit.tools.cita.records import END_TURN, canonical

KINDS = ("other_tool", "arg_swap", "premature", "repeat", "ungrounded", "end_turn")
END_CALL = {"name": END_TURN, "arguments": {}}
_DUMMY = {
    "string": "example",
    "integer": 0,
    "number": 0.0,
    "float": 0.0,
    "boolean": False,
    "array": [],
    "dict": {},
    "object": {},
}


def turns_of(task: dict) -> list[list[dict]]:
    """The task's gold calls grouped by turn (every instruction turn present, possibly empty)."""
    turns: list[list[dict]] = [[] for _ in task["instruction"]]
    for step in task["steps"]:
        k = int(step["turn"])
        while k >= len(turns):
            turns.append([])
        turns[k].append(step["call"])
    return turns


class Pools:
    """Calls seen per tool and argument values seen per (tool, parameter), with the task they came from."""

    def __init__(self, tasks):
        self.calls = defaultdict(list)
        self.values = defaultdict(list)
        for task in tasks:
            for step in task["steps"]:
                call = step["call"]
                self.calls[call["name"]].append((task["task_id"], call))
                for key, value in (call.get("arguments") or {}).items():
                    self.values[(call["name"], key)].append((task["task_id"], value))


def _schema(tools: list, name: str) -> dict:
    for tool in tools:
        if tool["name"] == name:
            return tool.get("parameters") or {}
    return {}


def dummy_value(schema: dict, param: str):
    kind = ((schema.get("properties") or {}).get(param) or {}).get("type", "string")
    return copy.deepcopy(_DUMMY.get(kind, "example"))


def _other_tool(task, positive, pools, rng):
    names = [t["name"] for t in task["tools"] if t["name"] != positive["name"]]
    with_calls = [n for n in names if pools.calls.get(n)]
    if not with_calls:
        return None
    name = with_calls[rng.integers(len(with_calls))]
    options = pools.calls[name]
    elsewhere = [c for tid, c in options if tid != task["task_id"]] or [c for _, c in options]
    return copy.deepcopy(elsewhere[rng.integers(len(elsewhere))])


def _arg_swap(task, base, pools, rng):
    arguments = base.get("arguments") or {}
    if base["name"] == END_TURN or not arguments:
        return None
    keys = list(arguments)
    rng.shuffle(keys)
    for key in keys:
        seen = [v for tid, v in pools.values.get((base["name"], key), []) if v != arguments[key]]
        if seen:
            call = copy.deepcopy(base)
            call["arguments"][key] = copy.deepcopy(seen[rng.integers(len(seen))])
            return call
    return None


def _ungrounded(task, base, rng):
    if base["name"] == END_TURN:
        return None
    call = copy.deepcopy(base)
    schema = _schema(task["tools"], base["name"])
    required = [r for r in schema.get("required", []) if r in call["arguments"]]
    if required:
        del call["arguments"][required[rng.integers(len(required))]]
        return call
    params = list(schema.get("properties") or {})
    if not params:
        return None
    key = params[rng.integers(len(params))]
    call["arguments"][key] = dummy_value(schema, key)
    return call if canonical(call) != canonical(base) else None


def negatives(task: dict, turns: list, k: int, i: int, pools: Pools, rng: np.random.Generator, kinds=KINDS):
    """[(kind, call)] for context (turn k, position i); each kind at most once, duplicates of the
    positive (or of each other) dropped."""
    flat = [(kk, ii) for kk, turn in enumerate(turns) for ii in range(len(turn))]
    at_end = i >= len(turns[k])
    positive = END_CALL if at_end else turns[k][i]
    done = [turns[kk][ii] for kk, ii in flat if (kk, ii) < (k, i)]
    # a_{t+1}: inside a turn the next gold call; at a turn's end the first call of a later turn
    later = [turns[kk][ii] for kk, ii in flat if (kk > k if at_end else (kk, ii) > (k, i))]
    base = positive if not at_end else (done[-1] if done else None)
    seen = {canonical(positive)}
    out = []
    for kind in kinds:
        call = None
        if kind == "other_tool":
            call = _other_tool(task, positive, pools, rng)
        elif kind == "arg_swap" and base is not None:
            call = _arg_swap(task, base, pools, rng)
        elif kind == "premature":
            call = copy.deepcopy(later[0]) if later else None
        elif kind == "repeat":
            call = copy.deepcopy(done[-1]) if done else None
        elif kind == "ungrounded" and base is not None:
            call = _ungrounded(task, base, rng)
        elif kind == "end_turn" and not at_end:
            call = dict(END_CALL)
        if call is None:
            continue
        key = canonical(call)
        if key in seen:
            continue
        seen.add(key)
        out.append((kind, call))
    return positive, out
