"""Endpoint against a real chat-completions server on 127.0.0.1: wire format, cache, retries,
backoff, Retry-After, timeouts, the concurrency bound, the error line and partial results."""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest

from methodkit.core.endpoint import Endpoint, EndpointError, Request, ResponseCache, RetryPolicy, parse_spec
from methodkit.core.endpoint.retry import parse_retry_after

FAST = dict(base=0.001, cap=0.002)  # tiny backoff: retries are counted, not waited for


def make(server, *, cache=None, retries=3, timeout=5.0, concurrency=2, params=None, events=None, **policy):
    return Endpoint(
        parse_spec("openai:test-model"),
        base_url=server.url,
        timeout=timeout,
        retry=RetryPolicy(retries=retries, rng=random.Random(0), **{**FAST, **policy}),
        concurrency=concurrency,
        cache=cache,
        params=params,
        on_event=events.append if events is not None else None,
    )


def test_answer_and_the_request_on_the_wire(chat_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wire-test")
    chat_server.script(chat_server.reply("(B)"))
    endpoint = make(chat_server, params={"temperature": 0.2, "seed": 7, "max_tokens": 16, "top_k": 5})
    image = np.zeros((4, 4, 3), dtype=np.uint8)
    answer = endpoint.ask(Request.user("Which box falls first?", image, system="Be brief.", seed=8))
    assert answer.text == "(B)" and answer.model == "test-model" and answer.finish_reason == "stop"
    assert not answer.cached and answer.usage["total_tokens"] == 4
    body = chat_server.bodies[0]
    assert body["model"] == "test-model"
    assert (body["temperature"], body["seed"], body["max_tokens"], body["top_k"]) == (0.2, 8, 16, 5)
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    parts = body["messages"][1]["content"]
    assert parts[0] == {"type": "text", "text": "Which box falls first?"}
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert chat_server.headers[0]["authorization"] == "Bearer sk-wire-test"


def test_answers_come_back_in_request_order(chat_server):
    texts = [f"question {i}" for i in range(7)]
    answers = make(chat_server, concurrency=3).ask_many([Request.user(t) for t in texts])
    assert [a.text for a in answers] == texts


def test_second_run_is_served_from_the_cache_and_no_cache_asks_again(chat_server, tmp_path):
    requests = [Request.user(f"q{i}") for i in range(4)]
    first = make(chat_server, cache=ResponseCache(tmp_path / "c.sqlite")).ask_many(requests)
    assert chat_server.count == 4 and not any(a.cached for a in first)
    again = make(chat_server, cache=ResponseCache(tmp_path / "c.sqlite")).ask_many(requests)
    assert chat_server.count == 4, "a cached answer must cost no request"
    assert all(a.cached for a in again) and [a.text for a in again] == [a.text for a in first]
    make(chat_server, cache=None).ask_many(requests)  # --no-cache
    assert chat_server.count == 8


def test_a_changed_parameter_misses_the_cache(chat_server, tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    make(chat_server, cache=cache, params={"temperature": 0}).ask(Request.user("q"))
    make(chat_server, cache=cache, params={"temperature": 0.7}).ask(Request.user("q"))
    assert chat_server.count == 2


@pytest.mark.parametrize("code", [500, 502, 503, 429, 408])
def test_retryable_statuses_are_retried_until_an_answer(chat_server, code):
    s = chat_server
    s.script(s.status(code), s.status(code), s.reply("ok"))
    events: list[str] = []
    assert make(s, events=events).ask(Request.user("q")).text == "ok"
    assert s.count == 3
    assert len(events) == 2 and f"status {code}" in events[0] and "retry 1/3" in events[0]


def test_a_client_error_is_not_retried(chat_server):
    chat_server.script(chat_server.status(400, message="bad messages"))
    with pytest.raises(EndpointError) as info:
        make(chat_server).ask(Request.user("q"))
    assert chat_server.count == 1
    assert "failed after 1 attempt; last status 400 (bad messages)" in info.value.message


def test_malformed_bodies_are_retried_then_reported(chat_server):
    s = chat_server
    s.script(s.malformed(), s.malformed(b'{"choices": []}'), s.reply("fine"))
    assert make(s).ask(Request.user("q")).text == "fine" and s.count == 3
    s.script(*[s.malformed()] * 3)
    with pytest.raises(EndpointError, match=r"last status 200 \(malformed body: not JSON\)"):
        make(s, retries=2).ask(Request.user("q"))


def test_after_the_retries_one_line_names_the_url_and_last_status(chat_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-shown")
    chat_server.responder = lambda body: chat_server.status(503, message="overloaded; key sk-never-shown")
    with pytest.raises(EndpointError) as info:
        make(chat_server, retries=2).ask(Request.user("q"))
    error = info.value
    assert chat_server.count == 3  # the first attempt and two retries
    assert error.exit_code == 1 and error.status == 503
    assert "\n" not in error.message
    assert error.message.startswith(f"request to {chat_server.url}/chat/completions failed after 3 attempts")
    assert "last status 503" in error.message and "0 of 1 answers obtained" in error.message
    assert "sk-never-shown" not in error.message  # a server echoing the key does not leak it


def test_backoff_grows_exponentially_with_jitter_and_a_cap():
    policy = RetryPolicy(base=0.1, cap=0.5, rng=random.Random(1))
    delays = [policy.delay(k) for k in range(1, 7)]
    steps = [0.1, 0.2, 0.4, 0.5, 0.5, 0.5]
    for delay, step in zip(delays, steps):
        assert step / 2 <= delay <= step
    assert len(set(delays)) == len(delays)  # jittered, not a fixed ladder
    assert policy.delay(3, retry_after=2.5) == 2.5
    assert RetryPolicy(max_retry_after=1.0).delay(1, retry_after=60) == 1.0


def test_retry_after_header_forms():
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # a date in the past
    assert parse_retry_after({}) is None and parse_retry_after({"retry-after": "soon"}) is None


def test_waits_between_attempts_follow_the_backoff(chat_server):
    s = chat_server
    s.script(s.status(429), s.status(500), s.status(503), s.reply("ok"))
    make(s, base=0.08, cap=1.0).ask(Request.user("q"))
    gaps = np.diff(s.arrivals)
    assert len(gaps) == 3
    for gap, step in zip(gaps, [0.08, 0.16, 0.32]):
        assert gap >= step / 2 - 0.005, (gaps, step)


def test_retry_after_is_honoured(chat_server):
    s = chat_server
    s.script(s.status(429, retry_after="1"), s.reply("ok"))
    assert make(s).ask(Request.user("q")).text == "ok"  # the backoff alone would wait 2 ms
    assert s.arrivals[1] - s.arrivals[0] >= 0.95


def test_429_without_retry_after_uses_the_backoff(chat_server):
    s = chat_server
    s.script(s.status(429), s.reply("ok"))
    make(s, base=0.001, cap=0.001).ask(Request.user("q"))
    assert s.arrivals[1] - s.arrivals[0] < 0.8  # not the 1 s a Retry-After: 1 costs


def test_a_slow_reply_times_out_and_is_retried(chat_server):
    s = chat_server
    s.script(s.slow(3.0, "too late"), s.reply("in time"))
    events: list[str] = []
    assert make(s, timeout=1.0, events=events).ask(Request.user("q")).text == "in time"
    assert s.count == 2 and "timed out after 1 s" in events[0]


def test_timeouts_on_every_attempt_end_in_the_error_line(chat_server):
    s = chat_server
    s.script(s.slow(1.0), s.slow(1.0))
    with pytest.raises(EndpointError) as info:
        make(s, timeout=0.2, retries=1).ask(Request.user("q"))
    assert "failed after 2 attempts; last attempt: timed out after 0.2 s" in info.value.message
    assert info.value.status is None


def test_a_refused_connection_is_retried_and_named():
    endpoint = Endpoint(
        parse_spec("openai:m"), base_url="http://127.0.0.1:9/v1", retry=RetryPolicy(retries=1, **FAST), timeout=2
    )
    with pytest.raises(EndpointError, match=r"http://127.0.0.1:9/v1/chat/completions failed after 2 attempts"):
        endpoint.ask(Request.user("q"))


def test_no_more_than_concurrency_requests_are_in_flight(chat_server):
    s = chat_server
    s.responder = lambda body: s.reply("x", delay=0.15)
    make(s, concurrency=3).ask_many([Request.user(f"q{i}") for i in range(10)])
    assert s.count == 10
    assert s.max_in_flight == 3


def test_concurrency_one_is_sequential(chat_server):
    s = chat_server
    s.responder = lambda body: s.reply("x", delay=0.05)
    make(s, concurrency=1).ask_many([Request.user(f"q{i}") for i in range(4)])
    assert s.max_in_flight == 1


def test_a_failure_keeps_every_answer_obtained_and_the_rerun_asks_only_for_the_rest(chat_server, tmp_path):
    s = chat_server
    broken = threading.Event()
    broken.set()

    def respond(body):
        text = body["messages"][-1]["content"]
        if text == "q3" and broken.is_set():
            return s.status(500, message="model crashed")
        return s.reply(text.upper())

    s.responder = respond
    requests = [Request.user(f"q{i}") for i in range(6)]
    with pytest.raises(EndpointError) as info:
        make(s, cache=ResponseCache(tmp_path / "c.sqlite"), concurrency=1, retries=1).ask_many(requests)
    partial = info.value.partial
    assert [a.text if a else None for a in partial] == ["Q0", "Q1", "Q2", None, None, None]
    assert "3 of 6 answers obtained (kept in the cache; rerun to resume)" in info.value.message
    assert s.count == 5  # q0-q2, then q3 twice; q4 and q5 never started

    broken.clear()
    answers = make(s, cache=ResponseCache(tmp_path / "c.sqlite"), concurrency=1).ask_many(requests)
    assert [a.text for a in answers] == ["Q0", "Q1", "Q2", "Q3", "Q4", "Q5"]
    assert [a.cached for a in answers] == [True, True, True, False, False, False]
    assert s.count == 8


def test_progress_reports_cached_and_new_answers(chat_server, tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    make(chat_server, cache=cache).ask(Request.user("q0"))
    seen = []
    make(chat_server, cache=cache).ask_many(
        [Request.user(f"q{i}") for i in range(3)], progress=lambda phase, done, total: seen.append((done, total))
    )
    assert seen[0] == (1, 3) and seen[-1] == (3, 3)


def test_a_request_for_good_failed_stops_the_others_waiting_to_retry(chat_server):
    s = chat_server

    def respond(body):
        if body["messages"][-1]["content"] == "bad":
            step = s.status(400, message="bad request")
            step.delay = 0.5  # fail for good only once the other request is waiting out its Retry-After
            return step
        return s.status(429, retry_after="30")

    s.responder = respond
    started = time.monotonic()
    with pytest.raises(EndpointError, match="last status 400"):
        make(s, concurrency=2, retries=3).ask_many([Request.user("busy"), Request.user("bad")])
    assert time.monotonic() - started < 10  # not the 30 s the 429 asked for
