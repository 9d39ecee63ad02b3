"""Evaluation: marginal and greedy-stop bits per token, pauses and compute per token, pause
histograms per token class, exact match on arith answers."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from methodkit.tools.cyb.data import ARITH_CLASSES, BYTE_CLASSES, Windows, arith_classes, byte_classes
from methodkit.tools.cyb.losses import slot_terms

LN2 = math.log(2.0)


@dataclass
class Scored:
    """Per target (flattened over windows): log p marginal, log p greedy-stop, greedy pauses, E_pi[k]."""

    log_p_marginal: np.ndarray
    log_p_greedy: np.ndarray
    pauses: np.ndarray
    expected_pauses: np.ndarray
    correct: np.ndarray  # argmax of the answer distribution at the stopping slot == target
    targets: np.ndarray
    dk_probs: np.ndarray  # (N, G)


def policy_of(loss: str) -> str:
    """ce answers at slot 0; ce-pause always takes all K pauses; the CYB losses stop adaptively."""
    return {"ce": "none", "ce-pause": "fixed"}.get(loss, "adaptive")


@torch.no_grad()
def score(model, windows: Windows, loss: str, *, threshold: float = 0.5, batch: int = 16, limit=None) -> Scored:
    model.eval()
    base = model.cfg.base_vocab
    n = windows.count if limit is None else min(limit, windows.count)
    parts: dict[str, list] = {k: [] for k in Scored.__dataclass_fields__}
    policy = policy_of(loss)
    for start in range(0, n, batch):
        x, y = windows.batch(np.arange(start, min(start + batch, n)))
        device = model.core.embed.weight.device
        xt, yt = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
        logits = model.group_logits(xt)
        terms = slot_terms(logits, yt, base)
        g = terms.slots
        if policy == "adaptive":
            marginal = terms.marginal_log_p()
            stop = terms.greedy_stop(threshold)
            expected = terms.expected_pauses()
        else:
            fixed = 0 if policy == "none" else g - 1
            marginal = terms.log_r_y[..., fixed]
            stop = torch.full_like(yt, fixed)
            expected = stop.float()
        greedy = terms.log_r_y.gather(-1, stop[..., None]).squeeze(-1)
        answer = logits[..., :base].float().gather(2, stop[..., None, None].expand(*stop.shape, 1, base))
        correct = answer.squeeze(2).argmax(-1) == yt
        dk = terms.log_d.exp() if policy == "adaptive" else torch.zeros_like(terms.log_d)
        for key, value in (
            ("log_p_marginal", marginal),
            ("log_p_greedy", greedy),
            ("pauses", stop),
            ("expected_pauses", expected),
            ("correct", correct),
            ("targets", yt),
            ("dk_probs", dk),
        ):
            parts[key].append(value.reshape(-1, *value.shape[2:]).cpu().numpy())
    return Scored(**{k: np.concatenate(v) for k, v in parts.items()})


def summary(scored: Scored, k_max: int) -> dict:
    """bits per token (bpc for bytes), perplexity, pauses and compute per token."""
    bpc_m = float(-scored.log_p_marginal.mean() / LN2)
    bpc_g = float(-scored.log_p_greedy.mean() / LN2)
    pauses = float(scored.pauses.mean())
    return {
        "tokens": int(len(scored.targets)),
        "bpc_marginal": bpc_m,
        "bpc_greedy": bpc_g,
        "ppl_marginal": float(2**bpc_m),
        "ppl_greedy": float(2**bpc_g),
        "mean_pauses": pauses,
        "expected_pauses": float(scored.expected_pauses.mean()),
        "compute_per_token": 1.0 + pauses,
        "accuracy": float(scored.correct.mean()),
        "max_pauses": k_max,
    }


def class_histogram(scored: Scored, classes: np.ndarray, names, k_max: int) -> dict:
    """Per target class: count, mean greedy pauses, mean E_pi[k], the greedy pause-count histogram, bpc."""
    out = {}
    for index, name in enumerate(names):
        sel = classes == index
        if not sel.any():
            continue
        counts = np.bincount(scored.pauses[sel], minlength=k_max + 1)
        out[name] = {
            "count": int(sel.sum()),
            "mean_pauses": float(scored.pauses[sel].mean()),
            "expected_pauses": float(scored.expected_pauses[sel].mean()),
            "pause_histogram": counts.tolist(),
            "bpc_marginal": float(-scored.log_p_marginal[sel].mean() / LN2),
        }
    return out


def target_classes(windows: Windows, n_targets: int, corpus: str) -> tuple[np.ndarray, tuple]:
    """The class of every scored target (targets are stream[1 : 1 + n_targets])."""
    stream = windows.stream[: n_targets + 1]
    if corpus.startswith("arith"):
        return arith_classes(stream, reverse=corpus.endswith("reversed"))[1:], ARITH_CLASSES
    return byte_classes(stream)[1:], BYTE_CLASSES


def arith_exact_match(scored: Scored, classes: np.ndarray, stream: np.ndarray) -> dict:
    """Share of problems whose every answer digit is the argmax at its stopping slot. Teacher-forced
    argmax over all answer digits equals greedy decoding's exact match (the policy is deterministic)."""
    answer = (classes == 2) | (classes == 3)
    targets = np.asarray(stream[1 : 1 + len(classes)])
    newline = targets == 10
    problem = np.cumsum(newline) - newline  # the problem index each target belongs to
    ok, seen = {}, set()
    for p, right in zip(problem[answer], scored.correct[answer]):
        seen.add(p)
        ok[p] = ok.get(p, True) and bool(right)
    # a problem cut by the window end is incomplete: keep only those followed by a newline
    complete = set(problem[newline])
    keep = [p for p in seen if p in complete]
    return {"problems": len(keep), "exact_match": float(np.mean([ok[p] for p in keep])) if keep else float("nan")}


def evaluate_checkpoint(
    path, token_file, split: str = "val", windows: int | None = None, threshold: float = 0.5
) -> dict:
    """One checkpoint on one split: the summary, per-class histograms and (arith) exact match."""
    from methodkit.tools.cyb.data import split_stream
    from methodkit.tools.cyb.training import check_tokenizer, load_model

    model, sidecar = load_model(path)
    check_tokenizer(sidecar, token_file, str(path))
    loss = sidecar["config"]["loss"]["loss"]
    stream = Windows(split_stream(token_file, split), model.cfg.ctx, what=f"{split} split")
    scored = score(model, stream, loss, threshold=threshold, limit=windows)
    record = {"checkpoint": str(path), "loss": loss, **summary(scored, model.cfg.max_pauses)}
    corpus = str(token_file.meta.get("corpus", ""))
    classes, names = target_classes(stream, len(scored.targets), corpus)
    record["classes"] = class_histogram(scored, classes, names, model.cfg.max_pauses)
    if corpus.startswith("arith"):
        record.update(arith_exact_match(scored, classes, stream.stream))
        answer = (classes == 2) | (classes == 3)
        operand = classes == 0
        record["answer_pauses"] = float(scored.pauses[answer].mean())
        record["operand_pauses"] = float(scored.pauses[operand].mean())
    return record
