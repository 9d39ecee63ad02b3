"""Source L: LLM-based comparison of two candidate next calls, or the deterministic offline judge.

The endpoint judge asks each pair in both orders (A/B swapped) to cancel position bias: y = mean of the
two verdicts, inconsistent verdicts give y = 0.5 with weight 0. When the server returns log-probabilities
of the first answer token, each verdict is soft: P(A) = softmax over the "A" and "B" tokens' masses. The offline judge scores a call by
cos(e(current turn ⊕ last observation), e(description ⊕ args)) + 0.5·grounded − 0.5·[repeat of an
earlier call] − 0.3·[mutating and not lexically requested], y = σ((score_a − score_b)/0.1).
"""

from __future__ import annotations

import json
import math

import numpy as np

from methodkit.core.endpoint import BaselineRegistry
from methodkit.tools.cita import features as ft
from methodkit.tools.cita import graph as tg
from methodkit.tools.cita.records import canonical

BASELINES = BaselineRegistry()
TAU_L = 0.1
HISTORY_STEPS = 6


@BASELINES.register("offline", "the deterministic embedding + heuristics judge (no model)")
def _offline_marker(messages, params):  # never asked: the offline judge scores pairs without a prompt
    raise RuntimeError("the offline judge scores pairs directly; it is not asked through the endpoint")


def offline_scores(ctx: dict, graph: tg.ToolGraph, embedder) -> np.ndarray:
    tools_by_name = {t["name"]: t for t in ctx["tools"]}
    last = str(ctx["history"][-1].get("observation", ""))[:400] if ctx["history"] else ""
    query = embedder([f"{ft.current_turn_text(ctx)} {last}"])[0]
    cands = ctx["candidates"]
    vecs = embedder([ft.candidate_text(c, tools_by_name) for c in cands])
    texts = [*ctx["instruction"], *(str(h.get("observation", "")) for h in ctx["history"])]
    earlier = {canonical(h["call"]) for h in ctx["history"]}
    turn_text = ft.current_turn_text(ctx).lower()
    index = graph.index
    scores = np.zeros(len(cands))
    for k, call in enumerate(cands):
        j = index.get(call["name"], -1)
        mutating = bool(graph.mutating[j]) if j >= 0 else tg.name_mutating(call["name"])
        requested = any(w in turn_text for w in ft._words(call["name"]))
        scores[k] = (
            float(vecs[k] @ query)
            + 0.5 * tg.grounded_fraction(call, texts)
            - 0.5 * (canonical(call) in earlier)
            - 0.3 * (mutating and not requested)
        )
    return scores


def offline_label(score_a: float, score_b: float) -> float:
    return 1.0 / (1.0 + math.exp(-(score_a - score_b) / TAU_L))


def prompt(ctx: dict, a: dict, b: dict, max_obs_chars: int = 400) -> str:
    tools = "\n".join(
        f"- {t['name']}({', '.join((t.get('parameters') or {}).get('properties') or {})}): "
        f"{t.get('description', '')[-160:]}"
        for t in ctx["tools"]
    )
    hist = (
        "\n".join(
            f"{canonical(h['call'])} -> {str(h.get('observation', ''))[:max_obs_chars]}"
            for h in ctx["history"][-HISTORY_STEPS:]
        )
        or "(none)"
    )
    return (
        f"Task (user turns):\n{json.dumps(ctx['instruction'])}\n\nTools:\n{tools}\n\nHistory:\n{hist}\n\n"
        f"Candidate A: {canonical(a)}\nCandidate B: {canonical(b)}\n"
        "Which next call better supports completing the task? Answer A or B."
    )


STRICT_SUFFIX = "\nReply with exactly one letter: A or B."
TOP_LOGPROBS = 5


def soft_a(logprobs) -> float | None:
    """P(A) from a first token's top log-probabilities {token: logprob}: the masses of the tokens that
    read "A" and "B" (case and spaces ignored) renormalised; None when neither is among them."""
    if not logprobs:
        return None
    mass = {"A": [], "B": []}
    for token, lp in logprobs.items():
        key = str(token).strip().upper()
        if key in mass and math.isfinite(lp):
            mass[key].append(lp)
    if not mass["A"] and not mass["B"]:
        return None
    top = max(mass["A"] + mass["B"])
    a, b = (sum(math.exp(lp - top) for lp in mass[k]) for k in "AB")
    return a / (a + b)


def pair_label(first, second) -> tuple[float, float]:
    """(y, w) for candidate a from its two verdicts: `first` asked with a as A, `second` with a as B; each
    (letter or None, P(A) or None). Unparsable or position-dependent letters: (0.5, 0); agreeing ones:
    w = 1 and y = the mean of P(a better) over both orders, soft where both carry P(A), else 0 or 1."""
    (v1, p1), (v2, p2) = first, second
    if v1 is None or v2 is None or (v1 == "A") != (v2 == "B"):
        return 0.5, 0.0
    if p1 is not None and p2 is not None:
        return (p1 + (1.0 - p2)) / 2.0, 1.0
    return float(v1 == "A"), 1.0


def _verdicts(endpoint, prompts: list[str], progress):
    """(letter, P(A)) verdicts of the prompts (letter None if unparsable, P(A) None without log-probs);
    an answer that is neither A nor B is asked once more, stricter."""
    from methodkit.core.endpoint import Request
    from methodkit.core.endpoint.parse import parse_choice

    params = {"max_tokens": 4, "temperature": 0, "logprobs": True, "top_logprobs": TOP_LOGPROBS}

    def read(answer):
        p = parse_choice(answer.text, "AB")
        return (p.value, soft_a(answer.logprobs)) if p.ok else (None, None)

    ask = [Request.user(text, **params) for text in prompts]
    out = [read(a) for a in endpoint.ask_many(ask, progress=progress, phase="judge")]
    again = [i for i, v in enumerate(out) if v[0] is None]
    if again:
        retry = [Request.user(prompts[i] + STRICT_SUFFIX, **params) for i in again]
        for i, answer in zip(again, endpoint.ask_many(retry, progress=progress, phase="judge re-ask")):
            out[i] = read(answer)
    return out


def ask_pairs(endpoint, items: list, max_obs_chars: int, progress, strict: bool):
    """items: [(ctx, a, b)] -> [(y, w, source)] asked in both orders; None where the endpoint failed
    (the caller falls back to the offline judge) unless `strict` (the EndpointError propagates)."""
    from methodkit.core.endpoint.client import EndpointError

    prompts = []
    for ctx, a, b in items:
        prompts.append(prompt(ctx, a, b, max_obs_chars))
        prompts.append(prompt(ctx, b, a, max_obs_chars))
    try:
        verdicts = _verdicts(endpoint, prompts, progress)
    except EndpointError:
        if strict:
            raise
        return [None] * len(items)
    source = endpoint.spec.text
    return [(*pair_label(verdicts[2 * p], verdicts[2 * p + 1]), source) for p in range(len(items))]
