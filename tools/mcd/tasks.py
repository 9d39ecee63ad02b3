"""Task text: instruction-following proxies over real enwiki words, a math suite, and their metrics.

A task is one line "Q: <instruction>\\nA: <answer>\\n"; the model is scored on generating the answer
after "A: ". The three held-out instruction suites stand in for the paper's three benchmarks:
`seen` (training templates, words never used in training), `compose` (two templates chained, never
seen as a pair), `long` (the training templates on longer inputs).
"""

from __future__ import annotations

import re

import numpy as np

TEMPLATES = ("reverse", "upper", "first", "last", "count", "copy", "sort")


def _apply(name: str, words: list[str], n: int = 2) -> tuple[str, str]:
    text = " ".join(words)
    if name == "reverse":
        return f"reverse: {text}", text[::-1]
    if name == "upper":
        return f"upper: {text}", text.upper()
    if name == "first":
        return f"first word of: {text}", words[0]
    if name == "last":
        return f"last word of: {text}", words[-1]
    if name == "count":
        return f"count a in: {text}", str(text.count("a"))
    if name == "copy":
        return f"copy {n} times: {text}", " ".join([text] * n)
    if name == "sort":
        return f"sort letters: {words[0]}", "".join(sorted(words[0]))
    raise ValueError(f"unknown template {name!r}")


def _answer(name: str, text: str, n: int = 2) -> str:
    return _apply(name, text.split(" "), n)[1]


def word_pools(texts: list[str], seed: int) -> tuple[list[str], list[str]]:
    """(train words, held-out words): lower-case alphabetic words of 3-7 letters, split 80/20, seeded."""
    words = sorted({w for t in texts for w in re.findall(r"\b[a-z]{3,7}\b", t)})
    order = np.random.default_rng(seed).permutation(len(words))
    cut = int(0.8 * len(words))
    return [words[i] for i in order[:cut]], [words[i] for i in order[cut:]]


def instruction(rng: np.random.Generator, words: list[str], suite: str = "train") -> tuple[str, str]:
    """One (prompt, answer): prompt ends with 'A: ' and the answer ends at the newline."""
    n_words = int(rng.integers(4, 7)) if suite == "long" else int(rng.integers(1, 4))
    picked = [words[int(i)] for i in rng.integers(0, len(words), n_words)]
    if suite == "compose":
        first, second = rng.choice(["reverse", "upper", "first", "last"], 2, replace=False)
        q1, a1 = _apply(str(first), picked)
        q = f"{second} of {first}: {' '.join(picked)}"
        a = _answer(str(second), a1)
        return f"Q: {q}\nA: ", a
    name = str(rng.choice(TEMPLATES))
    q, a = _apply(name, picked, int(rng.integers(2, 4)))
    return f"Q: {q}\nA: ", a


def math_problem(rng: np.random.Generator) -> tuple[str, str]:
    """2-4 digit addition/subtraction, or a two-step expression."""
    digits = int(rng.integers(2, 5))
    a, b = (int(x) for x in rng.integers(10 ** (digits - 1), 10**digits, 2))
    if rng.random() < 0.3:
        c = int(rng.integers(1, 100))
        op1, op2 = rng.choice(["+", "-"], 2)
        expr = f"{a} {op1} {b} {op2} {c}"
    else:
        expr = f"{a} {rng.choice(['+', '-'])} {b}"
    return f"Q: {expr} =\nA: ", str(eval(expr))  # noqa: S307 - the expression is built from digits and +/-


def make_suite(kind: str, n: int, words: list[str], seed: int) -> list[dict]:
    rng = np.random.default_rng(np.random.SeedSequence([seed, hash_name(kind)]))
    out = []
    for _ in range(n):
        prompt, answer = math_problem(rng) if kind == "math" else instruction(rng, words, kind)
        out.append({"suite": kind, "prompt": prompt, "answer": answer})
    return out


def hash_name(name: str) -> int:
    return sum((i + 1) * ord(c) for i, c in enumerate(name))


def training_text(n: int, words: list[str], math_share: float, seed: int) -> list[str]:
    """n task documents (instruction or math lines) for pretraining or distillation."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 7]))
    docs = []
    for _ in range(n):
        prompt, answer = math_problem(rng) if rng.random() < math_share else instruction(rng, words, "train")
        docs.append(f"{prompt}{answer}\n")
    return docs


def lcs(a: str, b: str) -> int:
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b):
            cur.append(prev[j] + 1 if ca == cb else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F1 over whitespace tokens (Lin 2004, beta = 1), in [0, 1]."""
    p, r = prediction.split(), reference.split()
    if not p or not r:
        return float(p == r)
    common = lcs(p, r)
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(r)
    return 2 * precision * recall / (precision + recall)
