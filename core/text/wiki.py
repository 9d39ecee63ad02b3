"""MediaWiki markup to plain text, and the articles of a MediaWiki XML dump.

`clean_wikitext` makes one left-to-right scan with a stack of open constructs, so nested
templates, links inside templates and templates inside links are handled in the same pass:

- templates `{{...}}` (nested to any depth) and tables `{| ... |}` are dropped whole;
- `[[target]]` keeps the target, `[[target|label]]` the label; links into the File, Image,
  Media and Category namespaces and bare interlanguage links (`[[de:...]]`) are dropped;
- external links `[http://... label]` keep the label (none: dropped);
- references `<ref>...</ref>`, `<ref/>`, comments and the contents of math, gallery, timeline and
  code tags are dropped; other HTML tags are removed and their contents kept (`<br>` is a space); `<nowiki>` text is literal;
- bold/italic quotes, heading `=` signs, list markers, rules and `__MAGIC__` words are removed;
- the article stops at a trailing section such as References, External links or See also.

Then HTML entities are decoded (last, so an `&lt;` never opens a tag) and whitespace is tidied.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path

_DROPPED_TAGS = (
    "ref|math|gallery|timeline|imagemap|score|syntaxhighlight|source|hiero|chem|ce|graph|templatedata|mapframe"
)
_TOKEN = re.compile(
    r"(?=[<{}\[\]'=*#:;\-_|])"  # every token starts with one of these: a cheap first test per position
    r"(?:(?P<comment><!--)"
    r"|(?P<ref_empty><ref\b[^>]*/>)"
    rf"|(?P<drop><(?P<drop_name>{_DROPPED_TAGS})\b[^>]*>)"
    r"|(?P<nowiki><nowiki>)"
    r"|(?P<tag></?[A-Za-z][A-Za-z0-9]*\b[^<>]*>)"
    r"|(?P<table_open>^:*\{\|)"
    r"|(?P<table_close>^\|\})"
    r"|(?P<template_open>\{\{)"
    r"|(?P<template_close>\}\})"
    r"|(?P<link_open>\[\[)"
    r"|(?P<link_close>\]\])"
    r"|(?P<ext_open>\[(?:(?:https?|ftps?|irc)://|//|mailto:)[^\s\]]*[ \t]*)"
    r"|(?P<ext_close>\])"
    r"|(?P<quotes>'''''|'''|'')"
    r"|(?P<heading_open>^={1,6}[ \t]*)"
    r"|(?P<heading_close>={1,6}[ \t]*$)"
    r"|(?P<list>^[*#:;]+[ \t]*)"
    r"|(?P<rule>^-{4,})"
    r"|(?P<magic>__[A-Z]+__))",
    re.MULTILINE | re.IGNORECASE,
)
_LINE_BREAK = re.compile(r"<br\b", re.IGNORECASE)
_HEADING_LINE = re.compile(r"(={1,6})[ \t]*(.*?)[ \t]*\1[ \t]*$", re.MULTILINE)
# Sections after which an article holds only lists of sources and links.
_TAIL_SECTIONS = {
    "references",
    "notes",
    "footnotes",
    "citations",
    "sources",
    "bibliography",
    "further reading",
    "external links",
    "see also",
    "notes and references",
}
_DROPPED_NAMESPACES = {"file", "image", "media", "category"}
_LANGUAGE_PREFIX = re.compile(r"^(?:[a-z]{2,3}(?:-[a-z]+)*|simple)$")
_KEPT_FRAMES = ("root", "link", "ext")  # frames whose text is kept; templates and tables drop theirs


def _link_text(inner: str) -> str:
    """What `[[inner]]` shows: the label, or the target; '' for files, categories and interlanguage links."""
    parts = inner.split("|")
    target = parts[0].strip()
    shown_colon = target.startswith(":")  # [[:Category:X]] is a visible link to the category page
    target = target.lstrip(":")
    if ":" in target and not shown_colon:
        prefix = target.split(":", 1)[0].strip().lower()
        if prefix in _DROPPED_NAMESPACES or (len(parts) == 1 and _LANGUAGE_PREFIX.match(prefix)):
            return ""
    label = parts[-1].strip() if len(parts) > 1 else target
    return label or target


def _close(stack: list, kind: str) -> str | None:
    """Pop frames down to the innermost open `kind` (dropping unclosed ones above it); its text, or None."""
    for depth in range(len(stack) - 1, 0, -1):
        if stack[depth][0] == kind:
            frame = stack[depth]
            del stack[depth:]
            return "".join(frame[1])
    return None


def _emit(stack: list, text: str) -> None:
    if text and stack[-1][0] in _KEPT_FRAMES:
        stack[-1][1].append(text)


def clean_wikitext(text: str) -> str:
    """Plain text of one article's wikitext (see the module docstring for the rules)."""
    stack: list = [["root", []]]
    pos = 0
    while True:
        match = _TOKEN.search(text, pos)
        if match is None:
            _emit(stack, text[pos:])
            break
        _emit(stack, text[pos : match.start()])
        kind = match.lastgroup if match.lastgroup != "drop_name" else "drop"
        end = match.end()
        if kind == "comment":
            close = text.find("-->", end)
            end = len(text) if close < 0 else close + 3
        elif kind == "drop":
            closing = re.compile(rf"</{match.group('drop_name')}\s*>", re.IGNORECASE).search(text, end)
            end = end if closing is None else closing.end()  # an unclosed tag drops only itself
        elif kind == "nowiki":
            close = text.lower().find("</nowiki>", end)
            close = len(text) if close < 0 else close
            _emit(stack, text[end:close])
            end = min(len(text), close + len("</nowiki>"))
        elif kind in ("template_open", "table_open", "link_open", "ext_open"):
            stack.append([kind.removesuffix("_open"), []])
        elif kind in ("template_close", "table_close"):
            if _close(stack, kind.removesuffix("_close")) is None:
                _emit(stack, match.group())
        elif kind == "link_close":
            inner = _close(stack, "link")
            _emit(stack, match.group() if inner is None else _link_text(inner))
        elif kind == "ext_close":
            if stack[-1][0] == "ext":
                _emit(stack, _close(stack, "ext").strip())
            else:
                _emit(stack, "]")
        elif kind == "tag" and _LINE_BREAK.match(match.group()):
            _emit(stack, " ")
        elif kind == "heading_open" and len(stack) == 1:
            heading = _HEADING_LINE.match(text, match.start())
            if heading and heading.group(2).strip(" '").lower() in _TAIL_SECTIONS:
                break
        # ref_empty, tag, quotes, heading marks, list markers, rules, magic words: removed
        pos = end
    while len(stack) > 1:  # unclosed at the end: links and external links keep their text
        kind, parts = stack.pop()
        if kind == "link":
            _emit(stack, _link_text("".join(parts)))
        elif kind == "ext":
            _emit(stack, "".join(parts))
    return _tidy(html.unescape("".join(stack[0][1])))


