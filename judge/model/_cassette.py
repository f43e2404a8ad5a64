"""Recorded HTTP traffic with a real OpenAI-compatible server, for replay without a key.

A cassette is a JSON file of request/response pairs. Requests are matched on method, the API
path (``/chat/completions``, whatever the base URL) and the JSON body; headers are never
stored except the content type, and anything that looks like an API key is scrubbed before
writing. :func:`replay_transport` serves a cassette to the judge at run time (the README's example
job); tests serve the same cassette through respx.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from .._config import DEFAULT_BASE_URL, JudgeConfig, public_url
from .._digest import canonical_json, file_digest
from .._errors import CassetteMiss, InputError, OptionError
from .._io import read_json, write_text

_API_PATH = re.compile(r"/(chat/completions|completions|embeddings|files|batches)(/.*)?$")
# Key-shaped tokens: "sk-" + 20 or more key characters, not inside a word ("task-oriented").
_KEY_LIKE = re.compile(r"(?<![A-Za-z0-9_-])(sk-[A-Za-z0-9_\-]{20,})|(Bearer\s+[A-Za-z0-9_\-.]{8,})")
_KEPT_RESPONSE_HEADERS = ("content-type",)


def api_path(url: httpx.URL | str) -> str:
    """The API part of a URL: ``http://h:1/v1/chat/completions`` → ``/chat/completions``."""
    path = httpx.URL(str(url)).path
    match = _API_PATH.search(path)
    return match.group(0) if match else path


def scrub(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """Replace the given secrets and anything shaped like an API key or bearer token."""
    if isinstance(value, str):
        for secret in secrets:
            if secret:
                value = value.replace(secret, "<scrubbed>")
        return _KEY_LIKE.sub("<scrubbed>", value)
    if isinstance(value, list):
        return [scrub(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: scrub(v, secrets) for k, v in value.items()}
    return value


def _body_json(content: bytes) -> Any:
    if not content:
        return None
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", errors="replace")


@dataclass
class Cassette:
    """Interactions in recording order; lookups match method, API path and JSON body."""

    path: Path
    interactions: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """Exact strings (the API key) removed from everything recorded."""

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        data = read_json(path)
        if not isinstance(data, dict) or not isinstance(data.get("interactions"), list):
            raise InputError("a cassette is a JSON object with an 'interactions' list", path=path)
        for n, item in enumerate(data["interactions"]):
            request = item.get("request") if isinstance(item, dict) else None
            response = item.get("response") if isinstance(item, dict) else None
            problem = ("request" if not isinstance(request, dict)
                       or not isinstance(request.get("method"), str)
                       or not isinstance(request.get("path"), str) else
                       "response" if not isinstance(response, dict)
                       or type(response.get("status_code")) is not int else None)
            if problem is not None:
                raise InputError(f"each interaction needs a '{problem}' object (request: method, "
                                 "path, body; response: status_code, body)", path=path,
                                 field=f"interactions[{n}].{problem}")
        return cls(Path(path), data["interactions"], str(data.get("source", "")))

    @staticmethod
    def _key(method: str, path: str, body: Any) -> str:
        return f"{method.upper()} {path} {canonical_json(body)}"

    def _index(self) -> dict[str, dict[str, Any]]:
        index: dict[str, dict[str, Any]] = {}
        for item in self.interactions:
            request = item["request"]
            key = self._key(request["method"], request["path"], request.get("body"))
            index.setdefault(key, item["response"])
        return index

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.interactions)

    def respond(self, request: httpx.Request) -> httpx.Response:
        """The recorded response to ``request``; :class:`CassetteMiss` when there is none."""
        if not hasattr(self, "_lookup"):
            self._lookup = self._index()
        key = self._key(request.method, api_path(request.url), _body_json(request.content))
        found = self._lookup.get(key)
        if found is None:
            raise CassetteMiss(
                f"request not in cassette {self.path}: {request.method} {api_path(request.url)} "
                "(prompts, options or data differ from the recording; re-record as the README "
                "says)")
        return response_from_record(found)

    def add(self, request: httpx.Request, response: httpx.Response) -> None:
        self.interactions.append({
            "request": {"method": request.method, "path": api_path(request.url),
                        "body": scrub(_body_json(request.content), self.secrets)},
            "response": {"status_code": response.status_code,
                         "headers": {k: v for k, v in response.headers.items()
                                     if k.lower() in _KEPT_RESPONSE_HEADERS},
                         "body": scrub(_body_json(response.content), self.secrets)},
        })

    def save(self) -> None:
        payload = {"source": self.source, "interactions": self.interactions}
        write_text(self.path, json.dumps(payload, indent=1, ensure_ascii=False) + "\n")


def response_from_record(record: dict[str, Any]) -> httpx.Response:
    body = record.get("body")
    content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    headers = dict(record.get("headers") or {"content-type": "application/json"})
    return httpx.Response(record["status_code"], headers=headers, content=content)


def replay_transport(cassette: Cassette) -> httpx.MockTransport:
    """An httpx transport that answers only from the cassette."""
    return httpx.MockTransport(cassette.respond)


class RecordingTransport(httpx.AsyncBaseTransport):
    """Pass requests to a real server and add each exchange to a cassette."""

    def __init__(self, cassette: Cassette, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.cassette = cassette
        self.inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        # the bytes as sent (still compressed): the judge's transport decodes them under its
        # size cap, as it does for live replies
        content = b"".join([chunk async for chunk in response.aiter_raw()])
        await response.aclose()
        copy = httpx.Response(response.status_code, headers=response.headers, content=content,
                              request=request)
        self.cassette.add(request, copy)
        return copy

    async def aclose(self) -> None:
        await self.inner.aclose()


def replay_base_url(cassette: str | Path, base_url: str | None = None) -> str | None:
    """The endpoint a replayed run names, and so keys its cached replies by: a host that never
    resolves, unique to the cassette's bytes. A reply cached from one recording then never
    answers for a re-recorded cassette, nor for a live run of the same model. The path stays
    the one requested (the cassette matches on it). None when the file cannot be read (loading
    the cassette reports that)."""
    try:
        digest = file_digest(cassette)[:16]
    except OSError:
        return None
    return f"http://replay-{digest}.invalid{urlsplit(base_url or DEFAULT_BASE_URL).path}"


def cassette_client(config: JudgeConfig, *, replay: str | Path | None = None,
                    record: str | Path | None = None,
                    ) -> tuple[httpx.AsyncClient | None, Cassette | None]:
    """The HTTP client of a replayed or recorded run (``None`` for a plain live run) and the
    cassette to save after a recording."""
    if replay and record:
        raise OptionError("--replay and --record exclude each other")
    if replay:
        return httpx.AsyncClient(transport=replay_transport(Cassette.load(replay))), None
    if record:
        cassette = Cassette(Path(record), source=f"{public_url(config.endpoint)} "
                            f"model={config.model}",
                            secrets=(config.secret or "",))
        return httpx.AsyncClient(transport=RecordingTransport(cassette),
                                 timeout=config.timeout), cassette
    return None, None
