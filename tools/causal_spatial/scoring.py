"""Reading answers and scoring predictions: per task x level, micro and task-macro, CIs, McNemar.

Answer parsing, in order: the `Answer` field of the JSON template the prompt asks for (quotes of
either kind), its letter (or an option's text); then `(?i)(?:correct\\s+)?answer\\s+is\\s+\\**\\(?([A-J])\\)?\\**`;
otherwise a parse error, counted wrong and never dropped from the denominator.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from methodkit.core.errors import DataError

ANSWER_FIELD = re.compile(r"""["']Answer["']\s*:\s*["']([^"']*)["']""")
LETTER = re.compile(r"^\s*\(?\s*([A-J])\s*\)?(?=$|[\s.:,)])")
FALLBACK = re.compile(r"(?i)(?:correct\s+)?answer\s+is\s+\**\(?([A-J])\)?\**")


def parse_answer(text: str | None, options: list[str] | None = None) -> str | None:
    """The letter a model answered, or None (a parse error)."""
    if not text:
        return None
    m = ANSWER_FIELD.search(text)
    if m:
        value = m.group(1).strip()
        lm = LETTER.match(value)
        if lm:
            return lm.group(1)
        for i, option in enumerate(options or []):
            if value.lower().strip(" .") == option.lower():
                return "ABCDEFGHIJ"[i]
    m = FALLBACK.search(text)
    return m.group(1).upper() if m else None


def _bootstrap(correct: np.ndarray, seed: int, n: int = 2000) -> list[float]:
    if len(correct) == 0:
        return [float("nan"), float("nan")]
    rng = np.random.default_rng(seed)
    means = correct[rng.integers(0, len(correct), size=(n, len(correct)))].mean(axis=1)
    return [float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))]


def graded(preds: list[dict]) -> list[dict]:
    out = []
    for i, p in enumerate(preds, start=1):
        for key in ("id", "answer"):
            if key not in p:
                raise DataError(f"predictions line {i}: missing key '{key}'")
        letter = None if p.get("error") else parse_answer(p.get("text"), p.get("options"))
        out.append({**p, "pred": letter, "parse_error": letter is None and not p.get("error"),
                    "correct": letter == p["answer"], "said_not_sure": letter is not None and letter == p.get("not_sure")})  # fmt: skip
    return out


def score(preds: list[dict], *, seed: int = 0) -> dict:
    rows = graded(preds)
    if not rows:
        raise DataError("no predictions to score")
    cells: dict = defaultdict(list)
    tasks: dict = defaultdict(list)
    for r in rows:
        task = r.get("task") or r["id"].split("_Level_")[0].lower()
        level = r.get("level") or (int(r["id"].split("_Level_")[1].split("_")[0]) if "_Level_" in r["id"] else 0)
        cells[f"{task}/L{level}"].append(r["correct"])
        tasks[task].append(r["correct"])
    correct = np.array([r["correct"] for r in rows], dtype=float)
    return {
        "n": len(rows),
        "accuracy": float(correct.mean()),
        "accuracy_ci95": _bootstrap(correct, seed),
        "task_macro": float(np.mean([np.mean(v) for v in tasks.values()])),
        "per_task": {t: float(np.mean(v)) for t, v in sorted(tasks.items())},
        "per_task_level": {k: {"accuracy": float(np.mean(v)), "n": len(v)} for k, v in sorted(cells.items())},
        "not_sure_rate": float(np.mean([r["said_not_sure"] for r in rows])),
        "parse_error_rate": float(np.mean([r["parse_error"] for r in rows])),
        "n_errors": int(sum(bool(r.get("error")) for r in rows)),
        "error_rate": float(np.mean([bool(r.get("error")) for r in rows])),
    }


def paired(a: list[dict], b: list[dict]) -> dict:
    """McNemar on the items both files answered (statsmodels; exact binomial when discordant < 25)."""
    from statsmodels.stats.contingency_tables import mcnemar

    ga = {r["id"]: r["correct"] for r in graded(a)}
    gb = {r["id"]: r["correct"] for r in graded(b)}
    common = sorted(set(ga) & set(gb))
    if not common:
        raise DataError("--paired: the two files share no item ids")
    table = np.zeros((2, 2), dtype=int)
    for i in common:
        table[int(ga[i]), int(gb[i])] += 1
    discordant = table[0, 1] + table[1, 0]
    res = mcnemar(table, exact=discordant < 25, correction=True)
    return {"n": len(common), "accuracy_a": float(np.mean([ga[i] for i in common])),
            "accuracy_b": float(np.mean([gb[i] for i in common])), "b_right_a_wrong": int(table[0, 1]),
            "a_right_b_wrong": int(table[1, 0]), "mcnemar_statistic": float(res.statistic), "p_value": float(res.pvalue)}  # fmt: skip


def markdown(result: dict) -> str:
    lines = ["| cell | accuracy | n |", "| --- | --- | --- |"]
    for k, v in result["per_task_level"].items():
        lines.append(f"| {k} | {v['accuracy']:.3f} | {v['n']} |")
    lo, hi = result["accuracy_ci95"]
    lines.append(f"| overall (micro) | {result['accuracy']:.3f} [{lo:.3f}, {hi:.3f}] | {result['n']} |")
    lines.append(f"| task macro | {result['task_macro']:.3f} | |")
    lines.append(f"| not sure / parse errors | {result['not_sure_rate']:.3f} / {result['parse_error_rate']:.3f} | |")
    return "\n".join(lines) + "\n"
