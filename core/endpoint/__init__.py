"""Asking a language or vision-language model: one SPEC grammar, a cached, retrying, concurrent client.

    spec.py        openai:MODEL | cmd:"PROGRAM ARGS" | a baseline NAME; base URL and key resolution
    messages.py    Request, text / image (data URL) / video (timed frames) content parts
    client.py      Endpoint.ask_many: cache, bounded concurrency, retries, partial results on failure
    retry.py       backoff with jitter, Retry-After, which failures are retried
    transports.py  the openai package, a local program, a registered baseline
    cache.py       the SQLite response cache and its key
    parse.py       JSON / multiple-choice / yes-no answer parsers with parse errors kept
    baselines.py   the registry a method fills with its non-model baselines
Nothing here imports `openai` until a request is sent.
"""

from methodkit.core.endpoint.answer import Answer
from methodkit.core.endpoint.baselines import BaselineRegistry
from methodkit.core.endpoint.cache import ResponseCache, cache_key, default_cache_path
from methodkit.core.endpoint.client import Endpoint, EndpointError
from methodkit.core.endpoint.messages import Request, image_part, text_part, user_message, video_parts
from methodkit.core.endpoint.parse import Parsed, parse_choice, parse_json, parse_yes_no
from methodkit.core.endpoint.retry import RetryPolicy
from methodkit.core.endpoint.spec import ModelSpec, parse_spec, resolve_base_url

__all__ = [
    "Answer",
    "BaselineRegistry",
    "Endpoint",
    "EndpointError",
    "ModelSpec",
    "Parsed",
    "Request",
    "ResponseCache",
    "RetryPolicy",
    "cache_key",
    "default_cache_path",
    "image_part",
    "parse_choice",
    "parse_json",
    "parse_spec",
    "parse_yes_no",
    "resolve_base_url",
    "text_part",
    "user_message",
    "video_parts",
]
