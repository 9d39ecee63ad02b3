"""Simulator values V_sim(c, a) of candidate next calls, and synthetic tasks from the posterior predictive.

A context is a candidates record (records.py) with a `goal`: the tool names of the current turn's task
(real contexts: the gold tools of the turn; synthetic: the visited tools of a sampled chain). Its state:
done = goal tools already executed without error in this turn, prerequisites j after i when dep_ij and i
comes first in the goal order, horizon H = |goal| + slack.
"""

from __future__ import annotations

import copy
import hashlib
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError
from methodkit.tools.cita import graph as tg
from methodkit.tools.cita.generators import dummy_value
from methodkit.tools.cita.records import END_TURN


@dataclass
class SimConfig:
    rollouts: int = 256
    draws: int = 32
    slack: int = 3
    gamma: float = 4.0  # goal tilt of π: g_j = 1 + γ·[j unfinished, ready]
    beta: float = 2.0
    seed: int = 0


def turn_history(ctx: dict) -> list:
    turn = ctx.get("turn", len(ctx["instruction"]) - 1)
    return [h for h in ctx["history"] if h.get("turn", turn) == turn]


def context_texts(ctx: dict) -> list[str]:
    return [*ctx["instruction"], *(str(h.get("observation", "")) for h in ctx["history"])]


def _state(
    graph: tg.ToolGraph,
    ctx: dict,
    local_index: dict,
    mutating_local: np.ndarray,
    q_mean: float,
    rho_mean: np.ndarray,
    glob: list,
    slack: int,
):
    goal_names = [g for g in ctx["goal"] if g in local_index]
    n = len(local_index)
    goal = multi = 0
    seen: dict = {}
    for name in goal_names:
        seen[name] = seen.get(name, 0) + 1
    order = list(dict.fromkeys(goal_names))
    for name in order:
        goal |= 1 << local_index[name]
        if seen[name] > 1:
            multi |= 1 << local_index[name]
    prereq = np.zeros(n, np.uint64)
    for b, name_j in enumerate(order):
        j = local_index[name_j]
        mask = 0
        for name_i in order[:b]:
            if graph.dep[glob[local_index[name_i]], glob[j]] > 0:
                mask |= 1 << local_index[name_i]
        prereq[j] = mask
    hist = turn_history(ctx)
    done = 0
    for h in hist:
        name = h["call"]["name"]
        if name in local_index and not h.get("error") and (goal >> local_index[name]) & 1:
            done |= 1 << local_index[name]
    texts = context_texts(ctx)
    cand, ok = [], []
    for call in ctx["candidates"]:
        if call["name"] == END_TURN:
            cand.append(n)
            ok.append(1.0)
        elif call["name"] in local_index:
            j = local_index[call["name"]]
            p = rho_mean[j] * (1.0 if tg.grounded_fraction(call, texts) >= 1.0 else 1.0 - q_mean)
            cand.append(j)
            ok.append(p)
        else:
            cand.append(-1)  # unknown tool: it cannot execute
            ok.append(0.0)
    steps = max(len(goal_names) + slack - len(hist) - 1, 0)
    return goal, multi, prereq, done, cand, ok, steps


def _stream_key(ctx: dict, row: int) -> int:
    """A context's own random stream: by its id, so its value does not depend on its neighbours."""
    name = str(ctx.get("context_id", row))
    return int(hashlib.sha256(name.encode()).hexdigest()[:15], 16)


def values(graph: tg.ToolGraph, contexts: list, cfg: SimConfig, device: str = "cpu") -> list[tuple[np.ndarray, np.ndarray]]:
    """[(mean[K], std[K])] per context, by the Numba kernel (device 'cuda': its CuPy twin, tools/cita/
    gpu_kernels.py), contexts grouped by their tool set."""
    if device == "cuda":
        from methodkit.tools.cita.gpu_kernels import sim_values_cuda as sim_values
    else:
        from methodkit.tools.cita.kernels import sim_values

    rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, 0x5117]))
    probs, rho = tg.draws(graph, cfg.draws, rng)
    rho_mean = graph.rho_ab[:, 0] / graph.rho_ab.sum(1)
    q_mean = float(graph.q_ab[0] / graph.q_ab.sum())
    eps = float(graph.eps_ab[0] / graph.eps_ab.sum())
    index = graph.index
    groups = defaultdict(list)
    for c, ctx in enumerate(contexts):
        if ctx.get("goal") is None:
            raise DataError(f"context {ctx.get('context_id', c)}: the simulator needs 'goal' (the turn's tool names)")
        names = tuple(sorted({t["name"] for t in ctx["tools"]} & set(index)))
        if len(names) > tg.MAX_TASK_TOOLS:
            raise DataError(f"context {ctx.get('context_id', c)}: {len(names)} tools (> 64); filter with --max-tools")
        groups[names].append(c)
    out: list = [None] * len(contexts)
    for names, members in sorted(groups.items()):
        glob = [index[nm] for nm in names]
        local_index = {nm: i for i, nm in enumerate(names)}
        p_loc, r_loc = tg.local(probs, rho, glob)
        mut = 0
        for i, gi in enumerate(glob):
            if graph.mutating[gi]:
                mut |= 1 << i
        K = max(len(contexts[c]["candidates"]) for c in members)
        C = len(members)
        goal = np.zeros(C, np.uint64)
        multi = np.zeros(C, np.uint64)
        done = np.zeros(C, np.uint64)
        prereq = np.zeros((C, len(names)), np.uint64)
        cand = np.full((C, K), -1, np.int32)
        ok = np.zeros((C, K))
        steps = np.zeros(C, np.int32)
        keys = np.array([_stream_key(contexts[c], c) for c in members], np.uint64)
        for row, c in enumerate(members):
            s = _state(graph, contexts[c], local_index, None, q_mean, rho_mean[glob], glob, cfg.slack)
            goal[row], multi[row], prereq[row], done[row] = s[0], s[1], s[2], s[3]
            cand[row, : len(s[4])] = s[4]
            ok[row, : len(s[5])] = s[5]
            steps[row] = s[6]
        mean, var = sim_values(
            p_loc,
            r_loc,
            goal,
            prereq,
            done,
            cand,
            ok,
            np.uint64(mut),
            multi,
            eps,
            cfg.gamma,
            cfg.beta,
            steps,
            cfg.rollouts,
            np.uint64(cfg.seed),
            keys,
        )
        for row, c in enumerate(members):
            k = len(contexts[c]["candidates"])
            out[c] = (mean[row, :k].copy(), np.sqrt(var[row, :k] / cfg.rollouts))
    return out


