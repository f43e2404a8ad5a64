"""Responses that are not one JSON document, shared by the API and the web interface: server-sent
event streams, JSON Lines streams and downloads (``Content-Disposition: attachment``).

One event loop serves every stream: a ``poll`` coroutine says what happened since it was last
asked, and the generator frames it, numbers the events, sends a comment line when nothing
happened for a while (proxies close silent connections) and stops when the poll says so, when
the client went away or when the replica shuts down.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import Response, StreamingResponse


@dataclass(frozen=True)
class ServerEvent:
    """One server-sent event: its name and its data (sent as JSON)."""

    event: str
    data: Any


Poll = Callable[[], Awaitable[tuple[list[ServerEvent], bool]]]
"""Returns the events to send now and whether the stream is over."""


async def server_sent_events(poll: Poll, request: Request, *, closing: Callable[[], bool],
                             interval: float = 0.5, keep_alive: float = 15.0
                             ) -> AsyncIterator[bytes]:
    """Frame what ``poll`` reports as ``text/event-stream`` until it says the stream is over."""
    serial = 0
    quiet = 0.0
    while not closing():
        events, over = await poll()
        for item in events:
            serial += 1
            data = json.dumps(item.data, ensure_ascii=False)
            yield f"id: {serial}\nevent: {item.event}\ndata: {data}\n\n".encode()
            quiet = 0.0
        if over:
            return
        if quiet >= keep_alive:
            yield b": keep-alive\n\n"
            quiet = 0.0
        if await request.is_disconnected():
            return
        await asyncio.sleep(interval)
        quiet += interval


class EventStreamResponse(StreamingResponse):
    """``text/event-stream``."""

    media_type = "text/event-stream"


def event_stream(events: AsyncIterator[bytes]) -> EventStreamResponse:
    """The response of a stream from :func:`server_sent_events`: never cached, and never
    buffered by a proxy (nginx reads ``X-Accel-Buffering``)."""
    return EventStreamResponse(events, headers={"Cache-Control": "no-cache",
                                                "X-Accel-Buffering": "no"})


class NDJSONResponse(StreamingResponse):
    """JSON Lines (one object per line), streamed."""

    media_type = "application/x-ndjson"


class GzipResponse(Response):
    media_type = "application/gzip"


class OctetStreamResponse(StreamingResponse):
    media_type = "application/octet-stream"


def json_lines(rows: Iterable[Mapping[str, Any]]) -> Iterator[bytes]:
    """Each row as one UTF-8 line of JSON."""
    for row in rows:
        yield (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")


def attachment(name: str) -> dict[str, str]:
    """The ``Content-Disposition`` header of a download called ``name`` (reduced to letters,
    digits and ``._-``, so no header or path can be injected through it)."""
    safe = "".join(c for c in name if c.isascii() and (c.isalnum() or c in "._-")) or "download"
    return {"Content-Disposition": f'attachment; filename="{safe}"'}
