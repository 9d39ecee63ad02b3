"""Real text corpora that ship inside installed packages, as lists of documents.

- enwiki-gensim: the shortened English Wikipedia dump in gensim's test data (206 pages; the
  106 main-namespace articles that are not redirects), cleaned of markup by `wiki.clean_wikitext`.
- lee-news: the Lee, Pincombe & Welsh (2005) news corpus in gensim's test data: 300 background
  documents (lee_background.cor) and 50 test documents (lee.cor), one document per line.
- fortunes: Debian's fortune cookie files (packages fortunes, fortunes-min) in
  /usr/share/games/fortunes; one fortune (between `%` lines) is one document.
- text:FILE: a user's UTF-8 text file; documents are separated by blank lines, and a file without
  blank lines holds one document per line.

The gensim files are read straight from its wheel without importing gensim. Nothing is downloaded;
a missing package is a DataError (exit 2) whose message is the install command.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

from methodkit.core.errors import DataError

FORTUNES_DIR = Path(os.environ.get("METHODKIT_FORTUNES_DIR", "/usr/share/games/fortunes"))
_ENWIKI_FILE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


@dataclass(frozen=True)
class Corpus:
    name: str
    titles: tuple[str, ...]  # one per document: the article title, or file#index
    texts: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def n_bytes(self) -> int:
        return sum(len(text.encode("utf-8")) for text in self.texts)

    def to_frame(self):
        import pandas as pd

        return pd.DataFrame({"title": list(self.titles), "text": list(self.texts)})


@dataclass(frozen=True)
class CorpusInfo:
    loader: object  # () -> Corpus
    source: str
    licence: str
    description: str


def _gensim_test_data(corpus: str) -> Path:
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise DataError(f"{corpus} needs the package gensim; install it with: pip install 'methodkit[text]'")
    return Path(next(iter(spec.submodule_search_locations))) / "test" / "test_data"


def _decode_line(raw: bytes) -> str:
    """UTF-8, or Windows-1252 for a line that is not (lee.cor has one pound sign in Latin-1)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp1252", errors="replace")


@functools.cache
def enwiki_gensim() -> Corpus:
    from methodkit.core.text.wiki import clean_wikitext, iter_articles

    path = _gensim_test_data("enwiki-gensim") / _ENWIKI_FILE
    titles, texts = [], []
    for title, wikitext in iter_articles(path):
        text = clean_wikitext(wikitext)
        if text:
            titles.append(title)
            texts.append(text)
    return Corpus("enwiki-gensim", tuple(titles), tuple(texts))


@functools.cache
def lee_news() -> Corpus:
    folder = _gensim_test_data("lee-news")
    titles, texts = [], []
    for part, filename in (("background", "lee_background.cor"), ("test", "lee.cor")):
        lines = [_decode_line(raw).strip() for raw in (folder / filename).read_bytes().split(b"\n")]
        for index, line in enumerate(line for line in lines if line):
            titles.append(f"{part}#{index}")
            texts.append(line)
    return Corpus("lee-news", tuple(titles), tuple(texts))


_FORTUNE_SEPARATOR = re.compile(r"^%[ \t]*$", re.MULTILINE)


@functools.cache
def fortunes() -> Corpus:
    if not FORTUNES_DIR.is_dir():
        raise DataError(f"fortunes not found in {FORTUNES_DIR}; install them with: apt-get install fortunes")
    titles, texts = [], []
    # The cookie files are the plain files; *.dat are strfile indexes, *.u8 symlinks to the same files.
    files = sorted(p for p in FORTUNES_DIR.iterdir() if p.is_file() and not p.is_symlink() and not p.suffix)
    for path in files:
        pieces = _FORTUNE_SEPARATOR.split(path.read_bytes().decode("utf-8", errors="replace"))
        for index, piece in enumerate(piece.strip("\n") for piece in pieces if piece.strip()):
            titles.append(f"{path.name}#{index}")
            texts.append(piece.rstrip())
    if not texts:
        raise DataError(f"no fortune files in {FORTUNES_DIR}; install them with: apt-get install fortunes")
    return Corpus("fortunes", tuple(titles), tuple(texts))


_BLANK_LINES = re.compile(r"\n[ \t]*\n\s*")


def text_file(path: str | os.PathLike) -> Corpus:
    """A user's corpus: a UTF-8 text file, documents separated by blank lines (else one per line)."""
    path = Path(path)
    if not path.exists():
        raise DataError(f"text:{path}: no such file")
    if not path.is_file():
        raise DataError(f"text:{path}: not a regular file")
    raw = path.read_bytes()
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise DataError(f"text:{path}: a binary file (NUL byte at offset {nul}), not UTF-8 text")
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff").replace("\r\n", "\n")
    except UnicodeDecodeError as exc:
        raise DataError(f"text:{path}: not UTF-8 text (invalid byte at offset {exc.start})") from None
    body = text.strip()
    pieces = _BLANK_LINES.split(body) if _BLANK_LINES.search(body) else body.split("\n")
    texts = [piece.strip() for piece in pieces if piece.strip()]
    if not texts:
        raise DataError(f"text:{path}: the file holds no text")
    return Corpus(f"text:{path}", tuple(f"{path.name}#{i}" for i in range(len(texts))), tuple(texts))


CORPORA: dict[str, CorpusInfo] = {
    "enwiki-gensim": CorpusInfo(
        enwiki_gensim,
        "gensim (test data)",
        "CC BY-SA 3.0 and GFDL (Wikipedia text); gensim LGPL-2.1",
        "English Wikipedia sample: 106 articles from gensim's shortened dump, markup stripped; title, text",
    ),
    "lee-news": CorpusInfo(
        lee_news,
        "gensim (test data)",
        "LGPL-2.1 (gensim); news texts from Lee, Pincombe & Welsh 2005",
        "Lee news corpus: 300 background + 50 test Australian news documents, one per row; title, text",
    ),
    "fortunes": CorpusInfo(
        fortunes,
        "Debian fortunes, fortunes-min",
        "BSD-3-Clause (fortune-mod; per-file notes in Debian's copyright file)",
        "fortune(6) cookies: one quotation or joke per row, title = file#index; text",
    ),
}
SCHEME = "text:"  # prefix of a user's file in a corpus name


def load_corpus(name: str) -> Corpus:
    """A corpus by registered name or as `text:FILE`."""
    if name.startswith(SCHEME):
        return text_file(name[len(SCHEME) :])
    if name not in CORPORA:
        raise DataError(f"unknown corpus '{name}' (known: {', '.join(sorted(CORPORA))}, or text:FILE)")
    return CORPORA[name].loader()


def _frame_loader(name: str):
    return lambda: CORPORA[name].loader().to_frame()


def _register_tables() -> None:
    from methodkit.core.datasets import Dataset, register, register_scheme

    for name, entry in CORPORA.items():
        register(Dataset(name, _frame_loader(name), entry.source, entry.licence, entry.description))
    register_scheme(SCHEME.rstrip(":"), lambda path: text_file(path).to_frame())
