"""CIM-guided episodes in an executable environment (BFCL's, or a replay env), and the oracle step value V*.

Protocol: at each step the candidate set is the next unexecuted gold call (or end_turn once the turn's
gold calls are done) plus generator distractors (seeds disjoint from training), end_turn always offered;
the policy's argmax is executed; end_turn moves to the next user turn; each turn has a budget of
|gold turn| + 2 calls. Success = the environment's state rule against the gold-executed environment.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass

import numpy as np

from methodkit.tools.cita import bfcl
from methodkit.tools.cita.generators import END_CALL, KINDS, Pools, negatives, turns_of
from methodkit.tools.cita.records import END_TURN, canonical

DISTRACTOR_KINDS = tuple(k for k in KINDS if k != "end_turn")


def split_of(task_id: str, seed: int = 0, test_fraction: float = 0.4) -> str:
    """The seeded-hash split of a task id (60/40 by default)."""
    h = int(hashlib.sha256(f"cita-split:{seed}:{task_id}".encode()).hexdigest()[:8], 16) / 2**32
    return "test" if h < test_fraction else "train"


def _f1(pred: Counter, gold: Counter) -> float:
    tp = sum((pred & gold).values())
    if not pred and not gold:
        return 1.0
    if tp == 0:
        return 0.0
    p, r = tp / sum(pred.values()), tp / sum(gold.values())
    return 2 * p * r / (p + r)


def _factory(entry):
    """A BFCL entry, or already a zero-argument environment factory (tools/cita/replay.env_factory)."""
    return entry if callable(entry) else (lambda: bfcl.BfclEnv(entry))


def replay_success(entry, calls: list[dict], gold_env) -> bool:
    env = _factory(entry)()
    for call in calls:
        if call["name"] != END_TURN:
            env.step(call)
    return env.same_state(gold_env)


def gold_env(entry, turns: list):
    env = _factory(entry)()
    for calls in turns:
        for call in calls:
            env.step(call)
    return env


def oracle_values(task: dict, ctx: dict, entry, gold) -> np.ndarray:
    """V*(c, a): execute the gold prefix, then a, then the remaining gold calls (end_turn skips the rest of
    the current turn); 1 when the final state equals the gold state."""
    turns = turns_of(task)
    k = ctx["turn"]
    i = len([h for h in ctx["history"] if h["turn"] == k])
    prefix = [h["call"] for h in ctx["history"]]
    rest_turn = turns[k][i:]
    later = [c for calls in turns[k + 1 :] for c in calls]
    out = np.zeros(len(ctx["candidates"]))
    for j, a in enumerate(ctx["candidates"]):
        suffix = later if a["name"] == END_TURN else [a, *rest_turn, *later]
        if a["name"] != END_TURN and rest_turn and canonical(a) == canonical(rest_turn[0]):
            suffix = [*rest_turn, *later]
        out[j] = float(replay_success(entry, prefix + suffix, gold))
    return out


@dataclass
class EpisodeResult:
    task_id: str
    success: bool
    tool_f1: float
    call_f1: float
    n_calls: int
    crashed: bool


def run_episode(task: dict, entry, pools: Pools, choose, seed: int, n_distractors: int = 4) -> EpisodeResult:
    """One episode; `choose(ctx) -> index` picks among ctx['candidates']; `entry` is a BFCL entry or an
    environment factory."""
    rng = np.random.default_rng(
        np.random.SeedSequence([seed, 0xE7A1, int(hashlib.sha256(task["task_id"].encode()).hexdigest()[:8], 16)])
    )
    turns = turns_of(task)
    gold = gold_env(entry, turns)
    env = _factory(entry)()
    history, executed = [], []
    crashed = False
    try:
        for k, calls in enumerate(turns):
            i = 0
            for _ in range(len(calls) + 2):
                positive, negs = negatives(task, turns, k, min(i, len(calls)), pools, rng, DISTRACTOR_KINDS)
                if len(negs) > n_distractors:
                    negs = [negs[p] for p in sorted(rng.choice(len(negs), n_distractors, replace=False))]
                cands = [positive, *[c for _, c in negs]]
                keys = {canonical(c) for c in cands}
                if canonical(END_CALL) not in keys:
                    cands.append(dict(END_CALL))
                order = rng.permutation(len(cands))  # no position is special
                cands = [cands[o] for o in order]
                ctx = {
                    "context_id": f"{task['task_id']}:{k}:{len(history)}",
                    "task_id": task["task_id"],
                    "instruction": task["instruction"][: k + 1],
                    "tools": task["tools"],
                    "history": history,
                    "candidates": cands,
                    "turn": k,
                    "goal": [c["name"] for c in calls],
                }
                pick = cands[int(choose(ctx))]
                if pick["name"] == END_TURN:
                    break
                observation, error = env.step(pick)
                history = [*history, {"call": pick, "observation": observation, "error": error, "turn": k}]
                executed.append(pick)
                if i < len(calls) and canonical(pick) == canonical(calls[i]):
                    i += 1
    except Exception:  # an episode that crashes counts as a failure, and is counted
        crashed = True
    gold_calls = [c for calls in turns for c in calls]
    success = (not crashed) and env.same_state(gold)
    return EpisodeResult(
        task["task_id"],
        bool(success),
        _f1(Counter(c["name"] for c in executed), Counter(c["name"] for c in gold_calls)),
        _f1(Counter(canonical(c) for c in executed), Counter(canonical(c) for c in gold_calls)),
        len(executed),
        crashed,
    )


def value_metrics(pred: list[np.ndarray], truth: list[np.ndarray]) -> dict:
    """Pairwise accuracy of predicted values on within-context pairs with V*_a ≠ V*_b, Brier vs V*."""
    right = total = 0
    sq, n = 0.0, 0
    for p, t in zip(pred, truth):
        for a in range(len(t)):
            for b in range(a + 1, len(t)):
                if t[a] != t[b]:
                    total += 1
                    right += (p[a] > p[b]) == (t[a] > t[b])
        sq += float(((p - t) ** 2).sum())
        n += len(t)
    return {"pair_acc": right / total if total else None, "brier": sq / n if n else None, "n_value_pairs": total}


def paired_bootstrap(a, b, n_boot: int = 10000, seed: int = 0, level: float = 0.95) -> dict:
    """Mean of b − a over paired tasks and its percentile bootstrap interval (tasks resampled)."""
    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    if d.size == 0:
        return {"diff": None, "lo": None, "hi": None, "n": 0}
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xB007]))
    means = d[rng.integers(0, d.size, size=(n_boot, d.size))].mean(1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return {"diff": float(d.mean()), "lo": float(lo), "hi": float(hi), "n": int(d.size)}
