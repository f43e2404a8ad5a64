"""The ASGI middleware: the order of the checks, the headers every response carries, and the
guard's own answers (see the package's docstring for the rules)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import MutableMapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from ...._errors import ServiceError
from ...._io import json_values_exceed, printable
from ._body import MAX_JSON_VALUES, BodyReader, json_problem, megabytes, param_problem
from ._buckets import RateLimit
from ._received import ReceivedBytes
from ._refusal import Message, Receive, Refusal, Send, too_many
from ._routetable import API_PREFIX, Gate, RouteInfo, find_route, route_table

if TYPE_CHECKING:
    from ...auth import Principal, TokenBook
    from ...db import ServiceSettings
    from .._metrics import ServiceMetrics


class GuardHost(Protocol):
    """What the guard needs of the service (``_app.Service`` has it; this module does not
    import the app, which installs it)."""

    settings: ServiceSettings
    tokens: TokenBook
    metrics: ServiceMetrics


log = logging.getLogger("dst_judge.service")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


FAILURE_KEY = "auth_failure"
"""``scope["state"][FAILURE_KEY]()``: what a route that checks credentials in its body (the
login form) calls on a failure; it gives the seconds the address must wait (0: none; the
route answers 429 then)."""


def note_auth_failure(scope: MutableMapping[str, Any]) -> float:
    """Count a failed authentication of this request's address (the login form's wrong
    token); returns 0, or the seconds to wait when the address has no failures left."""
    note = (scope.get("state") or {}).get(FAILURE_KEY)
    return float(note()) if callable(note) else 0.0


def _address(scope: dict[str, Any]) -> str:
    """The client's address (the proxy's forwarded one when the proxy is trusted)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"



@dataclass
class Exchange:
    """One request as the guard sees it."""

    method: str
    path: str
    headers: dict[bytes, bytes]
    request_id: str
    https: bool
    status: int = 0
    started: bool = False
    close: bool = False

    @property
    def has_body(self) -> bool:
        length = self.headers.get(b"content-length", b"0").strip()
        return b"transfer-encoding" in self.headers or (length.isdigit() and int(length) > 0)

    @property
    def multipart(self) -> bool:
        return self.headers.get(b"content-type", b"").lower().startswith(b"multipart/")

    @property
    def api(self) -> bool:
        return self.path == API_PREFIX or self.path.startswith(API_PREFIX + "/")


