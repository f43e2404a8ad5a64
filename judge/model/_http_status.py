"""What a model endpoint's reply status and headers mean to the client: retry or give up,
how long the server asks us to wait, and the error a caller sees (the server's own words,
without the key). Also the rough request size the tokens-per-minute limiter counts."""

from __future__ import annotations

import math
import re
from typing import Any

from .._errors import ModelError
from .._io import loads, printable
from ._transport import NoResponse, RawResponse

_MAX_RETRY_AFTER = 120.0


class HTTPStatusError(Exception):
    """A response with a status other than 2xx (internal: becomes a :class:`ModelError`)."""

    def __init__(self, response: RawResponse) -> None:
        super().__init__(f"HTTP {response.status}")
        self.response = response
        self.status = response.status


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_reset(value: str | None) -> float | None:
    """``x-ratelimit-reset-*`` durations as seconds: ``"1s"``, ``"6m0s"``, ``"20ms"``, ``"0.5"``."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        parts = _DURATION.findall(value)
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts) if parts else math.nan
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def estimate_tokens(body: dict[str, Any]) -> int:
    """Rough request size for the tokens-per-minute limiter: characters / 4 plus the reply cap."""
    chars = sum(len(m.get("content") or "") for m in body.get("messages", []))
    return chars // 4 + int(body.get("max_tokens") or 0)


def _seconds(value: str | None) -> float | None:
    """A server-given delay in seconds, bounded to [0, 120]; None when absent or not a finite
    number (``nan``, ``inf``, ``soon``, an HTTP date)."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER)


def _retry_after(exc: BaseException) -> float | None:
    if not isinstance(exc, HTTPStatusError):
        return None
    return _seconds(exc.response.headers.get("retry-after"))


def _is_transient(exc: BaseException) -> bool:
    """Worth another attempt: no response at all, 429 or a 5xx (a CassetteMiss is neither)."""
    if isinstance(exc, NoResponse):
        return True
    if isinstance(exc, HTTPStatusError):
        return exc.status == 429 or exc.status >= 500
    return False


def _as_model_error(exc: BaseException) -> ModelError:
    if isinstance(exc, HTTPStatusError):
        fatal = exc.status in (401, 403, 404)
        return ModelError(f"HTTP {exc.status}: {_status_message(exc.response)}", fatal=fatal,
                          status=exc.status)
    if isinstance(exc, NoResponse):
        if exc.timeout:
            return ModelError("the request timed out")
        return ModelError(f"connection error: {exc}")
    return ModelError(f"{type(exc).__name__}: {exc}")


def _status_message(response: RawResponse) -> str:
    """The server's own words: ``{"error": {"message": ...}}`` when it sent that, else the body
    (at most 300 printable characters; the caller removes the key)."""
    try:
        body = loads(response.content, max_depth=32)
    except ValueError:
        body = None
    text: str | None = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            text = str(inner["message"])
        elif isinstance(inner, str):
            text = inner
    if text is None:
        text = response.content[:4096].decode("utf-8", "replace")
    return printable(text[:300], newlines=False).strip() or "(empty body)"