# ---------------------------------------------------------------- synthetic tasks


def _placeholder_args(tool: dict, tag: str) -> dict:
    schema = tool.get("parameters") or {}
    args = {}
    for key in schema.get("required", []):
        kind = ((schema.get("properties") or {}).get(key) or {}).get("type", "string")
        args[key] = f"{key}_{tag}" if kind == "string" else dummy_value(schema, key)
    return args


def sample_tasks(graph: tg.ToolGraph, domains: list[list[dict]], n_tasks: int, seed: int) -> list[dict]:
    """Synthetic contexts: a chain START→STOP in a posterior draw restricted to a sampled domain's tools
    (length clipped to the 5-95% quantiles of observed turns); goal = visited tools; the context sits at a
    random position of the goal order with candidates of every generator kind. Each gets a template
    instruction from the goal tools' descriptions and placeholder args, present in the text when grounded."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5A3]))
    index = graph.index
    lo, hi = np.quantile(graph.lengths, [0.05, 0.95])
    lo, hi = max(int(lo), 1), max(int(np.ceil(hi)), 1)
    out = []
    for t in range(n_tasks):
        tools = domains[rng.integers(len(domains))]
        names = sorted({x["name"] for x in tools} & set(index))
        glob = [index[nm] for nm in names]
        probs, _ = tg.draws(graph, 1, rng)
        p_loc, _ = tg.local(probs, graph.rho_ab[None, :, 0] * 0 + 1, glob)
        n = len(names)
        length = int(rng.integers(lo, hi + 1))
        seq, prev = [], n
        while len(seq) < length:
            row = p_loc[0, prev, :n]
            if row.sum() <= 0:
                break
            j = int(rng.choice(n, p=row / row.sum()))
            seq.append(j)
            prev = j
        if not seq:
            continue
        by_name = {x["name"]: x for x in tools}
        tag = f"s{t}"
        calls = [
            {"name": names[j], "arguments": _placeholder_args(by_name[names[j]], f"{tag}{i}")}
            for i, j in enumerate(seq)
        ]
        grounded = rng.random() < 0.8
        lines = []
        for call in calls:
            desc = by_name[call["name"]].get("description", "").split("Tool description:")[-1].strip()[:160]
            vals = ", ".join(str(v) for v in call["arguments"].values())
            lines.append(f"{desc} ({vals})" if grounded and vals else desc)
        pos = int(rng.integers(0, len(calls) + 1))
        history = [{"call": c, "observation": "{}", "error": False, "turn": 0} for c in calls[:pos]]
        positive = calls[pos] if pos < len(calls) else {"name": END_TURN, "arguments": {}}
        cands = [positive]
        off = [nm for nm in names if nm not in {c["name"] for c in calls}]
        if off:
            name = off[rng.integers(len(off))]
            cands.append({"name": name, "arguments": _placeholder_args(by_name[name], f"{tag}x")})
        if pos > 0:
            cands.append(copy.deepcopy(calls[pos - 1]))
        if pos + 1 < len(calls):
            cands.append(copy.deepcopy(calls[pos + 1]))
        if pos < len(calls):
            cands.append({"name": END_TURN, "arguments": {}})
            if positive["arguments"]:
                bad = copy.deepcopy(positive)
                key = next(iter(bad["arguments"]))
                bad["arguments"][key] = f"{key}_other{t}"
                cands.append(bad)
        seen, unique = set(), []
        for c in cands:
            key = repr(sorted(c["arguments"].items())) + c["name"]
            if key not in seen:
                seen.add(key)
                unique.append(c)
        out.append(
            {
                "context_id": f"synthetic:{t}",
                "task_id": f"synthetic:{t}",
                "instruction": [" Then ".join(lines)],
                "tools": tools,
                "history": history,
                "candidates": unique,
                "goal": [c["name"] for c in calls],
                "turn": 0,
                "synthetic_grounded": bool(grounded),
            }
        )
    return out
