"""Answer parsing and the scores, by hand-computed cases and statsmodels."""

from __future__ import annotations

import numpy as np

from methodkit.tools.causal_spatial import scoring


def test_parse_answer_order():
    opts = ["Yes", "No", "Not sure"]
    assert scoring.parse_answer("{'Reasoning': 'x', 'Answer': '(B)'}", opts) == "B"
    assert scoring.parse_answer('{"Reasoning": "x", "Answer": "A. Yes"}', opts) == "A"
    assert scoring.parse_answer("{'Answer': 'Not sure'}", opts) == "C"
    assert scoring.parse_answer("Long chain of thought... so the correct answer is **(C)**", opts) == "C"
    assert scoring.parse_answer("I think it will hit.", opts) is None
    assert scoring.parse_answer("{'Answer': 'Abstain'}", opts) is None  # not a letter, not an option


def _pred(i, task, level, answer, said, not_sure="C"):
    text = f"{{'Answer': '({said})'}}" if said else "no idea"
    return {"id": f"{task.capitalize()}_Level_{level}_{i}", "task": task, "level": level, "answer": answer,
            "not_sure": not_sure, "options": ["Yes", "No", "Not sure"], "text": text}  # fmt: skip


def test_score_counts_parse_errors_and_not_sure_as_wrong():
    preds = [_pred(0, "collision", 1, "A", "A"), _pred(1, "collision", 1, "B", "C"), _pred(2, "collision", 2, "A", None),
             _pred(0, "occlusion", 1, "A", "A")]  # fmt: skip
    r = scoring.score(preds)
    assert r["n"] == 4 and r["accuracy"] == 0.5
    assert r["per_task"] == {"collision": 1 / 3, "occlusion": 1.0}
    assert r["task_macro"] == (1 / 3 + 1) / 2
    assert r["not_sure_rate"] == 0.25 and r["parse_error_rate"] == 0.25
    assert r["per_task_level"]["collision/L2"] == {"accuracy": 0.0, "n": 1}


def test_paired_mcnemar_matches_statsmodels():
    from statsmodels.stats.contingency_tables import mcnemar

    rng = np.random.default_rng(0)
    a, b = [], []
    for i in range(80):
        ca, cb = rng.random() < 0.5, rng.random() < 0.85
        a.append(_pred(i, "collision", 1, "A", "A" if ca else "B"))
        b.append(_pred(i, "collision", 1, "A", "A" if cb else "B"))
    r = scoring.paired(a, b)
    table = np.zeros((2, 2))
    for pa, pb in zip(a, b):
        table[int("(A)" in pa["text"]), int("(A)" in pb["text"])] += 1
    expect = mcnemar(table, exact=table[0, 1] + table[1, 0] < 25, correction=True).pvalue
    assert abs(r["p_value"] - expect) < 1e-12
    assert r["b_right_a_wrong"] == table[0, 1]
