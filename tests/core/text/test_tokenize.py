"""core.text.tokenize: byte and BPE round trips, the BPE's hash."""

from __future__ import annotations

import numpy as np
import pytest

from methodkit.core.errors import DataError
from methodkit.core.text.corpora import lee_news
from methodkit.core.text.tokenize import BPETokenizer, ByteTokenizer, make_tokenizer

ODD = "Héllo  wörld\n\n\ttabs   🙂 ∑x² — «quotes» <|endoftext|>\r\n trailing "


@pytest.fixture(scope="module")
def lee_texts():
    return lee_news().texts[:120]


@pytest.fixture(scope="module")
def bpe(lee_texts):
    return BPETokenizer.train(lee_texts, 600)


def test_bytes_are_utf8():
    tok = ByteTokenizer()
    ids = tok.encode("aé🙂")
    assert ids.dtype == np.uint8 and ids.tolist() == list("aé🙂".encode())
    assert tok.decode(ids) == "aé🙂"
    assert tok.decode(tok.encode(ODD)) == ODD
    assert tok.decode(np.array([0xC3], dtype=np.uint8)) == "\ufffd"  # a cut multi-byte char


def test_bpe_round_trip(bpe, lee_texts):
    assert bpe.vocab_size == 600 and bpe.dtype == np.uint16 and bpe.end_of_text == 0
    for text in [ODD, *lee_texts[:20], *lee_news().texts[300:310]]:
        assert bpe.decode(bpe.encode(text)) == text
    n_tokens = sum(len(bpe.encode(t)) for t in lee_texts)
    n_bytes = sum(len(t.encode()) for t in lee_texts)
    assert n_tokens < 0.5 * n_bytes  # merges were learnt: well under one token per byte


def test_bpe_hash_is_stable(bpe, lee_texts, tmp_path):
    again = BPETokenizer.train(lee_texts, 600)
    assert again.sha256 == bpe.sha256 and again.to_json() == bpe.to_json()  # training is deterministic
    assert BPETokenizer.train(lee_texts, 700).sha256 != bpe.sha256
    assert BPETokenizer.train(lee_texts[1:], 600).sha256 != bpe.sha256
    path = tmp_path / "tok.json"
    bpe.save(path)
    loaded = BPETokenizer.load(path, expected_sha256=bpe.sha256)
    assert loaded.sha256 == bpe.sha256 and loaded.spec() == bpe.spec()
    assert loaded.encode(ODD).tolist() == bpe.encode(ODD).tolist()
    with pytest.raises(DataError, match="does not match the checkpoint's"):
        BPETokenizer.load(path, expected_sha256="0" * 64)


def test_bpe_errors(tmp_path, lee_texts):
    with pytest.raises(DataError, match="below 257"):
        BPETokenizer.train(lee_texts, 100)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match="not a tokenizers JSON file"):
        BPETokenizer.load(bad)
    with pytest.raises(DataError, match="no such tokenizer file"):
        make_tokenizer(str(tmp_path / "none.json"))
    with pytest.raises(DataError, match="not an integer"):
        make_tokenizer("bpe:many")
    assert make_tokenizer("bytes").spec()["kind"] == "bytes"
