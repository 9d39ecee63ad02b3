"""The SPEC grammar and the base-URL rules."""

from __future__ import annotations

import pytest

from methodkit.core.endpoint.spec import DEFAULT_BASE_URL, ModelSpec, parse_spec, redact_url, resolve_base_url
from methodkit.core.errors import UsageError


@pytest.mark.parametrize(
    "text, name",
    [
        ("openai:gpt-4o-mini", "gpt-4o-mini"),
        ("openai:llama3.1:8b", "llama3.1:8b"),  # Ollama tags keep their colon
        ("openai:Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct"),
    ],
)
def test_openai_spec_keeps_everything_after_the_first_colon(text, name):
    spec = parse_spec(text)
    assert spec == ModelSpec("openai", name)
    assert spec.text == text


@pytest.mark.parametrize(
    "text, argv",
    [
        ("cmd:python judge.py --n 3", ("python", "judge.py", "--n", "3")),
        ('cmd:"python judge.py"', ("python", "judge.py")),  # the quotes the grammar shows
        ("cmd:'my model' \"a b\"", ("my model", "a b")),
    ],
)
def test_cmd_spec_splits_like_a_shell(text, argv):
    spec = parse_spec(text)
    assert spec.kind == "cmd" and spec.argv == argv
    assert parse_spec(spec.text) == spec  # the canonical text parses back to the same spec


def test_baseline_names_come_from_the_registry():
    assert parse_spec("always-a", ["always-a", "random"]) == ModelSpec("baseline", "always-a")
    with pytest.raises(UsageError) as info:
        parse_spec("gpt-4o", ["always-a", "random"])
    message = info.value.message
    assert "openai:MODEL" in message and "cmd:" in message and "always-a, random" in message


@pytest.mark.parametrize("text, fragment", [("openai:", "needs a model name"), ("cmd:", "needs a program")])
def test_empty_specs_are_usage_errors(text, fragment):
    with pytest.raises(UsageError, match=fragment):
        parse_spec(text)


def test_unbalanced_quote_in_cmd_is_a_usage_error():
    with pytest.raises(UsageError, match="cmd:"):
        parse_spec('cmd:python "judge.py')


def test_base_url_flag_then_environment_then_default():
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1/"}
    assert resolve_base_url("http://localhost:8000/v1", env) == "http://localhost:8000/v1"
    assert resolve_base_url(None, env) == "http://127.0.0.1:11434/v1"
    assert resolve_base_url(None, {}) == DEFAULT_BASE_URL


@pytest.mark.parametrize("bad", ["localhost:8000", "ftp://x/v1", "http://"])
def test_base_url_must_be_http(bad):
    with pytest.raises(UsageError, match="not an http"):
        resolve_base_url(bad, {})


def test_redact_url_drops_credentials_and_query():
    assert redact_url("https://user:pw@example.org:8443/v1?key=s3cret") == "https://example.org:8443/v1"


def test_redact_url_keeps_ipv6_brackets():
    assert redact_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