class RequestGuard:
    """The ASGI middleware (installed by :func:`judge.service.create_app`)."""

    def __init__(self, app: Any, service: GuardHost) -> None:
        self.app = app
        self.service = service
        settings = service.settings
        self.failures = RateLimit(settings.auth_failures_per_minute)
        self.requests = RateLimit(settings.requests_per_minute)
        self._routes: list[RouteInfo] | None = None
        service.metrics.registry.register(ReceivedBytes())

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"x-request-id", b"").decode("latin-1")
        exchange = Exchange(scope.get("method", "GET"), scope.get("path", ""), headers,
                            given if _REQUEST_ID.match(given) else uuid.uuid4().hex,
                            scope.get("scheme") == "https")
        scope.setdefault("state", {})["request_id"] = exchange.request_id
        started = time.perf_counter()
        settings = self.service.settings
        reader = BodyReader(receive, settings.max_json_bytes, settings.body_idle_seconds,
                            settings.body_timeout_seconds)
        guarded_send = self._sender(send, exchange, reader)
        info: RouteInfo | None = None
        try:
            info = self._route(scope)
            await self._gate(scope, exchange, reader, info)
            await self.app(scope, reader, guarded_send)
        except Refusal as refusal:
            await self._refuse(scope, send, exchange, refusal, reader.done, info)
        except Exception as exc:  # the last line of defence: logged, answered 500
            if reader.failure is not None:
                await self._refuse(scope, send, exchange, reader.failure, info=info)
            else:
                self._log_failure(exchange, exc)
                await self._refuse(scope, send, exchange, Refusal(
                    500, f"internal error in the server (request {exchange.request_id}; "
                    "see its log)"))
        else:
            if reader.failure is not None:
                await self._refuse(scope, send, exchange, reader.failure, info=info)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.service.metrics.observe(exchange.method, template, exchange.status or 500,
                                         time.perf_counter() - started)

    # --- before the app ---

    async def _gate(self, scope: dict[str, Any], exchange: Exchange, reader: BodyReader,
                    info: RouteInfo | None) -> None:
        """Everything decided before the app runs; raises :class:`Refusal`."""
        settings = self.service.settings
        if info is not None and info.uploads and exchange.multipart:
            reader.limit = settings.max_upload_bytes
        address = _address(scope)
        scope["state"][FAILURE_KEY] = partial(self.failures.take, address)
        principal: Principal | None = None
        if exchange.api or (info is not None and info.scope is not None):
            principal = await self._authenticate(scope, exchange, info, address)
        elif info is not None and info.gate is not None:
            principal = await self._check_gate(scope, info.gate)
        if principal is not None:
            wait = self.requests.take(principal.token_id)
            if wait:
                raise too_many(wait, "requests for this token")
        if info is not None and info.int_params:
            overflow = param_problem(info.int_params, scope.get("query_string", b"").decode(
                "latin-1"), info.path_params(scope))
            if overflow is not None:
                raise overflow
        length = exchange.headers.get(b"content-length", b"").strip()
        if length.isdigit() and int(length) > reader.limit:
            raise Refusal(413, "the request body is larger than the server's limit of "
                          f"{megabytes(reader.limit)}")
        kind = exchange.headers.get(b"content-type", b"").lower()
        if exchange.has_body and exchange.method in _BODY_METHODS and not exchange.multipart \
                and (exchange.api or b"json" in kind):
            body = await reader.read_all()
            if not kind or b"json" in kind:  # without a type, FastAPI reads JSON too
                if json_values_exceed(body, MAX_JSON_VALUES):
                    raise Refusal(413, f"the JSON body holds more than {MAX_JSON_VALUES:,} "
                                  "values; no request of this API needs that many")
                invalid = json_problem(body)
                if invalid is not None:
                    raise Refusal(422, invalid[0], field=invalid[1])

    def _route(self, scope: dict[str, Any]) -> RouteInfo | None:
        """The route that will answer (the first that matches path and method), or None."""
        if self._routes is None:
            self._routes = route_table(scope.get("app"))
        return find_route(self._routes, scope)

    async def _authenticate(self, scope: dict[str, Any], exchange: Exchange,
                            info: RouteInfo | None, address: str) -> Principal:
        """The caller, from the Authorization header alone; 401, 403 or 429 otherwise. A
        valid token passes whatever its address did before: only failures (and requests
        without credentials) meet the address's limit."""
        authorization = exchange.headers.get(b"authorization", b"").decode("latin-1")
        try:
            principal = await asyncio.to_thread(self.service.tokens.resolve, authorization)
        except ServiceError as exc:
            if exc.status == 401:  # a database outage (503) is no failed login
                wait = self.failures.take(address)
                if wait:
                    raise too_many(wait, "failed authentications from this address") \
                        from None
            headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else {}
            raise Refusal(exc.status, exc.reason, headers=headers) from None
        if info is not None and info.scope is not None:
            try:
                principal.require(info.scope)
            except ServiceError as exc:
                raise Refusal(exc.status, exc.reason) from None
        scope["state"]["principal"] = principal
        return principal

    @staticmethod
    async def _check_gate(scope: dict[str, Any], gate: Gate) -> Principal | None:
        try:
            return await asyncio.to_thread(gate.check, scope)
        except ServiceError as exc:
            raise Refusal(exc.status, exc.reason, field=exc.field) from None

    # --- around the app ---

    def _sender(self, send: Send, exchange: Exchange, reader: BodyReader) -> Send:
        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                if reader.failure is not None:
                    return  # the app answered a body it could not read: the guard answers
                exchange.started = True
                exchange.status = int(message["status"])
                message = {**message, "headers": self._headers(
                    list(message.get("headers") or []), exchange)}
            elif not exchange.started:
                return
            await send(message)
        return guarded

    def _headers(self, headers: list[tuple[bytes, bytes]], exchange: Exchange
                 ) -> list[tuple[bytes, bytes]]:
        names = {name.lower() for name, _ in headers}
        out = [(n, v) for n, v in headers if not (exchange.api and n.lower() == b"cache-control")]
        out.append((b"x-request-id", exchange.request_id.encode()))
        if b"x-content-type-options" not in names:
            out.append((b"x-content-type-options", b"nosniff"))
        if b"referrer-policy" not in names:
            out.append((b"referrer-policy", b"no-referrer" if exchange.api else b"same-origin"))
        if exchange.api:
            out.append((b"cache-control", b"no-store"))
        if exchange.https:
            out.append((b"strict-transport-security", b"max-age=31536000"))
        if (exchange.status >= 500 or exchange.close) and b"connection" not in names:
            out.append((b"connection", b"close"))
        return out

    async def _refuse(self, scope: dict[str, Any], send: Send, exchange: Exchange,
                      refusal: Refusal, reader_done: bool = False,
                      info: RouteInfo | None = None) -> None:
        """Answer with the guard's own JSON error (or the route's own page for it: its gate's
        ``page``), unless the response already started."""
        if exchange.started:
            return
        exchange.started = True
        exchange.status = refusal.status
        exchange.close = refusal.status >= 500 or (exchange.has_body and not reader_done)
        page = info.gate.page if info is not None and info.gate is not None else None
        if page is not None and refusal.status < 500:
            await self._send_page(scope, send, exchange, page(scope, refusal))
            return
        body = json.dumps({"error": {"status": refusal.status, "message": refusal.message,
                                     "field": refusal.field}}).encode()
        headers = [(b"content-type", b"application/json"),
                   (b"content-length", str(len(body)).encode())]
        headers += [(k.lower().encode(), v.encode()) for k, v in refusal.headers.items()]
        await send({"type": "http.response.start", "status": refusal.status,
                    "headers": self._headers(headers, exchange)})
        await send({"type": "http.response.body", "body": body})

    async def _send_page(self, scope: dict[str, Any], send: Send, exchange: Exchange,
                         response: Any) -> None:
        """Run the route's ASGI response for a refusal, with the guard's headers and no body
        read (its ``receive`` says the client left)."""
        async def nothing() -> Message:
            return {"type": "http.disconnect"}

        async def framed(message: Message) -> None:
            if message["type"] == "http.response.start":
                exchange.status = int(message["status"])
                message = {**message, "headers": self._headers(
                    list(message.get("headers") or []), exchange)}
            await send(message)

        await response(scope, nothing, framed)

    @staticmethod
    def _log_failure(exchange: Exchange, exc: Exception) -> None:
        """One line per failure (the traceback only at debug level)."""
        text = printable(str(exc), newlines=False)[:300]
        log.error("internal error, request %s: %s %s: %s: %s", exchange.request_id,
                  exchange.method, exchange.path, type(exc).__name__, text)
        log.debug("request %s failed", exchange.request_id, exc_info=exc)
