"""When to ask again and how long to wait: exponential backoff with jitter, Retry-After honoured.

Retried: 408, 429, every 5xx, timeouts, refused or dropped connections and malformed bodies (a proxy
or a server under load produces all of these now and then). Not retried: other 4xx (a bad request or a
bad key stays bad), and a local program that exits non-zero.
"""

from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass, field


class AttemptFailed(Exception):
    """One attempt failed. `status` is the HTTP status (None for a timeout or connection failure)."""

    def __init__(self, status: int | str | None, reason: str, retryable: bool, retry_after: float | None = None):
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.retryable = retryable
        self.retry_after = retry_after

    def last(self) -> str:
        """How the last attempt ended, for the error line: 'last status 503 (...)' or 'last attempt: ...'."""
        return f"last {self.describe()}" if self.status is not None else f"last attempt: {self.reason}"

    def describe(self) -> str:
        if self.status is None:
            return self.reason
        return f"status {self.status}" + (f" ({self.reason})" if self.reason else "")


def retryable_status(status: int) -> bool:
    return status in (408, 429) or status >= 500


def parse_retry_after(headers) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date); None if absent."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass
class RetryPolicy:
    """`retries` more attempts after the first. Attempt k (1-based) that fails waits, unless the server
    said Retry-After, d/2 + U(0, d/2) seconds with d = min(cap, base * 2**(k-1)) ("equal jitter":
    never less than half the exponential step, so clients that failed together spread out but do
    not hammer). A Retry-After is waited exactly, up to `max_retry_after`."""

    retries: int = 5
    base: float = 0.5
    cap: float = 30.0
    max_retry_after: float = 300.0
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_retry_after)
        step = min(self.cap, self.base * 2 ** (attempt - 1))
        return step / 2 + self.rng.uniform(0, step / 2)
