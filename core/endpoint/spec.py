"""The model SPEC grammar every tool shares, and where an OpenAI-compatible server is.

    openai:MODEL        a chat-completions server (vLLM, llama.cpp, Ollama, LM Studio, a hosted API);
                        MODEL is everything after the first colon, so `openai:llama3.1:8b` works
    cmd:"PROGRAM ARGS"  a local program: one JSON request on stdin, one JSON answer on stdout
    NAME                a built-in baseline registered by the method (see baselines.py)

The base URL comes from --base-url, else $OPENAI_BASE_URL, else the OpenAI API. The key comes only from
$OPENAI_API_KEY: there is deliberately no flag for it, so it can never land in argv, a log or a run record.
This module imports nothing heavy: it runs while click parses the command line.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from methodkit.core.errors import UsageError

DEFAULT_BASE_URL = "https://api.openai.com/v1"
KINDS = ("openai", "cmd", "baseline")


@dataclass(frozen=True)
class ModelSpec:
    """A parsed --model value. `text` is the canonical spelling (it keys the response cache)."""

    kind: str
    name: str
    argv: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        if self.kind == "openai":
            return f"openai:{self.name}"
        if self.kind == "cmd":
            return f"cmd:{shlex.join(self.argv)}"
        return self.name

    def __str__(self) -> str:
        return self.text


def parse_spec(value: str, baselines: Iterable[str] = (), flag: str = "--model") -> ModelSpec:
    """Parse a SPEC string; an unknown form is a UsageError that lists what is accepted."""
    value = str(value).strip()
    prefix, sep, rest = value.partition(":")
    if sep and prefix == "openai":
        if not rest.strip():
            raise UsageError(f"{flag} openai: needs a model name, e.g. openai:gpt-4o-mini")
        return ModelSpec("openai", rest.strip())
    if sep and prefix == "cmd":
        argv = _split_command(rest, flag)
        return ModelSpec("cmd", shlex.join(argv), tuple(argv))
    names = sorted(baselines)
    if value in names:
        return ModelSpec("baseline", value)
    known = f" or a baseline ({', '.join(names)})" if names else ""
    raise UsageError(f"{flag} '{value}' is not a model spec: use openai:MODEL, cmd:\"PROGRAM ARGS\"{known}")


def _split_command(rest: str, flag: str) -> list[str]:
    try:
        argv = shlex.split(rest)
        # `--model 'cmd:"python judge.py"'` keeps the quotes the grammar shows: one quoted word that
        # holds a whole command line is split once more.
        if len(argv) == 1 and rest.strip()[:1] in "\"'" and len(shlex.split(argv[0])) > 1:
            argv = shlex.split(argv[0])
    except ValueError as exc:
        raise UsageError(f"{flag} cmd:{rest}: {exc}") from exc
    if not argv:
        raise UsageError(f'{flag} cmd: needs a program, e.g. cmd:"python my_model.py"')
    return argv


def resolve_base_url(flag_value: str | None, environ=None) -> str:
    """--base-url, else $OPENAI_BASE_URL, else the OpenAI API; must be an http(s) URL."""
    environ = os.environ if environ is None else environ
    url = flag_value or environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    source = "--base-url" if flag_value else ("OPENAI_BASE_URL" if environ.get("OPENAI_BASE_URL") else "default")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"{source} '{url}' is not an http(s) URL; e.g. --base-url http://127.0.0.1:8000/v1")
    return url.rstrip("/")


def redact_url(url: str) -> str:
    """The URL without user:password@ and without a query string, fit for an error line or a record."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
