"""An answer from a model, and reading one out of a chat-completions response body."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class Answer:
    """The text a model answered. `cached` says it came from the response cache without a request.
    `logprobs`: the top log-probabilities of the first answer token ({token: logprob}) when the request
    asked for them (params logprobs/top_logprobs) and the server returned them."""

    text: str
    model: str | None = None
    finish_reason: str | None = None
    usage: dict | None = None
    cached: bool = False
    logprobs: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def stored(self) -> dict:
        """What the cache keeps (everything but the `cached` flag)."""
        record = self.to_dict()
        record.pop("cached")
        return record

    @classmethod
    def from_stored(cls, record: dict) -> Answer:
        known = {f.name for f in fields(cls)}  # a cache written by another version may hold more
        return cls(**{k: v for k, v in record.items() if k in known and k != "cached"}, cached=True)


class MalformedBody(ValueError):
    """The body is not a chat completion; the message says what is wrong with it."""


def answer_from_completion(body) -> Answer:
    """Answer from a parsed chat-completions body ({"choices": [{"message": {"content": ...}}], ...})."""
    if not isinstance(body, dict):
        raise MalformedBody(f"expected a JSON object, got {type(body).__name__}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedBody("no choices in the response")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise MalformedBody("choices[0] has no message")
    content = message.get("content")
    if isinstance(content, list):  # some servers return content parts even for text
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if content is not None and not isinstance(content, str):
        raise MalformedBody(f"message content is {type(content).__name__}, not text")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else None
    model = body.get("model") if isinstance(body.get("model"), str) else None
    reason = choices[0].get("finish_reason")
    return Answer(
        content or "", model, reason if isinstance(reason, str) else None, usage, logprobs=_first_top(choices[0])
    )


def _first_top(choice: dict) -> dict | None:
    """{token: logprob} of the first token's top_logprobs in a chat-completions choice, else None."""
    content = (choice.get("logprobs") or {}).get("content") if isinstance(choice.get("logprobs"), dict) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        return None
    top = content[0].get("top_logprobs") or [content[0]]
    out = {t["token"]: float(t["logprob"]) for t in top if isinstance(t, dict) and "token" in t and "logprob" in t}
    return out or None
