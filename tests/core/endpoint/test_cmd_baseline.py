"""cmd: (a local program, JSON on stdin and stdout) and registered baselines."""

from __future__ import annotations

import json
import shlex
import sys
import textwrap

import pytest

from methodkit.core.endpoint import BaselineRegistry, Endpoint, EndpointError, Request, ResponseCache, parse_spec
from methodkit.core.endpoint.retry import RetryPolicy
from methodkit.core.errors import UsageError

PROGRAM = textwrap.dedent(
    """
    import json, sys, time
    request = json.loads(sys.stdin.readline())
    text = request["messages"][-1]["content"]
    if text == "crash":
        print("model weights not found", file=sys.stderr)
        sys.exit(3)
    if text == "sleep":
        time.sleep(5)
    if text == "garbage":
        print("not json")
        sys.exit(0)
    if text == "completion-shaped":
        print(json.dumps({"choices": [{"message": {"content": "from choices"}, "finish_reason": "stop"}]}))
        sys.exit(0)
    with open(sys.argv[1], "a") as log:
        log.write(json.dumps(request) + "\\n")
    print(json.dumps({"text": text[::-1], "model": "reverser"}))
    """
)


@pytest.fixture
def program(tmp_path):
    script = tmp_path / "reverser.py"
    script.write_text(PROGRAM)
    log = tmp_path / "requests.jsonl"
    spec = parse_spec(f"cmd:{shlex.join([sys.executable, str(script), str(log)])}")
    return spec, log


def _make(spec, **kwargs):
    kwargs.setdefault("retry", RetryPolicy(retries=1, base=0.001, cap=0.001))
    return Endpoint(spec, **kwargs)


def test_cmd_gets_one_json_request_and_its_answer_is_read(program):
    spec, log = program
    answer = _make(spec, params={"temperature": 0, "seed": 3}).ask(Request.user("hello"))
    assert answer.text == "olleh" and answer.model == "reverser"
    (request,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert request["messages"] == [{"role": "user", "content": "hello"}]
    assert (request["temperature"], request["seed"]) == (0, 3)


def test_cmd_may_answer_in_the_chat_completions_shape(program):
    spec, _ = program
    assert _make(spec).ask(Request.user("completion-shaped")).text == "from choices"


def test_cmd_answers_are_cached(program, tmp_path):
    spec, log = program
    requests = [Request.user("abc"), Request.user("xyz")]
    for _ in range(2):
        answers = _make(spec, cache=ResponseCache(tmp_path / "c.sqlite")).ask_many(requests)
    assert [a.text for a in answers] == ["cba", "zyx"] and all(a.cached for a in answers)
    assert len(log.read_text().splitlines()) == 2


def test_a_failing_program_is_one_line_naming_it_and_its_last_stderr_line(program):
    spec, _ = program
    with pytest.raises(EndpointError) as info:
        _make(spec).ask(Request.user("crash"))
    message = info.value.message
    assert message.startswith(f"request to cmd:{spec.name} failed after 1 attempt")  # not retried
    assert "last status exit 3 (model weights not found)" in message


def test_a_program_answering_garbage_is_reported(program):
    spec, _ = program
    with pytest.raises(EndpointError, match="stdout is not one JSON object"):
        _make(spec).ask(Request.user("garbage"))


def test_a_slow_program_times_out(program):
    spec, _ = program
    with pytest.raises(EndpointError, match="failed after 2 attempts; last attempt: timed out after 0.5 s"):
        _make(spec, timeout=0.5).ask(Request.user("sleep"))


def test_a_missing_program_is_a_usage_error():
    with pytest.raises(UsageError, match="program 'no-such-model-program' not found"):
        Endpoint(parse_spec("cmd:no-such-model-program --x")).ask(Request.user("q"))


BASELINES = BaselineRegistry()


@BASELINES.register("always-a", "answers (A)")
def _always_a(messages, params):
    return "(A)"


@BASELINES.register("echo-seed")
def _echo_seed(messages, params):
    return f"{messages[-1]['content']} seed={params.get('seed')}"


def test_a_registered_baseline_answers_without_a_server(tmp_path):
    spec = parse_spec("always-a", BASELINES)
    endpoint = Endpoint(spec, baselines=BASELINES, cache=ResponseCache(tmp_path / "c.sqlite"))
    assert [a.text for a in endpoint.ask_many([Request.user("q1"), Request.user("q2")])] == ["(A)", "(A)"]
    assert endpoint.cache is None  # a local function is not worth a disk cache
    echo = Endpoint(parse_spec("echo-seed", BASELINES), baselines=BASELINES, params={"seed": 5})
    assert echo.ask(Request.user("q")).text == "q seed=5"
    assert BASELINES.help["always-a"] == "answers (A)"


def test_a_lazy_baseline_entry_is_imported_on_use():
    registry = BaselineRegistry({"upper": "operator:itemgetter"})
    assert registry.resolve("upper").__name__ == "itemgetter"
    assert not isinstance(registry["upper"], str)  # resolved once, then kept


def test_a_baseline_that_raises_stops_the_queue():
    calls = []
    registry = BaselineRegistry()

    @registry.register("fragile")
    def _fragile(messages, params):
        calls.append(messages[-1]["content"])
        if messages[-1]["content"] == "bad":
            raise ValueError("baseline bug")
        return "ok"

    endpoint = Endpoint(parse_spec("fragile", registry), baselines=registry, concurrency=1)
    with pytest.raises(ValueError, match="baseline bug"):
        endpoint.ask_many([Request.user(t) for t in ("a", "bad", "c", "d")])
    assert calls == ["a", "bad"]


def test_keep_going_leaves_the_failure_in_its_slot_and_asks_the_rest(program):
    spec, log = program
    endpoint = _make(spec, concurrency=1)
    answers = endpoint.ask_many([Request.user("crash"), Request.user("abc"), Request.user("de")], keep_going=True)
    assert isinstance(answers[0], EndpointError) and "model weights not found" in answers[0].message
    assert [a.text for a in answers[1:]] == ["cba", "ed"]
    with pytest.raises(EndpointError):  # the default still stops at the first failure
        endpoint.ask_many([Request.user("crash"), Request.user("fg")])
    assert len(log.read_text().splitlines()) == 2
