"""The Bayesian tool graph: data-flow prior, Dirichlet transitions, Beta reliabilities, the mutating set.

Nodes are tools (global, by name) plus START (row n) and STOP (column n). Transitions out of i:
θ_i ~ Dirichlet(α0·m_i + n_i) with m_ij ∝ exp(κ·dep_ij) + a uniform floor and n_ij the i→j counts of
successful trajectories, counted per user turn (START→first call, ..., last call→STOP).
Reliability ρ_j ~ Beta(1 + s_j, 1 + e_j); an ungrounded call fails with q ~ Beta(1 + u_fail, 1 + u_ok);
the off-goal step rate ε ~ Beta(1 + off, 1 + on) from failed logs' steps outside the task's gold tools.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

import numpy as np

from methodkit.core.errors import DataError
from methodkit.tools.cita.generators import turns_of
from methodkit.tools.cita.records import END_TURN

MUTATING_WORDS = (
    "rm",
    "delete",
    "cancel",
    "book",
    "send",
    "post",
    "transfer",
    "sell",
    "pay",
    "remove",
    "create",
    "update",
    "write",
    "set",
    "add",
    "mv",
    "cp",
    "touch",
    "mkdir",
    "echo",
)
IGNORED_KEYS = {"error"}
MAX_TASK_TOOLS = 64


def _norm(name: str) -> str:
    key = re.sub(r"[^a-z0-9]", "", str(name).lower())
    return key[:-1] if key.endswith("s") and len(key) > 3 else key


def _response_keys(tool: dict) -> set:
    props = ((tool.get("response") or {}).get("properties")) or {}
    return {_norm(k) for k in props if k not in IGNORED_KEYS}


def _param_keys(tool: dict) -> set:
    return {_norm(k) for k in ((tool.get("parameters") or {}).get("properties") or {})}


def _observation_keys(text: str) -> set:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return set()
    return {_norm(k) for k in value if k not in IGNORED_KEYS} if isinstance(value, dict) else set()


def name_mutating(name: str) -> bool:
    words = re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", name)
    return any(w.lower() in MUTATING_WORDS for w in words if w)


def grounded_fraction(call: dict, texts: list[str]) -> float:
    """Share of the call's argument values that appear (normalised) in the instruction or earlier observations."""
    args = call.get("arguments") or {}
    if not args:
        return 1.0
    haystack = " ".join(texts).lower()
    found = 0
    for value in args.values():
        parts = value if isinstance(value, list) else [value]
        ok = all(str(p).lower().strip() in haystack for p in parts if str(p).strip()) if parts else True
        found += ok
    return found / len(args)


@dataclass
class ToolGraph:
    names: list
    tools: list  # the tool records (name, description, parameters, response)
    dep: np.ndarray  # [n, n] 0/1
    alpha: np.ndarray  # [n+1, n+1] Dirichlet posterior parameters (rows: tools + START; cols: tools + STOP)
    counts: np.ndarray  # [n+1, n+1] observed transitions
    rho_ab: np.ndarray  # [n, 2] Beta(a, b) of execution success
    q_ab: np.ndarray  # [2] Beta of ungrounded failure
    eps_ab: np.ndarray  # [2] Beta of the off-goal step rate
    mutating: np.ndarray  # [n] bool
    lengths: np.ndarray  # observed turn lengths (for synthetic tasks)
    hyper: dict = field(default_factory=dict)
    data_sha256: str = ""

    @property
    def index(self) -> dict:
        return {name: i for i, name in enumerate(self.names)}

    def posterior_mean(self) -> np.ndarray:
        return self.alpha / self.alpha.sum(1, keepdims=True)

    def to_arrays(self) -> dict:
        return {
            "dep": self.dep,
            "alpha": self.alpha,
            "counts": self.counts,
            "rho_ab": self.rho_ab,
            "q_ab": self.q_ab,
            "eps_ab": self.eps_ab,
            "mutating": self.mutating,
            "lengths": self.lengths,
        }

    def sidecar(self) -> dict:
        return {"names": self.names, "tools": self.tools, "hyper": self.hyper, "data_sha256": self.data_sha256}

    @classmethod
    def from_parts(cls, arrays: dict, sidecar: dict, where: str = "graph") -> ToolGraph:
        try:
            return cls(
                sidecar["names"],
                sidecar["tools"],
                arrays["dep"],
                arrays["alpha"],
                arrays["counts"],
                arrays["rho_ab"],
                arrays["q_ab"],
                arrays["eps_ab"],
                arrays["mutating"].astype(bool),
                arrays["lengths"],
                sidecar.get("hyper", {}),
                sidecar.get("data_sha256", ""),
            )
        except KeyError as exc:
            raise DataError(f"{where}: not a cita-sim graph (missing {exc.args[0]})") from None


