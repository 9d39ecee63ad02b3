"""The three ways to reach a model, each one attempt at a time (retrying is client.py's job).

- OpenAITransport: chat completions through the official `openai` package (imported on first use,
  its own retries off so that ours count and honour Retry-After).
- CommandTransport: a local program, one JSON request (the chat-completions body) on stdin, one JSON
  answer on stdout: {"text": "..."} or a chat-completions body.
- BaselineTransport: a Python function a method registered (see baselines.py).
A failed attempt raises retry.AttemptFailed; a transport's messages never contain the API key.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import threading

from methodkit.core.endpoint.answer import Answer, MalformedBody, answer_from_completion
from methodkit.core.endpoint.retry import AttemptFailed, parse_retry_after, retryable_status
from methodkit.core.endpoint.spec import DEFAULT_BASE_URL, redact_url
from methodkit.core.errors import UsageError

# Parameters the openai package takes by name; anything else travels in extra_body (vLLM's top_k, ...).
_NAMED_PARAMS = {
    "temperature",
    "seed",
    "max_tokens",
    "max_completion_tokens",
    "top_p",
    "stop",
    "n",
    "response_format",
    "presence_penalty",
    "frequency_penalty",
    "logprobs",
    "top_logprobs",
}


def _short(text: str, limit: int = 160) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class OpenAITransport:
    def __init__(self, model: str, base_url: str, timeout: float):
        self.model = model
        self.base_url = base_url
        self.timeout = timeout
        self.url = redact_url(base_url) + "/chat/completions"
        # Read here and kept only in this object: never in a record, an error or a log line.
        self._key = os.environ.get("OPENAI_API_KEY") or None
        if self._key is None and base_url.rstrip("/") == DEFAULT_BASE_URL:
            raise UsageError("OPENAI_API_KEY is not set; export it, or point --base-url at a local server")
        self._client = None
        self._lock = threading.Lock()

    def _redact(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def client(self):
        with self._lock:
            if self._client is None:
                import openai

                # Local servers ignore the key, but the package insists on one.
                self._client = openai.OpenAI(
                    api_key=self._key or "not-needed",
                    base_url=self.base_url,
                    timeout=self.timeout,
                    max_retries=0,
                )
            return self._client

    def send(self, messages: list, params: dict) -> Answer:
        import openai

        named = {k: v for k, v in params.items() if k in _NAMED_PARAMS}
        extra = {k: v for k, v in params.items() if k not in _NAMED_PARAMS}
        try:
            raw = self.client().chat.completions.with_raw_response.create(
                model=self.model, messages=messages, extra_body=extra or None, **named
            )
        except openai.APITimeoutError:
            raise AttemptFailed(None, f"timed out after {self.timeout:g} s", True) from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise AttemptFailed(None, self._redact(f"connection failed ({_short(cause)})"), True) from None
        except openai.APIStatusError as exc:
            status = exc.status_code
            raise AttemptFailed(
                status,
                self._redact(_status_reason(exc)),
                retryable_status(status),
                parse_retry_after(exc.response.headers),
            ) from None
        try:
            return answer_from_completion(json.loads(raw.text))
        except (ValueError, MalformedBody) as exc:
            what = str(exc) if isinstance(exc, MalformedBody) else "not JSON"
            raise AttemptFailed(raw.status_code, f"malformed body: {what}", True) from None


def _status_reason(exc) -> str:
    """The server's own error message when it sent one, else the HTTP reason phrase."""
    body = exc.body
    if isinstance(body, dict):
        message = body.get("message") or body.get("error")
        if isinstance(message, dict):
            message = message.get("message")
        if message:
            return _short(message)
    return _short(getattr(exc.response, "reason_phrase", "") or "")


class CommandTransport:
    def __init__(self, argv: tuple[str, ...], timeout: float):
        self.argv = list(argv)
        self.timeout = timeout
        self.url = "cmd:" + shlex.join(self.argv)

    def send(self, messages: list, params: dict) -> Answer:
        request = json.dumps({"model": self.url, "messages": messages, **params}, ensure_ascii=False)
        try:
            proc = subprocess.run(
                self.argv, input=request + "\n", capture_output=True, text=True, timeout=self.timeout, check=False
            )
        except FileNotFoundError:
            raise UsageError(f"--model {self.url}: program '{self.argv[0]}' not found") from None
        except PermissionError:
            raise UsageError(f"--model {self.url}: program '{self.argv[0]}' is not executable") from None
        except subprocess.TimeoutExpired:
            raise AttemptFailed(None, f"timed out after {self.timeout:g} s", True) from None
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines()
            raise AttemptFailed(f"exit {proc.returncode}", _short(lines[-1]) if lines else "", False)
        try:
            body = json.loads(proc.stdout)
        except ValueError:
            raise AttemptFailed("bad answer", "stdout is not one JSON object", False) from None
        if isinstance(body, dict) and isinstance(body.get("text"), str):
            return Answer(body["text"], body.get("model"), body.get("finish_reason"), body.get("usage"))
        try:
            return answer_from_completion(body)
        except MalformedBody as exc:
            raise AttemptFailed("bad answer", f'want {{"text": ...}} or a chat completion: {exc}', False) from None


class BaselineTransport:
    def __init__(self, name: str, function):
        self.function = function
        self.url = f"baseline {name}"

    def send(self, messages: list, params: dict) -> Answer:
        result = self.function(messages, params)
        return result if isinstance(result, Answer) else Answer(str(result), self.url)
