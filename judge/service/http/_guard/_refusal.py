"""The guard's own answer: an exception carrying the status, message, field and headers of a
refusal, raised by every check and answered by the middleware."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class Refusal(Exception):
    """A request answered by the guard itself."""

    def __init__(self, status: int, message: str, *, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.headers = headers or {}


def too_many(wait: float, what: str) -> Refusal:
    """429 with ``Retry-After``: the whole seconds until ``what`` may go again."""
    seconds = max(1, math.ceil(wait))
    return Refusal(429, f"too many {what}; try again in {seconds} s",
                   headers={"Retry-After": str(seconds)})
