"""A model endpoint that answers from cassettes: try the service without a key.

``dst-judge serve --replay cassettes/`` gives the service an endpoint whose transport is a
:class:`ReplayTransport` over every cassette of a folder (or one file). It answers exactly the
recorded requests, matched as ``--replay`` matches them (method, API path, JSON body). A request
nobody recorded gets an HTTP 400 whose message names it (path, model, body digest, the end of
its last message): the model client turns that into an error row for the turn, so a replayed
job never holds a verdict the recorded model did not give.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._errors import InputError
from .._io import plural
from ._cassette import Cassette, _body_json, api_path, response_from_record
from ._transport import RawResponse

REPLAY_BASE_URL = "http://replay.invalid/v1"
"""The base URL of a replay endpoint: a name that never resolves (RFC 2606), so nothing can
leave the machine, and a cache key of its own (its replies never mix with a real server's)."""

MISS_STATUS = 400
"""What an unrecorded request answers: a client error that is neither retried nor fatal to the
run, so it becomes an error row for its turn."""


def cassette_files(source: str | Path) -> list[Path]:
    """The cassettes of ``source``: the file itself, or every ``*.json`` of the folder (sorted,
    so the first recording of a request wins the same way every time)."""
    path = Path(source)
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(p for p in path.glob("*.json") if p.is_file())
        if not found:
            raise InputError("no cassette (*.json) in this folder", path=path)
        return found
    raise InputError("no cassette file or folder here", path=path)


class ReplayTransport:
    """A :class:`judge.model.Transport` that answers from cassettes, never from the network."""

    def __init__(self, source: str | Path) -> None:
        self.source = Path(source)
        self.files = cassette_files(source)
        self._lookup: dict[str, tuple[dict[str, Any], str]] | None = None
        self._models: frozenset[str] = frozenset()
        self._lock = threading.Lock()

    def _index(self) -> dict[str, tuple[dict[str, Any], str]]:
        """Request key → (recorded response, cassette name), loaded on the first request."""
        with self._lock:
            if self._lookup is None:
                lookup: dict[str, tuple[dict[str, Any], str]] = {}
                models: set[str] = set()
                for file in self.files:
                    cassette = Cassette.load(file)
                    for key, response in cassette._index().items():
                        lookup.setdefault(key, (response, file.name))
                    for item in cassette:
                        body = item["request"].get("body")
                        if isinstance(body, dict) and isinstance(body.get("model"), str):
                            models.add(body["model"])
                self._lookup, self._models = lookup, frozenset(models)
            return self._lookup

    @property
    def models(self) -> frozenset[str]:
        """The models the recorded requests asked for: a request for any other is answered
        by no cassette (the service refuses such a job when it is submitted)."""
        self._index()
        return self._models

    @property
    def recorded(self) -> int:
        """How many distinct requests the cassettes answer."""
        return len(self._index())

    async def post(self, url: str, content: bytes, headers: Mapping[str, str]) -> RawResponse:
        body = _body_json(content)
        path = api_path(url)
        found = self._index().get(Cassette._key("POST", path, body))
        if found is None:
            return self._miss(path, body, content)
        reply = response_from_record(found[0])
        return RawResponse(reply.status_code, reply.headers, reply.content)

    def _miss(self, path: str, body: Any, content: bytes) -> RawResponse:
        model = body.get("model") if isinstance(body, dict) else None
        digest = hashlib.sha256(content).hexdigest()[:12]
        # within the 300 characters a model error keeps of a server's message: whole
        cassettes = plural(len(self.files), "cassette")
        message = (f"not recorded: POST {path} (model {model!r}, body sha256 {digest}...)"
                   f"{_last_words(body)} is in none of the {cassettes} of "
                   f"{self.source.name[:40]}; a replay endpoint answers only recorded "
                   "requests and never makes up a verdict")
        payload = {"error": {"message": message, "type": "not_recorded"}}
        return RawResponse(MISS_STATUS, {"content-type": "application/json"},
                           json.dumps(payload).encode())

    async def aclose(self) -> None:
        """Nothing to close: no connection is ever opened."""


def _last_words(body: Any) -> str:
    """`` ending "..."``: the end of the request's last message, to recognise it by."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return ""
    text = " ".join(str(messages[-1].get("content", "")).split())
    return f" ending {text[-40:]!r}" if text else ""