_SPACES = re.compile(r"[ \t\u00a0\u2009\u200a\u202f]+")
_EMPTY_BRACKETS = re.compile(r"\(\s*[,;:]?\s*\)")
_SPACE_BEFORE_PUNCT = re.compile(r" +([,.;:!?)])")


def _tidy(text: str) -> str:
    lines = []
    for line in text.split("\n"):
        line = _SPACES.sub(" ", line)
        line = _EMPTY_BRACKETS.sub("", line)  # what a dropped pronunciation or date template leaves
        line = _SPACE_BEFORE_PUNCT.sub(r"\1", _SPACES.sub(" ", line)).strip()
        if line or (lines and lines[-1]):
            lines.append(line)
    return "\n".join(lines).strip()


def iter_articles(path: str | Path) -> Iterator[tuple[str, str]]:
    """(title, wikitext) of every main-namespace, non-redirect page of a MediaWiki XML dump (.bz2 or plain)."""
    import bz2
    import xml.etree.ElementTree as ET

    path = Path(path)
    opener = bz2.open if path.suffix == ".bz2" or path.name.endswith("shortened.bz2") else open
    with opener(path, "rb") as handle:
        for _, element in ET.iterparse(handle, events=("end",)):
            if element.tag.rsplit("}", 1)[-1] != "page":
                continue
            fields = {child.tag.rsplit("}", 1)[-1]: child for child in element}
            text = element.find("./{*}revision/{*}text")
            body = text.text if text is not None and text.text else ""
            is_article = fields.get("ns") is not None and fields["ns"].text == "0"
            if is_article and "redirect" not in fields and not body.lstrip().upper().startswith("#REDIRECT"):
                yield fields["title"].text or "", body
            element.clear()
