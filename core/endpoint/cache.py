"""A persistent response cache in SQLite, so a rerun or an interrupted run resumes for free.

The key is the sha256 of the canonical JSON of model spec + messages + parameters. Images enter the key
by the sha256 of their decoded bytes rather than their base64 text, so the key is cheap to store and
names the picture, not its encoding in transit. The base URL and the API key are not part of the key:
the same model name asked the same thing is the same question wherever it is served (pass --no-cache or
another --cache file to ask again). Each answer is committed as it arrives, so nothing obtained is lost
when a later request fails or the run is interrupted.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
import time
from pathlib import Path

from methodkit.core.errors import UsageError

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    answer TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def default_cache_path() -> Path:
    """$XDG_CACHE_HOME/methodkit/endpoint.sqlite (~/.cache/... when unset)."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "methodkit" / "endpoint.sqlite"


def _keyable(value):
    """`value` with every data URL replaced by the hash of the bytes it carries."""
    if isinstance(value, dict):
        return {k: _keyable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_keyable(v) for v in value]
    if isinstance(value, str) and value.startswith("data:") and ";base64," in value[:100]:
        head, _, payload = value.partition(";base64,")
        digest = hashlib.sha256(base64.b64decode(payload)).hexdigest()
        return f"{head};sha256,{digest}"
    return value


def cache_key(model: str, messages: list, params: dict) -> str:
    """sha256 hex of model + messages + parameters (None-valued parameters dropped)."""
    document = {
        "model": model,
        "messages": _keyable(messages),
        "params": {k: v for k, v in params.items() if v is not None},
    }
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ResponseCache:
    """key -> answer dict, shared by the worker threads of one run (one connection behind a lock)."""

    def __init__(self, path: str | os.PathLike, flag: str = "--cache"):
        import sqlite3  # here, not at import: --help never opens a cache

        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")  # other processes may read while we write
            self._db.execute(SCHEMA)
            self._db.commit()
        except (OSError, sqlite3.Error) as exc:
            raise UsageError(f"{flag} {self.path}: cannot open the response cache ({exc})") from exc
        self._lock = threading.Lock()

    def get(self, key: str) -> dict | None:
        with self._lock:
            row = self._db.execute("SELECT answer FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, model: str, answer: dict) -> None:
        text = json.dumps(answer, sort_keys=True, ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, model, answer, created) VALUES (?, ?, ?, ?)",
                (key, model, text, time.time()),
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
