"""The ASGI guard in front of the API: request bodies over the limit are refused with 413,
and every request is timed for ``/metrics``."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from .._api_models import error_body as _error_body

if TYPE_CHECKING:
    from ._service import Service

JSON_LIMIT = 16 * 1024 * 1024
UPLOAD_PATHS = ("/v1/files", "/v1/bundles")


class _TooLarge(Exception):
    pass


class RequestGuard:
    """ASGI middleware: refuse bodies over the limit with 413 (by Content-Length at once,
    else while reading), and time every request for ``/metrics``."""

    def __init__(self, app: Any, service: Service) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        limit = (self.service.settings.max_upload_bytes if path in UPLOAD_PATHS else JSON_LIMIT)
        length = dict(scope.get("headers") or []).get(b"content-length")
        started = time.perf_counter()
        status = {"code": 500}

        async def send_wrapper(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            if length is not None and length.isdigit() and int(length) > limit:
                raise _TooLarge
            seen = 0

            async def limited_receive() -> dict[str, Any]:
                nonlocal seen
                message = await receive()
                if message["type"] == "http.request":
                    seen += len(message.get("body", b""))
                    if seen > limit:
                        raise _TooLarge
                return message

            await self.app(scope, limited_receive, send_wrapper)
        except _TooLarge:
            status["code"] = 413
            body = json.dumps(_error_body(413, f"the request body is larger than the server's "
                                          f"limit of {limit // (1024 * 1024)} MB")).encode()
            await send({"type": "http.response.start", "status": 413,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode()),
                                    (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.service.metrics.observe(scope.get("method", "?"), template, status["code"],
                                         time.perf_counter() - started)
