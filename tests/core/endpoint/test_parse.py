"""Every answer form the parsers read, and the parse errors they must not swallow."""

from __future__ import annotations

import pytest

from methodkit.core.endpoint.parse import Parsed, parse_choice, parse_json, parse_yes_no


@pytest.mark.parametrize(
    "text, letter",
    [
        ("(B)", "B"),
        ("B.", "B"),
        ("B) Paris", "B"),
        ("Answer: B", "B"),
        ("answer: b", "B"),
        ("The answer is (C).", "C"),
        ("Answer is: D", "D"),
        ("**B**", "B"),
        ("I pick **(A)** here", "A"),
        ("After weighing both, **C** is right", "C"),
        ("C", "C"),
        ("  d  ", "D"),
        ("Option B", "B"),
        # reasoning first, conclusion last: the last explicit answer wins over earlier mentions
        ("A looks plausible and (C) too, but the final answer: **D**", "D"),
        ("The answer is B, not option A", "B"),
        ("My first answer: A. On reflection the answer is C.", "C"),
        # the article "a" is not a choice
        ("The answer is a bit unclear, but (C)", "C"),
    ],
)
def test_choice_forms(text, letter):
    parsed = parse_choice(text)
    assert parsed == Parsed(text, letter)
    assert parsed.matches(letter)


@pytest.mark.parametrize("text", ["(A) or (C)", "I cannot tell.", "A cat sat on the mat", "", "(E)"])
def test_choice_parse_errors_are_kept_and_count_as_wrong(text):
    parsed = parse_choice(text)
    assert not parsed.ok and parsed.value is None and parsed.error
    assert parsed.raw == text
    assert not parsed.matches("A") and not parsed.matches(None)


def test_choice_letters_are_configurable():
    assert parse_choice("(E)", letters="ABCDE").value == "E"
    assert "ambiguous" in parse_choice("(A) or (C)").error


@pytest.mark.parametrize(
    "text, value",
    [
        ("Yes", True),
        ("no.", False),
        ("**No**", False),
        ("Yes, the cup is on the table.", True),
        ("Answer: yes", True),
        ("Thinking about it... The answer is no", False),
        ("No doubt about it. Answer: yes", True),  # the marker wins over the leading word
        ("I would say yes", True),
        ("True", True),
    ],
)
def test_yes_no_forms(text, value):
    assert parse_yes_no(text) == Parsed(text, value)


@pytest.mark.parametrize("text", ["Maybe", "N/A", "it is yes if the lid is on, no otherwise", ""])
def test_yes_no_parse_errors(text):
    parsed = parse_yes_no(text)
    assert not parsed.ok and parsed.error and parsed.raw == text
    assert not parsed.matches(True) and not parsed.matches(False)


@pytest.mark.parametrize(
    "text, value",
    [
        ('{"winner": "A", "score": 0.7}', {"winner": "A", "score": 0.7}),
        ('Sure!\n```json\n{"winner": "B"}\n```\nHope that helps.', {"winner": "B"}),
        ('```\n{"winner": "B"}\n```', {"winner": "B"}),
        # the fenced block wins over an earlier object quoted in the prose
        ('The format is {"winner": "A or B"}.\n```json\n{"winner": "B"}\n```', {"winner": "B"}),
        ('The verdict is {"winner": "A", "why": {"len": 2}} as asked.', {"winner": "A", "why": {"len": 2}}),
    ],
)
def test_json_object_forms(text, value):
    assert parse_json(text) == Parsed(text, value)


@pytest.mark.parametrize("text", ["[1, 2]", "no json here", '```json\n{"a": \n```', ""])
def test_json_parse_errors(text):
    parsed = parse_json(text)
    assert not parsed.ok and parsed.error == "no JSON object in the answer" and parsed.raw == text
