"""Evaluation: validation CE, teacher agreement, instruction suites (exact match, ROUGE-L), math,
and the mechanism measures (teacher-student pathway OT cost; the node bound against the measured
MLP discrepancy)."""

from __future__ import annotations

import numpy as np
import torch

from methodkit.tools.mcd import models
from methodkit.tools.mcd.tasks import rouge_l


@torch.no_grad()
def generate_answer(model, prompt_ids: list[int], max_new: int, newline: int = 10) -> list[int]:
    ids = torch.tensor([prompt_ids[-(model.cfg.max_len - max_new):]], dtype=torch.long)
    cache = model.new_cache(1)
    logits = model(ids, cache)[:, -1]
    out = []
    for _ in range(max_new):
        nxt = int(logits.argmax(-1))
        if nxt == newline:
            break
        out.append(nxt)
        logits = model(torch.tensor([[nxt]]), cache)[:, -1]
    return out


def suite_scores(model, rows: list[dict], encode, decode) -> dict:
    """Per suite: exact match and ROUGE-L (percent) of greedy answers."""
    by_suite: dict[str, list] = {}
    for row in rows:
        max_new = min(len(encode(row["answer"])) + 4, model.cfg.max_len // 2)
        pred = decode(generate_answer(model, encode(row["prompt"]), max_new)).strip()
        by_suite.setdefault(row["suite"], []).append((pred == row["answer"], rouge_l(pred, row["answer"])))
    out = {}
    for suite, scores in sorted(by_suite.items()):
        arr = np.array(scores, dtype=float)
        out[f"{suite}_em"] = 100 * arr[:, 0].mean()
        out[f"{suite}_rougeL"] = 100 * arr[:, 1].mean()
    return out


@torch.no_grad()
def agreement(student, teacher, windows: models.Windows, max_items: int = 128) -> float:
    idx = np.arange(min(len(windows), max_items))
    x, _ = windows.batch(idx)
    return float((student(x).argmax(-1) == teacher(x).argmax(-1)).float().mean())


def pathway_cost(teacher, t_tcs, student, s_tcs, windows, settings, subset, cost_weights, n_targets, seed,
                 max_items=16, eps=0.05, iters=50):  # fmt: skip
    """Mean teacher-student pathway OT cost on held-out windows (no gradients)."""
    from methodkit.tools.mcd import graph as G
    from methodkit.tools.mcd import losses
    from methodkit.tools.mcd.distill import target_positions

    idx = np.arange(min(len(windows), max_items))
    x, y = windows.batch(idx)
    pos = target_positions(idx, windows.ctx, n_targets, seed)
    tgt = y.gather(1, pos)
    with torch.no_grad():
        t_desc, _, _ = G.descriptors_for(teacher, t_tcs, x, pos, tgt, settings, subset)
        s_desc, _, _ = G.descriptors_for(student, s_tcs, x, pos, tgt, settings, subset)
        value, n_empty, _ = losses.path_loss(t_desc, s_desc, windows.ctx, cost_weights, eps, iters)
    return float("nan") if value is None else float(value), n_empty
