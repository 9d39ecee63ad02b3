"""A real chat-completions server on 127.0.0.1 (a free port) with scripted replies.

    s = chat_server
    s.script(s.reply("B"), s.status(429, retry_after="1"), s.slow(2.0, "late"), s.malformed())
    s.responder = lambda body: s.reply(body["messages"][-1]["content"].upper())

Scripted steps are served first, in order, one per request; then `responder` answers (default: echo
the last user text). The server records every request body and header, the arrival times, and the
largest number of requests it had in flight at once.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass
class Step:
    status: int = 200
    body: bytes = b""
    headers: dict = field(default_factory=dict)
    delay: float = 0.0


def completion(text: str, model: str = "test-model") -> dict:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


def reply(text: str, delay: float = 0.0) -> Step:
    return Step(200, json.dumps(completion(text)).encode(), {"Content-Type": "application/json"}, delay)


def status(code: int, retry_after: str | None = None, message: str = "scripted failure") -> Step:
    headers = {"Content-Type": "application/json"}
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    body = json.dumps({"error": {"message": message, "type": "test", "code": code}}).encode()
    return Step(code, body, headers)


def slow(seconds: float, text: str = "late") -> Step:
    return reply(text, delay=seconds)


def malformed(body: bytes = b"this is not json") -> Step:
    return Step(200, body, {"Content-Type": "application/json"})


def last_user_text(body: dict) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if p.get("type") == "text")
    return content


class ChatServer:
    # the step makers, reachable from tests through the fixture (test modules cannot import conftest)
    reply = staticmethod(reply)
    status = staticmethod(status)
    slow = staticmethod(slow)
    malformed = staticmethod(malformed)

    def __init__(self):
        self.steps: deque[Step] = deque()
        self.responder = lambda body: reply(last_user_text(body))
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        self.arrivals: list[float] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def count(self) -> int:
        return len(self.bodies)

    def script(self, *steps: Step) -> None:
        self.steps.extend(steps)

    def _next_step(self, body: dict) -> Step:
        with self.lock:
            if self.steps:
                return self.steps.popleft()
        return self.responder(body)

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    server.arrivals.append(time.monotonic())
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.bodies.append(json.loads(raw) if raw else {})
                answered = False

                def leave():  # the request stops counting as in flight once its reply is about to be sent
                    nonlocal answered
                    if not answered:
                        answered = True
                        with server.lock:
                            server.in_flight -= 1

                try:
                    if self.path.rstrip("/") != "/v1/chat/completions":
                        step = status(404, message=f"no route {self.path}")
                    else:
                        step = server._next_step(server.bodies[-1])
                    if step.delay:
                        time.sleep(step.delay)
                    self.send_response(step.status)
                    for key, value in step.headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(step.body)))
                    self.end_headers()
                    # before the body: once the client has it, its next request may arrive before this
                    # thread runs again, and would otherwise be counted beside this finished one
                    leave()
                    self.wfile.write(step.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left
                finally:
                    leave()

        return Handler


@pytest.fixture
def chat_server():
    server = ChatServer()
    server.thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


@pytest.fixture(autouse=True)
def _no_real_openai_env(monkeypatch, tmp_path):
    """No test reaches a real service or the user's cache, whatever the environment says."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
