"""The body and parameter checks: a ``receive`` that counts and times the body, and the
values refused in a JSON body or an integer parameter."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from ...._io import MAX_JSON_DEPTH, nesting_exceeds
from ...._tasks import within
from ._refusal import Message, Receive, Refusal

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
"""What every integer column of both databases holds (SQLite: 64 bits; Postgres BIGINT)."""
MAX_JSON_VALUES = 110_000
"""The most values a JSON body may hold: the largest a route takes is a job's 100,000 dialogue
ids (``options.dialogue_ids``) with its other fields; a 2 MB body of a million numbers is
refused (413) before it is parsed into a hundred times its size."""


@dataclass
class BodyReader:
    """``receive`` for the app: counts the body against ``limit`` and times it (``idle``
    seconds between parts, ``total`` for all of it). Once the body is complete, ``receive``
    is passed through untouched (an event stream waits on it for the client to leave)."""

    receive: Receive
    limit: int
    idle: float
    total: float
    seen: int = 0
    done: bool = False
    failure: Refusal | None = None
    replay: list[Message] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    async def __call__(self) -> Message:
        if self.replay:
            return self.replay.pop(0)
        if self.done:
            return await self.receive()
        left = self.total - (time.monotonic() - self.started)
        try:
            message = await within(self.receive(), max(0.0, min(self.idle, left)))
        except TimeoutError:
            self.failure = Refusal(408, "the request body came too slowly (the server waits "
                                   f"{self.idle:g} s between parts, {self.total:g} s in all)")
            raise self.failure from None
        if message["type"] != "http.request":
            self.done = True
            return message
        self.seen += len(message.get("body", b""))
        if self.seen > self.limit:
            self.failure = Refusal(413, "the request body is larger than the server's limit "
                                   f"of {megabytes(self.limit)}")
            raise self.failure
        if not message.get("more_body", False):
            self.done = True
        return message

    async def read_all(self) -> bytes:
        """The whole body (it is within ``limit``); the app is then given it again."""
        parts = []
        while not self.done:
            message = await self()
            if message["type"] != "http.request":
                break
            parts.append(message.get("body", b""))
        body = b"".join(parts)
        self.replay = [{"type": "http.request", "body": body, "more_body": False}]
        return body


def megabytes(count: int) -> str:
    return f"{count / (1024 * 1024):g} MB"


class _Constant:
    def __init__(self, text: str) -> None:
        self.text = text


def json_problem(body: bytes) -> tuple[str, str | None] | None:
    """Why a JSON body is refused, with the field (a JSON path): NaN, Infinity, an integer
    outside 64 bits, nesting past the depth limit. None when it is fine or not JSON at all
    (the app says what is wrong with that)."""
    if nesting_exceeds(body, MAX_JSON_DEPTH) is not None:
        return f"the JSON is nested deeper than {MAX_JSON_DEPTH} levels", None
    try:
        value = json.loads(body, parse_constant=_Constant)
    except (ValueError, RecursionError):
        return None
    # depth first, in document order, holding one iterator per open container (not a path
    # string per value: that cost a hundred bytes for each of a million numbers)
    keys: list[Any] = []
    open_: list[Iterator[tuple[Any, Any]]] = [iter([(None, value)])]
    while open_:
        for key, item in open_[-1]:
            problem = _value_problem(item)
            if problem is not None:
                return problem, _json_path([*keys, key][1:]) or None
            if isinstance(item, dict | list):
                keys.append(key)
                open_.append(iter(item.items() if isinstance(item, dict) else enumerate(item)))
                break
        else:
            open_.pop()
            if keys:
                keys.pop()
    return None


def _value_problem(item: Any) -> str | None:
    if isinstance(item, _Constant):
        return f"{item.text} is not a number this service accepts (NaN and Infinity are refused)"
    if isinstance(item, int) and not isinstance(item, bool) and \
            not INT64_MIN <= item <= INT64_MAX:
        return "an integer outside what the database holds (64 bits)"
    if isinstance(item, float) and not math.isfinite(item):
        return "a number too large to hold (it reads as Infinity)"
    return None


def _json_path(keys: list[Any]) -> str:
    """``a.b[1]`` from the keys and indexes leading to a value."""
    path = ""
    for key in keys:
        path += f"[{key}]" if isinstance(key, int) else (f".{key}" if path else str(key))
    return path


def param_problem(int_params: tuple[tuple[str, str], ...], query: str,
                  path_params: dict[str, Any]) -> Refusal | None:
    """An integer query or path parameter beyond 64 bits (a database would overflow);
    ``int_params`` are the route's (where, name) pairs, where is ``query`` or ``path``."""
    values = dict(parse_qsl(query, keep_blank_values=True))
    for where, name in int_params:
        raw = values.get(name) if where == "query" else path_params.get(name)
        text = str(raw).strip() if raw is not None else ""
        if re.fullmatch(r"[+-]?\d+", text) and not INT64_MIN <= int(text) <= INT64_MAX:
            return Refusal(422, f"Input should be a whole number from {INT64_MIN} to "
                           f"{INT64_MAX}", field=name)
    return None
