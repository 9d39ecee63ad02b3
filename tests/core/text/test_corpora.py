"""core.text.corpora: the shipped corpora, the registry entries, and text:FILE."""

from __future__ import annotations

import io
import re

import pandas as pd
import pytest

from methodkit.core import datasets
from methodkit.core.errors import DataError, MissingExtraError
from methodkit.core.text import corpora


def test_registered_with_source_and_licence():
    for name in ("enwiki-gensim", "lee-news", "fortunes"):
        entry = datasets.info(name)
        assert entry.source and entry.licence and entry.description
    assert "gensim" in datasets.info("lee-news").source
    assert "fortunes" in datasets.info("fortunes").source


def test_lee_news_real_files():
    corpus = corpora.lee_news()
    assert len(corpus) == 350
    assert corpus.titles[0] == "background#0" and corpus.titles[300] == "test#0"
    assert corpus.texts[0].startswith("Hundreds of people have been forced to vacate their homes")
    assert any("£3,000" in text for text in corpus.texts)  # the one Latin-1 byte of lee.cor, decoded
    assert all("\n" not in text and text == text.strip() for text in corpus.texts)


@pytest.mark.skipif(not corpora.FORTUNES_DIR.is_dir(), reason="Debian fortunes not installed (make install)")
def test_fortunes_real_files():
    corpus = corpora.fortunes()
    assert len(corpus) > 1000
    assert all(text and text == text.rstrip() and "\n%\n" not in f"\n{text}\n" for text in corpus.texts)
    assert any(title.startswith("fortunes#") for title in corpus.titles)


def test_fortunes_parser(tmp_path, monkeypatch):
    (tmp_path / "jokes").write_text("first\nline two\n%\nsecond\n%\n\n%\nthird\n")
    (tmp_path / "jokes.dat").write_bytes(b"\x00\x00index")
    (tmp_path / "jokes.u8").symlink_to(tmp_path / "jokes")
    monkeypatch.setattr(corpora, "FORTUNES_DIR", tmp_path)
    corpora.fortunes.cache_clear()
    try:
        corpus = corpora.fortunes()
    finally:
        corpora.fortunes.cache_clear()
    assert corpus.texts == ("first\nline two", "second", "third")
    assert corpus.titles == ("jokes#0", "jokes#1", "jokes#2")


def test_missing_gensim_names_the_extra(monkeypatch):
    monkeypatch.setattr(corpora.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(DataError, match=r"pip install 'methodkit\[text\]'"):
        corpora._gensim_test_data("lee-news")


def test_missing_tokenizers_names_the_extra(monkeypatch):
    import sys

    from methodkit.core.text.tokenize import BPETokenizer

    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import tokenizers -> ImportError
    with pytest.raises(MissingExtraError, match=r"pip install 'methodkit\[text\]'"):
        BPETokenizer.train(["a b c"], 300)


def test_text_file_documents(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("\ufeffOne doc,\nstill one.\n\n\n  Second doc.\r\n\nThird.\n")
    corpus = corpora.load_corpus(f"text:{path}")
    assert corpus.texts == ("One doc,\nstill one.", "Second doc.", "Third.")
    lines = tmp_path / "lines.txt"
    lines.write_text("a b\nc d\n\ne\n".replace("\n\n", "\n"))  # no blank line: one document per line
    assert corpora.load_corpus(f"text:{lines}").texts == ("a b", "c d", "e")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        (b"\x7fELF\x02\x01\x00\x00", "a binary file (NUL byte at offset 6), not UTF-8 text"),
        (b"caf\xe9 latin-1", "not UTF-8 text (invalid byte at offset 3)"),
        (b"\n \n\t\n", "the file holds no text"),
    ],
)
def test_text_file_errors(tmp_path, content, message):
    path = tmp_path / "c.txt"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(DataError, match=re.escape(message)):
        corpora.load_corpus(f"text:{path}")


def test_unknown_corpus():
    with pytest.raises(DataError, match=r"unknown corpus 'nope' \(known: enwiki-gensim, fortunes, lee-news"):
        corpora.load_corpus("nope")


def test_cli_text_file(run_cli, tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("alpha beta\n\ngamma\n")
    proc = run_cli(["methodkit-data", "get", f"text:{path}"])
    assert proc.returncode == 0, proc.stderr
    frame = pd.read_csv(io.BytesIO(proc.stdout))
    assert frame.to_dict("list") == {"title": ["mine.txt#0", "mine.txt#1"], "text": ["alpha beta", "gamma"]}


def test_cli_text_file_errors(run_cli, tmp_path, one_line_error):
    missing = tmp_path / "none.txt"
    out = tmp_path / "out.csv"
    out.write_text("keep")
    proc = run_cli(["methodkit-data", "get", f"text:{missing}", "-o", out, "--force"])
    one_line_error(proc, "methodkit-data", f"text:{missing}: no such file")
    binary = tmp_path / "b.bin"
    binary.write_bytes(bytes(range(256)))
    proc = run_cli(["methodkit-data", "get", f"text:{binary}", "-o", out, "--force"])
    one_line_error(proc, "methodkit-data", f"text:{binary}: a binary file (NUL byte at offset 0)")
    assert out.read_text() == "keep"


def test_cli_get_lee_news(run_cli):
    proc = run_cli(["methodkit-data", "get", "lee-news"])
    assert proc.returncode == 0, proc.stderr
    frame = pd.read_csv(io.BytesIO(proc.stdout))
    assert list(frame.columns) == ["title", "text"] and len(frame) == 350
