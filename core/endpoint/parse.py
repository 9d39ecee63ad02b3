"""Answer parsers shared by benchmarks and judges: a JSON object, a multiple-choice letter, yes/no.

Every parser returns a Parsed holding the raw text beside the value. A text that cannot be read is a
Parsed with ok=False and an error saying why: the caller counts it as wrong (Parsed.matches is False),
never drops it, so a model that answers off-format scores lower rather than being scored on fewer items.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Parsed:
    raw: str
    value: Any = None
    ok: bool = True
    error: str | None = None

    def matches(self, expected) -> bool:
        """True when parsed and equal to `expected`; a parse error is always wrong."""
        return self.ok and self.value == expected

    def to_dict(self) -> dict:
        return asdict(self)


def _error(raw: str, why: str) -> Parsed:
    return Parsed(raw, None, False, why)


# ---------------------------------------------------------------- JSON object

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)


def parse_json(raw: str) -> Parsed:
    """A JSON object: the whole text, else a ```json fenced block, else the first {...} that decodes."""
    text = (raw or "").strip()
    candidates = [text] + [m.group(1).strip() for m in _FENCE.finditer(text)]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return Parsed(raw, value)
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict):
            return Parsed(raw, value)
    return _error(raw, "no JSON object in the answer")


# ---------------------------------------------------------------- multiple choice


def _choice_patterns(letters: str) -> list[tuple[str, re.Pattern]]:
    span = re.escape("".join(sorted(set(letters.upper()))))
    # A lower-case letter counts only where it cannot be the article in "the answer is a bit unclear".
    letter = rf"([{span}]\b|[{span.lower()}](?=\s*(?:[.)\]*]|$)))"
    lead = r"\s*(?:(?:is|:|-|=)\s*)*[\(\[\*\s]*"
    multi = re.MULTILINE
    return [
        # "Answer: B", "The answer is (B)", "Final answer: **B**", "answer: b"
        ("answer", re.compile(rf"(?i:\banswer){lead}{letter}(?!['\w])", multi)),
        ("bold", re.compile(rf"\*\*\s*[\(\[]?([{span}])[\)\]]?[.):]?\s*\*\*", multi)),
        ("paren", re.compile(rf"[\(\[]([{span}])[\)\]]", multi)),
        ("option", re.compile(rf"(?i:\b(?:option|choice)){lead}{letter}(?!['\w])", multi)),
        ("leading", re.compile(rf"^\s*([{span}])\s*[.):](?:\s|$)", multi)),
        ("alone", re.compile(rf"^\W*([{span}{span.lower()}])\W*$", multi)),
    ]


def parse_choice(raw: str, letters: str = "ABCD") -> Parsed:
    """A multiple-choice letter among `letters`, in the usual forms: "Answer: B", "The answer is (B)",
    "**B**", "(B)", "Option B", "B." or "B)" opening a line, or the letter alone. The forms are tried in
    that order. An "answer" marker wins at its last occurrence (models reason first and conclude last);
    any other form must name a single letter: two different ones ("(A) or (C)") are a parse error."""
    text = raw or ""
    for name, pattern in _choice_patterns(letters):
        found = [m.group(1).upper() for m in pattern.finditer(text)]
        if not found:
            continue
        if name == "answer":
            return Parsed(raw, found[-1])
        if len(set(found)) == 1:
            return Parsed(raw, found[0])
        return _error(raw, f"ambiguous: letters {', '.join(sorted(set(found)))} all appear as answers")
    return _error(raw, f"no choice among {', '.join(letters.upper())} in the answer")


# ---------------------------------------------------------------- yes / no

_YES = {"yes", "true"}
_NO = {"no", "false"}
_MARKED_YES_NO = re.compile(r"\banswer\s*(?:is|:|-|=)?\s*[\*\"']*\s*(yes|no|true|false)\b", re.IGNORECASE)
_WORDS = re.compile(r"[A-Za-z]+")


def parse_yes_no(raw: str) -> Parsed:
    """True for yes, False for no: "Answer: yes", a leading "Yes, ...", "**No**", or the only one of
    yes/no the text contains; both without a marker or a leading word is a parse error."""
    text = raw or ""
    marked = _MARKED_YES_NO.findall(text)
    if marked:
        return Parsed(raw, marked[-1].lower() in _YES)
    words = [w.lower() for w in _WORDS.findall(text)]
    if words and words[0] in _YES | _NO:
        return Parsed(raw, words[0] in _YES)
    seen = {w in _YES for w in words if w in {"yes", "no"}}
    if len(seen) == 1:
        return Parsed(raw, seen.pop())
    if seen:
        return _error(raw, "ambiguous: both yes and no appear")
    return _error(raw, "no yes or no in the answer")


PARSERS = {"json": parse_json, "choice": parse_choice, "yes-no": parse_yes_no}
