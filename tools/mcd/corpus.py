"""Token files for MCD: enwiki text (core.text), task lines over enwiki words, byte tokens."""

from __future__ import annotations

from dataclasses import dataclass

from methodkit.tools.mcd import tasks

SHARES = {"mix": 0.1, "instr": 0.01, "math": 1.0, "enwiki": 0.0}
LINES_PER_DOC = 20  # task lines are grouped into documents so the split is by document


@dataclass
class Built:
    tokens: object  # core.text.tokens.TokenFile
    suites: list
    summary: dict


def build(task: str, n_tasks: int, math_share: float | None, eval_n: int, val: float, seed: int) -> Built:
    from methodkit.core.text.corpora import load_corpus
    from methodkit.core.text.tokenize import ByteTokenizer
    from methodkit.core.text.tokens import encode_corpus, split_documents

    wiki = load_corpus("enwiki-gensim")
    train_words, held_words = tasks.word_pools(wiki.texts, seed)
    docs: list[str] = []
    if task in ("mix", "enwiki"):
        docs += list(wiki.texts)
    if task != "enwiki":
        share = SHARES[task] if math_share is None else math_share
        lines = tasks.training_text(n_tasks, train_words, share, seed)
        docs += ["".join(lines[i : i + LINES_PER_DOC]) for i in range(0, len(lines), LINES_PER_DOC)]
    split = split_documents(docs, val=val, seed=seed)
    tok = encode_corpus(docs, ByteTokenizer(), split, meta={"corpus": f"mcd-{task}", "seed": seed, "val": val})
    suites = []
    for kind in ("seen", "compose", "long"):
        suites += tasks.make_suite(kind, eval_n, held_words, seed)
    suites += tasks.make_suite("math", eval_n, held_words, seed)
    summary = {"task": task, "documents": tok.n_documents, "tokens": tok.n_tokens(), "train_tokens": tok.n_tokens("train"),
               "val_tokens": tok.n_tokens("val"), "train_words": len(train_words), "heldout_words": len(held_words),
               "suite_prompts": len(suites)}  # fmt: skip
    return Built(tok, suites, summary)
