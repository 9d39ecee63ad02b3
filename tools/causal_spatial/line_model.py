"""The issue's `cmd:` line protocol, beside core/endpoint's chat-completions one (`--cmd-protocol line`).

The program is started once per item (at most --concurrency at a time) and gets one JSON line on stdin,
`{"id": ..., "question": <the prompt>, "images": [absolute paths: the item's image, then the COW
frames]}`; it writes one JSON object on stdout, `{"answer": "B"}` or `{"text": "<free text>"}`.
A program that loops over stdin lines (one answer line per request line) works unchanged. A non-zero
exit, or stdout that is not such an object, fails that item (its last stderr line goes into the error
record); timeouts are retried like core/endpoint's other failures.
"""

from __future__ import annotations

import json
import subprocess

from methodkit.core.endpoint.answer import Answer
from methodkit.core.endpoint.retry import AttemptFailed
from methodkit.core.endpoint.transports import CommandTransport
from methodkit.core.errors import UsageError


def _last_line(text: str, limit: int = 160) -> str:
    lines = text.strip().splitlines()
    line = " ".join(lines[-1].split()) if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


class LineCommandTransport(CommandTransport):
    """`send(messages, params)` sends params["line"] (the item's {id, question, images}); the chat
    messages only key the response cache (they carry the images' bytes, so a regenerated image is asked
    again)."""

    def send(self, messages: list, params: dict) -> Answer:
        line = json.dumps(params["line"], ensure_ascii=False)
        try:
            proc = subprocess.run(self.argv, input=line + "\n", capture_output=True, text=True, timeout=self.timeout,
                                  check=False)  # fmt: skip
        except FileNotFoundError:
            raise UsageError(f"--model {self.url}: program '{self.argv[0]}' not found") from None
        except PermissionError:
            raise UsageError(f"--model {self.url}: program '{self.argv[0]}' is not executable") from None
        except subprocess.TimeoutExpired:
            raise AttemptFailed(None, f"timed out after {self.timeout:g} s", True) from None
        if proc.returncode != 0:
            raise AttemptFailed(f"exit {proc.returncode}", _last_line(proc.stderr), False)
        first = proc.stdout.strip().splitlines()[:1]
        try:
            body = json.loads(first[0]) if first else None
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("answer"), str):
            return Answer(json.dumps({"Answer": body["answer"]}), body.get("model"))
        if isinstance(body, dict) and isinstance(body.get("text"), str):
            return Answer(body["text"], body.get("model"))
        raise AttemptFailed("bad answer", 'stdout is not one JSON object {"answer": ...} or {"text": ...}', False)
