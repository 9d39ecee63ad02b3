"""φ(c, a) = [e_c, e_a, e_c⊙e_a, |e_c − e_a|, s(c, a)]: text embeddings and 16 structural features.

e_c = e(current turn ⊕ last 3 calls ⊕ last observation); e_a = e(tool name ⊕ description ⊕ canonical
args). The structural features use the tool graph's posterior mean and data-flow prior, never V_sim
(the simulator's values stay a separate training source).
"""

from __future__ import annotations

import math

import numpy as np

from methodkit.tools.cita import graph as tg
from methodkit.tools.cita.records import END_TURN, canonical

STRUCTURAL = (
    "log_theta_prev_a",
    "dep_prev_a",
    "prereq_met",
    "grounded_frac",
    "required_missing",
    "type_ok",
    "arg_count",
    "exact_repeat",
    "times_called",
    "recency",
    "step_frac",
    "mutating",
    "lexical_mention",
    "last_error",
    "same_as_prev",
    "class_used",
)
N_STRUCT = len(STRUCTURAL)
_TYPES = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "float": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "dict": (dict,),
    "object": (dict,),
    "tuple": (list, tuple),
}


def current_turn_text(ctx: dict) -> str:
    return ctx["instruction"][-1] if ctx["instruction"] else ""


def context_text(ctx: dict) -> str:
    hist = ctx["history"]
    calls = " ; ".join(canonical(h["call"]) for h in hist[-3:])
    last = str(hist[-1].get("observation", ""))[:400] if hist else ""
    return f"{current_turn_text(ctx)} || {calls} || {last}"


def candidate_text(call: dict, tools_by_name: dict) -> str:
    if call["name"] == END_TURN:
        return "end_turn: the request is done, answer the user"
    desc = (tools_by_name.get(call["name"]) or {}).get("description", "")
    return f"{call['name']}: {desc[-300:]} {canonical(call)}"


def _type_ok(call: dict, schema: dict) -> float:
    props = schema.get("properties") or {}
    for key, value in (call.get("arguments") or {}).items():
        if key not in props:
            return 0.0
        kinds = _TYPES.get(props[key].get("type", ""), None)
        if kinds and not isinstance(value, kinds):
            return 0.0
    return 1.0


def _words(name: str) -> list[str]:
    import re

    return [w.lower() for w in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", name) if len(w) > 2]


def structural(ctx: dict, call: dict, graph: tg.ToolGraph) -> np.ndarray:
    index = graph.index
    n = len(graph.names)
    tools_by_name = {t["name"]: t for t in ctx["tools"]}
    turn = ctx.get("turn", len(ctx["instruction"]) - 1)
    hist = ctx["history"]
    in_turn = [h for h in hist if h.get("turn", turn) == turn]
    prev = index.get(in_turn[-1]["call"]["name"], n) if in_turn else n
    is_end = call["name"] == END_TURN
    a = n if is_end else index.get(call["name"], -1)
    theta = graph.posterior_mean()
    s = np.zeros(N_STRUCT, np.float32)
    s[0] = math.log(theta[prev, a]) if a >= 0 else math.log(1e-6)
    s[1] = graph.dep[prev, a] if (a >= 0 and a < n and prev < n) else 0.0
    executed = {h["call"]["name"] for h in hist if not h.get("error")}
    if a >= 0 and a < n:
        parents = [graph.names[i] for i in np.flatnonzero(graph.dep[:, a]) if graph.names[i] in tools_by_name]
        s[2] = 1.0 if not parents or any(p in executed for p in parents) else 0.0
    else:
        s[2] = 1.0
    texts = [*ctx["instruction"], *(str(h.get("observation", "")) for h in hist)]
    s[3] = tg.grounded_fraction(call, texts)
    schema = (tools_by_name.get(call["name"]) or {}).get("parameters") or {}
    s[4] = sum(1 for r in schema.get("required", []) if r not in (call.get("arguments") or {}))
    s[5] = _type_ok(call, schema) if not is_end else 1.0
    s[6] = len(call.get("arguments") or {})
    key = canonical(call)
    s[7] = float(any(canonical(h["call"]) == key for h in hist))
    same = [t for t, h in enumerate(hist) if h["call"]["name"] == call["name"]]
    s[8] = len(same)
    s[9] = 1.0 / (1 + len(hist) - 1 - same[-1]) if same else 0.0
    s[10] = len(in_turn) / 10.0
    s[11] = float(graph.mutating[a]) if 0 <= a < n else 0.0
    text = current_turn_text(ctx).lower()
    words = _words(call["name"])
    s[12] = float(bool(words) and any(w in text for w in words))
    s[13] = float(bool(hist) and bool(hist[-1].get("error")))
    s[14] = float(bool(in_turn) and in_turn[-1]["call"]["name"] == call["name"])
    used = {(tools_by_name.get(h["call"]["name"]) or {}).get("class") for h in hist} - {None}
    s[15] = float((tools_by_name.get(call["name"]) or {}).get("class") in used) if used else 0.0
    return s


def featurize(contexts: list, graph: tg.ToolGraph, embedder) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Feature rows for every (context, candidate): (X[P, 4·384 + 16] float32, [(context row, k)])."""
    ctx_texts, cand_texts, structs, where = [], [], [], []
    for c, ctx in enumerate(contexts):
        tools_by_name = {t["name"]: t for t in ctx["tools"]}
        ctext = context_text(ctx)
        for k, call in enumerate(ctx["candidates"]):
            ctx_texts.append(ctext)
            cand_texts.append(candidate_text(call, tools_by_name))
            structs.append(structural(ctx, call, graph))
            where.append((c, k))
    if not where:
        return np.zeros((0, 4 * 384 + N_STRUCT), np.float32), where
    ec = embedder(ctx_texts)
    ea = embedder(cand_texts)
    X = np.concatenate([ec, ea, ec * ea, np.abs(ec - ea), np.stack(structs)], axis=1).astype(np.float32)
    return X, where