def fit(tasks: list, alpha0: float = 1.0, kappa: float = 2.0, floor: float = 0.05, warn=None) -> ToolGraph:
    """Fit the graph from trajectories (successful ones give transitions; all give reliability counts)."""
    tools: dict = {}
    for task in tasks:
        if len(task["tools"]) > MAX_TASK_TOOLS:
            raise DataError(
                f"task {task['task_id']} has {len(task['tools'])} tools (> {MAX_TASK_TOOLS}); "
                "filter its tool list (--max-tools)"
            )
        for tool in task["tools"]:
            tools.setdefault(tool["name"], tool)
    names = sorted(tools)
    index = {name: i for i, name in enumerate(names)}
    n = len(names)
    out_keys = [set(_response_keys(tools[name])) for name in names]
    counts = np.zeros((n + 1, n + 1))
    succ, errs, mut_seen, mut_hits = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    u_fail = u_ok = off = on = 0.0
    lengths = []
    for task in tasks:
        gold_names = {s["call"]["name"] for s in task["steps"]}
        texts = list(task["instruction"])
        for step in task["steps"]:
            name = step["call"]["name"]
            if name not in index:
                continue
            j = index[name]
            out_keys[j] |= _observation_keys(step.get("observation", ""))
            errs[j] += bool(step["error"])
            succ[j] += not step["error"]
            if "mutated" in step:
                mut_seen[j] += 1
                mut_hits[j] += bool(step["mutated"])
            if grounded_fraction(step["call"], texts) < 1.0:
                u_fail += bool(step["error"])
                u_ok += not step["error"]
            texts.append(str(step.get("observation", "")))
            if task.get("success") is False:
                off += name not in task.get("gold_tools", gold_names)
                on += name in task.get("gold_tools", gold_names)
        if task.get("success") is not True:
            continue
        for calls in turns_of(task):
            seq = [n] + [index[c["name"]] for c in calls if c["name"] in index] + [n]
            lengths.append(len(seq) - 2)
            for a, b in zip(seq[:-1], seq[1:]):
                counts[a, b] += 1
    dep = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j and out_keys[i] & _param_keys(tools[names[j]]):
                dep[i, j] = 1.0
    prior = np.full((n + 1, n + 1), floor)
    prior[:n, :n] += np.exp(kappa * dep) - 1.0
    prior /= prior.sum(1, keepdims=True)
    alpha = alpha0 * prior + counts
    mutating = np.where(
        mut_seen > 0, mut_hits / np.maximum(mut_seen, 1) > 0.5, np.array([name_mutating(nm) for nm in names])
    )
    unseen = [names[j] for j in range(n) if counts[:, j].sum() == 0 and succ[j] + errs[j] == 0]
    if unseen and warn is not None:
        warn(f"{len(unseen)} tool(s) have no logged call (prior-only rows), e.g. {', '.join(unseen[:3])}")
    digest = hashlib.sha256(json.dumps([t["task_id"] for t in tasks]).encode()).hexdigest()
    return ToolGraph(
        names,
        [tools[nm] for nm in names],
        dep,
        alpha,
        counts,
        np.stack([1 + succ, 1 + errs], 1),
        np.array([1 + u_fail, 1 + u_ok]),
        np.array([1 + off, 1 + on]),
        mutating.astype(bool),
        np.array(lengths or [1], dtype=np.int64),
        {"alpha0": alpha0, "kappa": kappa, "floor": floor},
        digest,
    )


def draws(graph: ToolGraph, D: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """D posterior draws: transitions [D, n+1, n+1] (Dirichlet rows) and reliabilities [D, n]."""
    gam = rng.standard_gamma(np.broadcast_to(graph.alpha, (D, *graph.alpha.shape)))
    probs = gam / np.maximum(gam.sum(2, keepdims=True), 1e-300)
    rho = rng.beta(graph.rho_ab[:, 0], graph.rho_ab[:, 1], size=(D, len(graph.names)))
    return probs, rho


def local(probs: np.ndarray, rho: np.ndarray, glob: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The draws restricted to one task's tools (global indices `glob`), rows renormalised."""
    n_all = rho.shape[1]
    rows = np.array([*glob, n_all])
    sub = probs[:, rows][:, :, rows]
    sub = sub / np.maximum(sub.sum(2, keepdims=True), 1e-300)
    return np.ascontiguousarray(sub), np.ascontiguousarray(rho[:, glob])


def is_end(call: dict) -> bool:
    return call["name"] == END_TURN
