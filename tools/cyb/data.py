"""Corpora for cyb-train: core.text's real corpora, a user's file, and the synthetic `arith` task;
token windows for training; token classes for the pause histograms."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.core.errors import DataError, UsageError
from methodkit.core.text.corpora import Corpus, load_corpus

SOURCES = {"enwiki": "enwiki-gensim", "lee": "lee-news", "fortunes": "fortunes"}


@dataclass(frozen=True)
class ArithSpec:
    digits: int = 4
    problems: int = 20000
    per_document: int = 50
    reverse: bool = False  # answer digits least significant first (then carries are causal)


def arith_problem(a: int, b: int, digits: int, reverse: bool) -> str:
    answer = str(a + b)
    if reverse:
        return f"{str(a).zfill(digits)[::-1]}+{str(b).zfill(digits)[::-1]}={answer[::-1]}\n"
    return f"{a:0{digits}d}+{b:0{digits}d}={answer}\n"


def arith_corpus(spec: ArithSpec, seed: int) -> Corpus:
    """`problems` additions of uniform `digits`-digit operands (zero padded), `per_document` per document."""
    if spec.digits < 1 or spec.problems < 1 or spec.per_document < 1:
        raise UsageError("--arith-digits, --arith-problems and --arith-per-doc must be >= 1")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 28]))
    high = 10**spec.digits
    pairs = rng.integers(0, high, size=(spec.problems, 2))
    lines = [arith_problem(int(a), int(b), spec.digits, spec.reverse) for a, b in pairs]
    texts = tuple("".join(lines[i : i + spec.per_document]) for i in range(0, len(lines), spec.per_document))
    order = "reversed" if spec.reverse else "normal"
    return Corpus(f"arith:{spec.digits}:{order}", tuple(f"arith#{i}" for i in range(len(texts))), texts)


def load_source(source: str, seed: int = 0, arith: ArithSpec | None = None) -> Corpus:
    if source == "arith":
        return arith_corpus(arith or ArithSpec(), seed)
    if source.startswith("text:"):
        return load_corpus(source)
    if source not in SOURCES:
        raise UsageError(f"--source must be one of {', '.join([*SOURCES, 'arith'])} or text:FILE, got {source!r}")
    return load_corpus(SOURCES[source])


def separator_id(token_file) -> int:
    """Between documents: a newline byte for byte ids, the BPE's end-of-text id (0) otherwise."""
    return 10 if token_file.meta["tokenizer"]["kind"] == "bytes" else 0


def split_stream(token_file, split: str) -> np.ndarray:
    return token_file.stream(split, separator=separator_id(token_file)).astype(np.int64)


class Windows:
    """Non-overlapping windows of ctx inputs and their ctx next-token targets from one stream."""

    def __init__(self, stream: np.ndarray, ctx: int, *, what: str = "training split"):
        self.stream, self.ctx = stream, ctx
        self.count = (len(stream) - 1) // ctx
        if self.count < 1:
            raise DataError(f"the {what} has {len(stream)} tokens, fewer than one window of --ctx {ctx} + 1")

    def batch(self, idx) -> tuple[np.ndarray, np.ndarray]:
        starts = np.asarray(idx, dtype=np.int64) * self.ctx
        rows = starts[:, None] + np.arange(self.ctx + 1)[None, :]
        chunk = self.stream[rows]
        return chunk[:, :-1], chunk[:, 1:]


# ---------------------------------------------------------------- token classes of the targets

BYTE_CLASSES = ("word-initial", "continuation", "space", "punctuation", "digit", "other")
ARITH_CLASSES = ("operand", "symbol", "answer", "answer-carry")


def byte_classes(stream: np.ndarray) -> np.ndarray:
    """Class index (BYTE_CLASSES) of every byte given the byte before it."""
    s = np.asarray(stream, dtype=np.int64)
    letter = ((s >= 65) & (s <= 90)) | ((s >= 97) & (s <= 122)) | (s >= 128)
    prev_letter = np.concatenate([[False], letter[:-1]])
    space = np.isin(s, [9, 10, 13, 32])
    digit = (s >= 48) & (s <= 57)
    punct = ~letter & ~space & ~digit & (s >= 33) & (s < 127)
    out = np.full(len(s), 5, dtype=np.int64)
    out[punct], out[digit], out[space] = 3, 4, 2
    out[letter & ~prev_letter], out[letter & prev_letter] = 0, 1
    return out


def arith_classes(stream: np.ndarray, reverse: bool = False) -> np.ndarray:
    """Class index (ARITH_CLASSES) of every byte of an arith stream: operand digits, symbols (+ = newline),
    answer digits, and answer digits whose column receives a carry (the leading 1 of a longer sum too)."""
    text = bytes(np.asarray(stream, dtype=np.uint8)).decode("ascii", errors="replace")
    out = np.ones(len(text), dtype=np.int64)
    pos = 0
    for line in text.split("\n"):
        if "+" in line and "=" in line:
            left, answer = line.split("=", 1)
            a, _, b = left.partition("+")
            start = pos + len(left) + 1
            for i, ch in enumerate(line):
                if ch.isdigit():
                    out[pos + i] = 0 if pos + i < start else 2
            if a.isdigit() and b.isdigit() and answer.isdigit():
                da, db = (a[::-1], b[::-1]) if not reverse else (a, b)
                carry, carries = 0, []
                for j in range(len(answer)):
                    carries.append(carry)
                    x = (int(da[j]) if j < len(da) else 0) + (int(db[j]) if j < len(db) else 0) + carry
                    carry = x // 10
                for j, c in enumerate(carries):  # j counts from the least significant digit
                    where = start + (j if reverse else len(answer) - 1 - j)
                    if c and where < len(out):
                        out[where] = 3
        pos += len(line) + 1
    return out
