"""Endpoint: ask a model many things at once, through the cache, with bounded concurrency and retries.

    endpoint = Endpoint(parse_spec("openai:qwen2.5-vl"), base_url="http://127.0.0.1:8000/v1", concurrency=8,
                        cache=ResponseCache(default_cache_path()), params={"temperature": 0, "seed": 0})
    answers = endpoint.ask_many([Request.user("Is the cup on the table? Answer yes or no.", image)])

When a request still fails after its retries, no new request is started, the ones in flight finish,
and EndpointError (exit 1) is raised: one line naming the URL and the last status, with `.partial`
holding every answer obtained (also committed to the cache, so the rerun asks only for the rest).
With `ask_many(..., keep_going=True)` a request that fails for good does not stop the others: its
slot holds the EndpointError instead of an Answer (the caller records it per request).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, ThreadPoolExecutor, as_completed

from methodkit.core.endpoint.answer import Answer
from methodkit.core.endpoint.cache import ResponseCache, cache_key
from methodkit.core.endpoint.messages import Request
from methodkit.core.endpoint.retry import AttemptFailed, RetryPolicy
from methodkit.core.endpoint.spec import ModelSpec, redact_url, resolve_base_url
from methodkit.core.endpoint.transports import BaselineTransport, CommandTransport, OpenAITransport
from methodkit.core.errors import RunFailure, UsageError
from methodkit.core.progress import silent


class _NotStarted(Exception):
    """A queued request skipped because another one already failed for good."""


class EndpointError(RunFailure):
    """Requests failed after their retries. `partial[i]` is the Answer to request i, or None."""

    def __init__(self, message: str, partial: list | None = None, url: str = "", status=None):
        super().__init__(message)
        self.partial = partial if partial is not None else []
        self.url = url
        self.status = status


def _baseline_function(baselines, name: str) -> Callable:
    if hasattr(baselines, "resolve"):
        return baselines.resolve(name)
    entry = baselines[name]
    if isinstance(entry, str):
        module, _, attr = entry.partition(":")
        entry = getattr(importlib.import_module(module), attr)
    return entry


class Endpoint:
    """One model behind one SPEC. `params` are defaults every request inherits (temperature, seed,
    max_tokens, ...); `on_event(line)` hears about retries (the CLI prints them with -v)."""

    def __init__(
        self,
        spec: ModelSpec,
        *,
        base_url: str | None = None,
        timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        concurrency: int = 4,
        cache: ResponseCache | None = None,
        params: dict | None = None,
        baselines=None,
        on_event: Callable[[str], None] | None = None,
    ):
        if concurrency < 1:
            raise UsageError(f"--concurrency must be at least 1 (got {concurrency})")
        if timeout <= 0:
            raise UsageError(f"--timeout must be positive (got {timeout:g})")
        self.spec = spec
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.concurrency = concurrency
        self.params = dict(params or {})
        self.on_event = on_event or (lambda line: None)
        if spec.kind == "openai":
            self.transport = OpenAITransport(spec.name, resolve_base_url(base_url), timeout)
        elif spec.kind == "cmd":
            self.transport = CommandTransport(spec.argv, timeout)
        else:
            if baselines is None or spec.name not in baselines:
                raise UsageError(f"--model {spec.name}: no such baseline")
            self.transport = BaselineTransport(spec.name, _baseline_function(baselines, spec.name))
        # A baseline is a local function: caching it would only add disk traffic.
        self.cache = cache if spec.kind != "baseline" else None

    @property
    def url(self) -> str:
        return self.transport.url

    def record(self) -> dict:
        """What a run record may say about the endpoint (no key, no credentials in the URL)."""
        base = getattr(self.transport, "base_url", None)
        return {
            "model": self.spec.text,
            "base_url": redact_url(base) if base else None,
            "cache": str(self.cache.path) if self.cache else None,
            "params": {k: v for k, v in self.params.items() if v is not None},
        }

    def _params(self, request: Request) -> dict:
        merged = {**self.params, **request.params}
        return {k: v for k, v in merged.items() if v is not None}

    def ask(self, request: Request) -> Answer:
        return self.ask_many([request])[0]

    def ask_many(self, requests: Sequence[Request], progress=silent, phase: str | None = None,
                 keep_going: bool = False) -> list:  # fmt: skip
        """Answers in the order of `requests`; cached ones cost no request. With `keep_going`, a request
        that fails after its retries leaves its EndpointError in its slot and the others go on."""
        phase = phase or f"asking {self.spec.text}"
        total = len(requests)
        answers: list[Answer | None] = [None] * total
        keys: list[str | None] = [None] * total
        todo = []
        for i, request in enumerate(requests):
            if self.cache is not None:
                keys[i] = cache_key(self.spec.text, request.messages, self._params(request))
                stored = self.cache.get(keys[i])
                if stored is not None:
                    answers[i] = Answer.from_stored(stored)
                    continue
            todo.append(i)
        done = total - len(todo)
        progress(phase, done, total)
        failure: EndpointError | None = None
        stop = threading.Event()  # set once a request fails for good (or on Ctrl-C): nothing new starts
        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="endpoint")
        try:
            futures = {pool.submit(self._ask_one, requests[i], keys[i], stop, keep_going): i for i in todo}
            for future in as_completed(futures):
                try:
                    answers[futures[future]] = future.result()
                except (CancelledError, _NotStarted):
                    continue
                except EndpointError as exc:
                    if keep_going:
                        answers[futures[future]] = exc
                        done += 1
                        progress(phase, done, total)
                        continue
                    if failure is None:
                        failure = exc
                        for other in futures:
                            other.cancel()
                    continue
                done += 1
                progress(phase, done, total)
        except BaseException:
            stop.set()  # an interrupt or a bug: waiting retries give up, queued requests never start
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        if failure is not None:
            got = sum(a is not None for a in answers)
            kept = " (kept in the cache; rerun to resume)" if self.cache is not None and got else ""
            raise EndpointError(
                f"{failure.message}; {got} of {total} answers obtained{kept}",
                answers,
                failure.url,
                failure.status,
            )
        return answers  # type: ignore[return-value]

    def _ask_one(self, request: Request, key: str | None, stop: threading.Event, keep_going: bool = False) -> Answer:
        if stop.is_set():
            raise _NotStarted
        try:
            return self._attempts(request, key, stop)
        except EndpointError:
            if not keep_going:
                stop.set()
            raise
        except BaseException:
            stop.set()  # set here, in the worker, so its own next queued request does not start either
            raise

    def _attempts(self, request: Request, key: str | None, stop: threading.Event) -> Answer:
        params = self._params(request)
        attempt = 0
        while True:
            attempt += 1
            try:
                answer = self.transport.send(request.messages, params)
            except AttemptFailed as failed:
                last_try = not failed.retryable or attempt > self.retry.retries or stop.is_set()
                if not last_try:
                    wait = self.retry.delay(attempt, failed.retry_after)
                    self.on_event(
                        f"{self.url}: {failed.describe()}; retry {attempt}/{self.retry.retries} in {wait:.2f} s"
                    )
                    last_try = stop.wait(wait)
                if last_try:
                    tries = f"{attempt} attempt" + ("s" if attempt != 1 else "")
                    raise EndpointError(
                        f"request to {self.url} failed after {tries}; {failed.last()}",
                        url=self.url,
                        status=failed.status,
                    ) from None
                continue
            if self.cache is not None and key is not None:
                self.cache.put(key, self.spec.text, answer.stored())
            return answer
