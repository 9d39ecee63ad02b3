"""The shared click option group, through a small tool built the way a method's CLI will be."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from methodkit.cli._common import Run, common_options, tool_command
from methodkit.cli._endpoint_options import ModelSpecType, endpoint_from_options, endpoint_options
from methodkit.core.endpoint import BaselineRegistry, Request

SECRET = "sk-test-0123456789abcdef-secret"
BASELINES = BaselineRegistry()


@BASELINES.register("always-b")
def _always_b(messages, params):
    return "(B)"


@tool_command("ask-test")
@click.argument("questions", nargs=-1, required=True)
@common_options("output", "seed", "meta", "force", "verbose")
@endpoint_options(BASELINES)
def ask_test(questions, **_):
    """Ask each QUESTION; print the answers as one JSON line.

    \b
    EXIT STATUS
      0 answered, 1 the model could not be reached, 2 bad usage
    """
    run = Run.from_context()
    run.refuse_existing_output(run.params.get("meta"))
    endpoint = endpoint_from_options(run.params, BASELINES)
    answers = endpoint.ask_many([Request.user(q) for q in questions])
    run.emit_result({"answers": [a.text for a in answers], "endpoint": endpoint.record()})


def invoke(args, env=None):
    return CliRunner().invoke(ask_test, args, env=env, catch_exceptions=False)


def test_help_lists_every_option_and_the_baselines():
    result = invoke(["--help"])
    assert result.exit_code == 0
    for option in ("--model SPEC", "--base-url URL", "--concurrency", "--timeout SECONDS", "--retries", "--no-cache"):
        assert option in result.stdout
    assert "--cache PATH" in result.stdout and "--temperature" in result.stdout and "--max-tokens" in result.stdout
    assert "always-b" in result.stdout and "OPENAI_API_KEY" in result.stdout
    assert "--api-key" not in result.stdout  # the key has no flag, so argv never holds it


def test_help_imports_neither_openai_nor_sqlite():
    code = (
        "import sys, click\n"
        "from methodkit.cli._endpoint_options import endpoint_options\n"
        "@click.command()\n@endpoint_options({'x': 'a.b:c'})\ndef c(**k): pass\n"
        "try:\n    c.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert 'openai' not in sys.modules and 'sqlite3' not in sys.modules, 'heavy import at --help'\n"
    )
    proc = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_answers_through_the_options_and_the_cache(chat_server, tmp_path):
    cache = tmp_path / "cache.sqlite"
    args = ["--model", "openai:test-model", "--base-url", chat_server.url, "--cache", str(cache), "--seed", "4"]
    first = invoke([*args, "--temperature", "0.5", "--max-tokens", "9", "one", "two"])
    assert first.exit_code == 0, first.stderr
    result = json.loads(first.stdout)
    assert result["answers"] == ["one", "two"]
    assert result["endpoint"]["base_url"] == chat_server.url and result["endpoint"]["cache"] == str(cache)
    body = chat_server.bodies[0]
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.5, 9, 4)
    assert invoke([*args, "--temperature", "0.5", "--max-tokens", "9", "one", "two"]).exit_code == 0
    assert chat_server.count == 2  # the rerun was answered from --cache
    assert invoke([*args, "--temperature", "0.5", "--max-tokens", "9", "--no-cache", "one"]).exit_code == 0
    assert chat_server.count == 3


def test_base_url_from_the_environment_and_the_default_cache_place(chat_server, tmp_path):
    result = invoke(["--model", "openai:test-model", "hi"], env={"OPENAI_BASE_URL": chat_server.url})
    assert result.exit_code == 0, result.stderr
    assert chat_server.count == 1
    assert (tmp_path / "xdg-cache" / "methodkit" / "endpoint.sqlite").exists()  # $XDG_CACHE_HOME (conftest)


def test_a_baseline_from_the_choice(chat_server):
    result = invoke(["--model", "always-b", "q1", "q2"])
    assert result.exit_code == 0 and json.loads(result.stdout)["answers"] == ["(B)", "(B)"]
    assert chat_server.count == 0


def test_completion_offers_the_prefixes_and_the_baselines():
    kind = ModelSpecType(["always-b", "random"])
    assert [c.value for c in kind.shell_complete(None, None, "")] == ["openai:", "cmd:", "always-b", "random"]
    assert [c.value for c in kind.shell_complete(None, None, "a")] == ["always-b"]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--model", "gpt-4o", "q"], "'gpt-4o' is not a model spec: use openai:MODEL, cmd:"),
        (["--model", "openai:", "q"], "openai: needs a model name"),
        (["--model", "openai:m", "--base-url", "localhost:8000", "q"], "--base-url 'localhost:8000' is not an http"),
        (["--model", "openai:m", "--concurrency", "0", "q"], "--concurrency"),
    ],
)
def test_bad_endpoint_options_are_one_line_usage_errors(args, fragment):
    result = invoke(args)
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ask-test: error: ") and fragment in lines[0], lines


def test_no_key_for_the_openai_api_is_a_usage_error():
    result = invoke(["--model", "openai:gpt-4o-mini", "--no-cache", "q"])
    assert result.exit_code == 2 and "OPENAI_API_KEY is not set" in result.stderr


def test_unreachable_model_exits_1_with_one_line_naming_the_url(chat_server, tmp_path):
    chat_server.responder = lambda body: chat_server.status(500, message="boom")
    result = invoke(["--model", "openai:m", "--base-url", chat_server.url, "--retries", "1", "--no-cache", "q"])
    assert result.exit_code == 1 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"ask-test: error: request to {chat_server.url}/chat/completions failed after 2 attempts; "
        "last status 500 (boom); 0 of 1 answers obtained"
    ]


def test_the_key_is_sent_but_never_logged_or_recorded(chat_server, tmp_path):
    s = chat_server
    s.script(s.status(429, message=f"slow down {SECRET}"), s.reply("fine"))
    cache, meta = tmp_path / "cache.sqlite", tmp_path / "meta.json"
    env = {"OPENAI_API_KEY": SECRET}
    args = ["--model", "openai:m", "--base-url", s.url, "--cache", str(cache), "--meta", str(meta), "-v", "q"]
    ok = invoke(args, env=env)
    assert ok.exit_code == 0, ok.stderr
    assert "retry 1/5" in ok.stderr  # -v reports the retry ...
    s.responder = lambda body: s.status(401, message=f"Incorrect API key provided: {SECRET}")
    failed = invoke([*args[:-1], "--force", "--no-cache", "q2"], env=env)
    assert failed.exit_code == 1 and "last status 401" in failed.stderr
    assert all(h["authorization"] == f"Bearer {SECRET}" for h in s.headers)  # ... the key did travel
    for text in (ok.stdout, ok.stderr, failed.stdout, failed.stderr, meta.read_text()):
        assert SECRET not in text
    assert SECRET.encode() not in cache.read_bytes()
    assert "***" in ok.stderr  # the echoed key was redacted, not just absent
