"""core.text.tokens: the split by document (no leakage, seeded) and NPZ token files."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.errors import DataError
from methodkit.core.text.corpora import Corpus, lee_news
from methodkit.core.text.tokenize import ByteTokenizer
from methodkit.core.text.tokens import TokenFile, build, encode_corpus, split_documents


def _docs(n, duplicates=0):
    texts = [f"document number {i} says {i * 7 % 13}" for i in range(n)]
    return texts + [texts[i % n] + "  " for i in range(duplicates)]  # the same text, other whitespace


def test_split_has_no_leakage():
    texts = _docs(200, duplicates=150)
    split = split_documents(texts, val=0.2, test=0.1, seed=3)
    by_text = {}
    for text, code in zip(texts, split):
        by_text.setdefault(text.strip(), set()).add(int(code))
    assert all(len(codes) == 1 for codes in by_text.values())  # every copy of a text in one split
    counts = np.bincount([next(iter(c)) for c in by_text.values()], minlength=3)
    assert counts.tolist() == [140, 40, 20]  # fractions of the 200 distinct texts


def test_split_is_seeded_and_order_free():
    texts = _docs(100)
    a = split_documents(texts, val=0.1, seed=0)
    assert np.array_equal(a, split_documents(texts, val=0.1, seed=0))
    assert not np.array_equal(a, split_documents(texts, val=0.1, seed=1))
    order = np.random.default_rng(5).permutation(100)
    shuffled = split_documents([texts[i] for i in order], val=0.1, seed=0)
    assert np.array_equal(shuffled, a[order])  # a text's split does not depend on where it sits


def test_split_errors():
    with pytest.raises(DataError, match="together below 1"):
        split_documents(_docs(10), val=0.6, test=0.5)
    with pytest.raises(DataError, match="one left to train on"):
        split_documents(["same", "same ", "same"], val=0.1, seed=0)


def test_token_file_round_trip(tmp_path):
    texts = ["héllo", "", "world 🙂", "again"]
    split = np.array([0, 0, 1, 2], dtype=np.uint8)
    tokens = encode_corpus(texts, ByteTokenizer(), split, meta={"corpus": "t"})
    assert tokens.offsets.tolist() == [0, 6, 6, 16, 21]
    assert [ByteTokenizer().decode(tokens.document(i)) for i in range(4)] == texts
    assert tokens.stream("train", separator=10).tolist() == list(b"h\xc3\xa9llo\n")
    assert tokens.n_tokens("val") == 10 and tokens.n_tokens() == 21
    path = tmp_path / "tokens.npz"
    tokens.save(path)
    back = TokenFile.load(path)
    assert back.ids.dtype == np.uint8
    assert np.array_equal(back.ids, tokens.ids) and np.array_equal(back.offsets, tokens.offsets)
    assert np.array_equal(back.split, split) and back.meta == tokens.meta
    assert back.meta["tokenizer"] == ByteTokenizer().spec() and back.fingerprint == tokens.fingerprint
    other_tokenizer = {**tokens.meta, "tokenizer": {**tokens.meta["tokenizer"], "sha256": "f" * 64}}
    assert TokenFile(tokens.ids, tokens.offsets, tokens.split, other_tokenizer).fingerprint != tokens.fingerprint
    np.savez(tmp_path / "other.npz", ids=tokens.ids)
    with pytest.raises(DataError, match="not a token file"):
        TokenFile.load(tmp_path / "other.npz")


def test_build_trains_bpe_on_train_split_only():
    rare = "zyzzyva quetzalcoatl " * 40
    corpus = Corpus("t", tuple(f"d{i}" for i in range(41)), (*lee_news().texts[:40], rare))
    for seed in range(20):  # a seed that holds the rare document out
        split = split_documents(corpus.texts, val=0.1, seed=seed)
        if split[-1] == 1:
            break
    tokens, tok = build(corpus, "bpe:400", val=0.1, seed=seed)
    assert np.array_equal(tokens.split, split) and tokens.meta["tokenizer"] == tok.spec()
    assert len(tok.encode("zyzzyva")) >= 5  # never merged: the held-out document did not train it
    assert tok.decode(tokens.document(40)) == rare
    assert tokens.fingerprint != build(corpus, "bytes", val=0.1, seed=seed)[0].fingerprint
