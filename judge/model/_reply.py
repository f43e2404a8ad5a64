"""Replies are untrusted input: every field of a chat completion is validated before use.

A server (or a proxy, or a Batch API output file) can send anything with HTTP 200: usage
counts as strings, ``choices`` as an object, content as a number, JSON nested 100,000 levels
deep, 50 MB of text, the API key echoed in the response id. :func:`parse_chat_reply` turns
raw bytes into a :class:`Completion` or raises :class:`~judge.errors.ReplyError` with the reason,
which becomes an error row of that call (never a crash, never a cached answer). The same
pydantic models check Batch API output lines (:func:`completion_from_body`) and records read
back from the reply cache (:func:`cached_completion`).

Every string kept from a reply (content, refusal, ``id``, ``model``, ``system_fingerprint``)
has the API key removed before it can reach a file or a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from .._config import JudgeConfig
from .._errors import ReplyError
from .._io import nesting_exceeds
from .._validation import first_problem

REDACTED = "<redacted>"
_MAX_COUNT = 2**31 - 1
"""Largest token count believed (a 32-bit count): a hostile usage figure must not blow up
the spend or stop the run by budget on its own."""


def redact(text: str | None, secret: str | None) -> str | None:
    """Remove the API key from text that will be stored or shown."""
    if text is None or not secret:
        return text
    return text.replace(secret, REDACTED)


@dataclass(frozen=True)
class ReplyLimits:
    """Caps on one reply; the transports enforce ``max_bytes`` while reading."""

    max_bytes: int = 1_000_000
    max_depth: int = 64
    max_chars: int = 100_000

    @classmethod
    def from_config(cls, config: JudgeConfig) -> ReplyLimits:
        return cls(config.max_reply_bytes, config.max_reply_depth, config.max_reply_chars)


@dataclass
class Completion:
    """What a call returned, in the form stored in caches, run logs and judgments."""

    text: str | None
    finish_reason: str | None
    refusal: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    model: str | None = None
    response_id: str | None = None
    cached: bool = False
    system_fingerprint: str | None = None
    request_key: str | None = None
    """The ledger key of the request this answers."""

    def record(self) -> dict[str, Any]:
        data = {"text": self.text, "finish_reason": self.finish_reason, "refusal": self.refusal,
                "usage": dict(self.usage), "model": self.model,
                "response_id": self.response_id, "key": self.request_key}
        if self.system_fingerprint is not None:
            data["system_fingerprint"] = self.system_fingerprint
        return data

    @classmethod
    def from_record(cls, data: dict[str, Any], *, cached: bool = False) -> Completion:
        """A stored record (cache, run log) back as a completion, validated like a reply:
        :class:`~judge.errors.ReplyError` when a field has the wrong type."""
        try:
            record = _Record.model_validate(data)
        except ValidationError as exc:
            raise ReplyError(f"malformed stored reply: {_first_problem(exc)}") from None
        return cls(record.text, record.finish_reason, record.refusal, dict(record.usage),
                   record.model, record.response_id, cached, record.system_fingerprint)


# --- the chat.completion object, as far as the judge uses it ---------------------------------

class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class _TokenDetails(_Strict):
    cached_tokens: StrictInt | None = Field(None, ge=0, le=_MAX_COUNT)


class _Usage(_Strict):
    prompt_tokens: StrictInt | None = Field(None, ge=0, le=_MAX_COUNT)
    completion_tokens: StrictInt | None = Field(None, ge=0, le=_MAX_COUNT)
    prompt_tokens_details: _TokenDetails | None = None


class _Part(_Strict):
    """One part of a list-valued message content (``{"type": "text", "text": ...}``)."""

    type: Literal["text", "refusal"]
    text: StrictStr | None = None
    refusal: StrictStr | None = None


class _Message(_Strict):
    content: StrictStr | list[_Part] | None = None
    refusal: StrictStr | None = None


class _Choice(_Strict):
    message: _Message
    finish_reason: StrictStr | None = None


class _ChatCompletion(_Strict):
    id: StrictStr | None = None
    model: StrictStr | None = None
    system_fingerprint: StrictStr | None = None
    choices: list[_Choice] = Field(min_length=1)
    usage: _Usage | None = None


class _Record(_Strict):
    """A completion as stored by :meth:`Completion.record`."""

    text: StrictStr | None = None
    finish_reason: StrictStr | None = None
    refusal: StrictStr | None = None
    usage: dict[str, StrictInt] = Field(default_factory=dict)
    model: StrictStr | None = None
    response_id: StrictStr | None = None
    system_fingerprint: StrictStr | None = None


_JSON_TYPES = {"str": "a string", "int": "a number", "float": "a number", "bool": "a boolean",
               "NoneType": "null", "list": "an array", "dict": "an object"}


def _first_problem(exc: ValidationError) -> str:
    """The first validation problem as ``field: message``, naming the JSON type that was
    found but never the value (it may be huge or hold the key)."""
    problem = first_problem(exc)
    if problem.kind == "json_invalid":
        return f"the server's reply is not JSON ({problem.context.get('error', '?')})"
    where = problem.path or "the reply"
    if problem.union:  # say what was there instead of each option
        found = _JSON_TYPES.get(type(problem.value).__name__, "something else")
        return f"field '{where}': has the wrong type ({found})"
    more = f" (and {problem.more} more)" if problem.more > 0 else ""
    return f"field '{where}': {problem.message}{more}"


def _completion(reply: _ChatCompletion, limits: ReplyLimits, secret: str | None) -> Completion:
    choice = reply.choices[0]
    text: str | None
    refusal = choice.message.refusal
    content = choice.message.content
    if isinstance(content, list):
        texts = [p.text or "" for p in content if p.type == "text"]
        refusals = [p.refusal or "" for p in content if p.type == "refusal"]
        text = "".join(texts) if texts else None
        if refusals and not refusal:
            refusal = "".join(refusals)
    else:
        text = content
    for name, value in (("content", text), ("refusal", refusal)):
        if value is not None and len(value) > limits.max_chars:
            raise ReplyError(f"the reply's {name} has {len(value):,} characters, more than the "
                             f"cap of {limits.max_chars:,} (max_reply_chars)")
    usage = reply.usage or _Usage()
    details = usage.prompt_tokens_details or _TokenDetails()
    return Completion(
        text=redact(text, secret), finish_reason=redact(choice.finish_reason, secret),
        refusal=redact(refusal, secret),
        usage={"prompt_tokens": usage.prompt_tokens or 0,
               "completion_tokens": usage.completion_tokens or 0,
               "cached_prompt_tokens": details.cached_tokens or 0},
        model=redact(reply.model, secret), response_id=redact(reply.id, secret),
        system_fingerprint=redact(reply.system_fingerprint, secret))


def _not_completion(exc: ValidationError, secret: str | None) -> ReplyError:
    problem = _first_problem(exc)
    first = first_problem(exc)
    if first.kind == "model_type" and not first.location:
        problem = "the server's reply is not a chat completion object"
    elif first.kind != "json_invalid":
        problem = f"the server's reply is not a usable chat completion: {problem}"
    return ReplyError(redact(problem, secret) or "")


def parse_chat_reply(raw: bytes, *, limits: ReplyLimits | None = None,
                     secret: str | None = None, request_key: str | None = None,
                     cached: bool = False) -> Completion:
    """Validate the raw body of an HTTP 200 chat-completions reply (fresh, or read back from
    where it was recorded) and return it as a :class:`Completion` with the key removed,
    carrying its ledger ``request_key`` and whether it was ``cached`` (not paid by this run).

    Raises :class:`~judge.errors.ReplyError` naming the first problem: too large, nested too deep,
    not JSON, a field of the wrong type, content too long.
    """
    limits = limits or ReplyLimits()
    if len(raw) > limits.max_bytes:
        raise ReplyError(f"the reply has {len(raw):,} bytes, more than the cap of "
                         f"{limits.max_bytes:,} (max_reply_bytes)")
    if nesting_exceeds(raw, limits.max_depth) is not None:
        raise ReplyError(f"the reply's JSON is nested deeper than {limits.max_depth} levels "
                         "(max_reply_depth)")
    if not raw.strip():
        raise ReplyError("the server's reply is not JSON (the body is empty)")
    try:
        reply = _ChatCompletion.model_validate_json(raw)
    except ValidationError as exc:
        raise _not_completion(exc, secret) from None
    completion = _completion(reply, limits, secret)
    completion.request_key, completion.cached = request_key, cached
    return completion


def completion_from_body(body: Any, *, limits: ReplyLimits | None = None,
                         secret: str | None = None) -> Completion:
    """The same checks for an already parsed body (a Batch API output line's
    ``response.body``; its line was read with the depth limit)."""
    limits = limits or ReplyLimits()
    if not isinstance(body, dict):
        raise ReplyError("the reply is not a chat completion object")
    try:
        reply = _ChatCompletion.model_validate(body)
    except ValidationError as exc:
        raise _not_completion(exc, secret) from None
    return _completion(reply, limits, secret)


def cached_completion(record: Any, limits: ReplyLimits | None = None) -> Completion | None:
    """A cache record as a completion, or None when it is not a valid one (a record written
    by an older version before replies were checked, or a damaged entry): such a record is
    never served as an answer."""
    limits = limits or ReplyLimits()
    if not isinstance(record, dict):
        return None
    try:
        completion = Completion.from_record(record, cached=True)
    except ReplyError:
        return None
    for value in (completion.text, completion.refusal):
        if value is not None and len(value) > limits.max_chars:
            return None
    return completion
