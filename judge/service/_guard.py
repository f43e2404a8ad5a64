"""The front door of every request: a pure ASGI middleware that answers what it can from the
headers alone, before a byte of the body is read.

Every route of the app, the web interface's included, is looked up in one table read from the
app at run time (:func:`route_table`), so a route added tomorrow gets the same rules: the
caller first (a ``/v1`` route, or any route whose dependency names a scope: the bearer token
and that scope; a route whose dependency carries a :class:`Gate`: the gate's check, a browser
session say), then the per-token request rate (429 with ``Retry-After``, per replica), then
``Content-Length`` against the route's body cap (413): uploads up to the upload limit on the
routes that take files, everything else up to the JSON limit. Failed authentications are
counted per client address; once an address has none left its failed attempts (and its
requests without credentials) get 429, while a valid token from the same address still
passes: one careless client behind a proxy locks out nobody but itself.

While the body arrives it is counted (413 the moment it passes the limit, chunked or not)
and timed (408 for a client that stalls or takes too long; event streams and downloads are
not bodies and have no such limit). A JSON body (any ``/v1`` body that is not multipart, and
a body of any other route that says it is JSON: the web interface's) is read whole (it is
small) and refused with 413 when it holds more values than any request needs, with 422 naming
the field when it is nested too deep or holds NaN, Infinity or an integer no database column
holds; integer query and path parameters get the same check.

Every response carries ``X-Request-ID`` (the client's when it is sane, else a new one) and
``X-Content-Type-Options: nosniff``; ``/v1`` responses ``Cache-Control: no-store``; HSTS when
the request came over HTTPS. An exception that reaches here is logged as one line with the
request id and answered 500 with ``Connection: close``, so no client reuses a connection in an
unknown state.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
import types
import typing
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector
from starlette.routing import Match

from .._errors import ServiceError
from .._io import MAX_JSON_DEPTH, json_values_exceed, nesting_exceeds, printable
from .._tasks import within

if TYPE_CHECKING:
    from ._auth import Principal, TokenBook
    from ._metrics import ServiceMetrics
    from ._settings import ServiceSettings


class GuardHost(Protocol):
    """What the guard needs of the service (``_app.Service`` has it; this module does not
    import the app, which installs it)."""

    settings: ServiceSettings
    tokens: TokenBook
    metrics: ServiceMetrics

log = logging.getLogger("dst_judge.service")

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
"""What every integer column of both databases holds (SQLite: 64 bits; Postgres BIGINT)."""
API_PREFIX = "/v1"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
MAX_JSON_VALUES = 110_000
"""The most values a JSON body may hold: the largest a route takes is a job's 100,000 dialogue
ids (``options.dialogue_ids``) with its other fields; a 2 MB body of a million numbers is
refused (413) before it is parsed into a hundred times its size."""

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class ReceivedBytes(Collector):
    """Bytes this process received on its HTTP connections, counted by the server's protocol
    as they come off the sockets (``dst_judge_http_received_bytes_total`` in ``/metrics``):
    what a refused upload really cost, whatever the app read of it."""

    total = 0

    @classmethod
    def add(cls, count: int) -> None:
        cls.total += count

    def collect(self) -> Iterator[Any]:
        yield CounterMetricFamily("dst_judge_http_received_bytes",
                                  "Bytes received on HTTP connections by this process",
                                  value=ReceivedBytes.total)


class Refusal(Exception):
    """A request answered by the guard itself."""

    def __init__(self, status: int, message: str, *, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.headers = headers or {}


Page = Callable[[dict[str, Any], Refusal], Any]
"""Makes the ASGI response of a refusal for a route that answers in its own form (an HTML
page, a redirect to the login form) instead of the guard's JSON."""


@dataclass(frozen=True)
class Gate:
    """What a route outside ``/v1`` asks the guard to check before its body is read, carried
    as ``guard_gate`` by one of the route's dependencies (the web interface's session check):

    ``check(scope)`` runs in a thread and gives the caller's principal (None: the route has
    no caller, like a login form) or raises :class:`ServiceError` (401, 403...), which the
    guard answers at once, through ``page`` when given."""

    check: Callable[[dict[str, Any]], Principal | None]
    page: Page | None = None


Call = typing.TypeVar("Call", bound=Callable[..., Any])


def gated(call: Call, gate: Gate) -> Call:
    """``call`` (a route dependency) carrying ``gate`` for the guard to find."""
    vars(call)["guard_gate"] = gate
    return call


def uploading(call: Call) -> Call:
    """``call`` (a route dependency) marking its routes as taking files."""
    vars(call)["takes_uploads"] = True
    return call


FAILURE_KEY = "auth_failure"
"""``scope["state"][FAILURE_KEY]()``: what a route that checks credentials in its body (the
login form) calls on a failure; it gives the seconds the address must wait (0: none; the
route answers 429 then)."""


def note_auth_failure(scope: MutableMapping[str, Any]) -> float:
    """Count a failed authentication of this request's address (the login form's wrong
    token); returns 0, or the seconds to wait when the address has no failures left."""
    note = (scope.get("state") or {}).get(FAILURE_KEY)
    return float(note()) if callable(note) else 0.0


# --- rate limits ---------------------------------------------------------------------------


class RateLimit:
    """Token buckets keyed by client address or token: ``per_minute`` a minute on average,
    as many at once. In memory, so per replica; at most ``max_keys`` keys are remembered
    (the least recently used go first, which only ever forgets a debt)."""

    def __init__(self, per_minute: int, *, max_keys: int = 50_000) -> None:
        self.per_minute = per_minute
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def _level(self, key: str, moment: float) -> float:
        level, then = self._buckets.get(key, (float(self.per_minute), moment))
        return min(float(self.per_minute), level + (moment - then) * self.per_minute / 60.0)

    def wait(self, key: str) -> float:
        """Seconds until ``key`` may go again (0: now), without taking anything."""
        if self.per_minute <= 0:
            return 0.0
        level = self._level(key, time.monotonic())
        return 0.0 if level >= 1.0 else (1.0 - level) * 60.0 / self.per_minute

    def take(self, key: str) -> float:
        """Take one for ``key``; returns 0, or the seconds to wait when there is none left."""
        if self.per_minute <= 0:
            return 0.0
        moment = time.monotonic()
        level = self._level(key, moment)
        if level < 1.0:
            return (1.0 - level) * 60.0 / self.per_minute
        self._buckets[key] = (level - 1.0, moment)
        self._buckets.move_to_end(key)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return 0.0


def _address(scope: dict[str, Any]) -> str:
    """The client's address (the proxy's forwarded one when the proxy is trusted)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def _too_many(wait: float, what: str) -> Refusal:
    seconds = max(1, math.ceil(wait))
    return Refusal(429, f"too many {what}; try again in {seconds} s",
                   headers={"Retry-After": str(seconds)})


# --- which scope a route needs -------------------------------------------------------------


def _dependency_calls(route: Any) -> Iterator[Any]:
    """The callables of every dependency of ``route``, dependencies of dependencies too."""
    dependant = getattr(route, "dependant", None)
    stack = list(getattr(dependant, "dependencies", []) or [])
    while stack:
        dependency = stack.pop()
        yield dependency.call
        stack.extend(dependency.dependencies or [])


def route_scope(route: Any) -> str | None:
    """The scope the route's caller dependency requires (its ``required_scope``), None when
    the route has none."""
    for call in _dependency_calls(route):
        scope = getattr(call, "required_scope", None)
        if isinstance(scope, str):
            return scope
    return None


def route_gate(route: Any) -> Gate | None:
    """The :class:`Gate` one of the route's dependencies carries (``guard_gate``), if any."""
    for call in _dependency_calls(route):
        gate = getattr(call, "guard_gate", None)
        if isinstance(gate, Gate):
            return gate
    return None


def takes_uploads(route: Any) -> bool:
    """Whether the route takes files (multipart bodies up to the upload limit): a parameter
    of type ``UploadFile``, or a dependency marked ``takes_uploads`` (a form read by hand)."""
    from starlette.datastructures import UploadFile

    dependant = getattr(route, "dependant", None)
    for param in getattr(dependant, "body_params", []) or []:
        annotation = param.field_info.annotation
        if _mentions(annotation, UploadFile):
            return True
    return any(getattr(call, "takes_uploads", False) is True
               for call in _dependency_calls(route))


def _mentions(annotation: Any, kind: type) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, kind):
        return True
    return any(_mentions(a, kind) for a in typing.get_args(annotation))


def _is_int(annotation: Any) -> bool:
    if annotation is int:
        return True
    if typing.get_origin(annotation) is typing.Annotated:
        return _is_int(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_is_int(a) for a in typing.get_args(annotation))
    return False


@dataclass
class RouteInfo:
    route: Any
    scope: str | None
    int_params: tuple[tuple[str, str], ...]
    """(where, name) of the integer parameters: where is ``query`` or ``path``."""
    gate: Gate | None = None
    uploads: bool = False

    @property
    def api(self) -> bool:
        return str(getattr(self.route, "path", "")).startswith(API_PREFIX + "/")


def _flat_routes(routes: Any) -> Iterator[Any]:
    """The routes as the app serves them: with their full paths and the dependencies they got
    from the routers that include them (FastAPI 0.165 keeps an included router as one entry
    and lists its effective routes through ``iter_route_contexts``; older versions copy the
    routes into ``app.routes``)."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # an older FastAPI: the included routes are in app.routes
        yield from routes
        return
    yield from iter_route_contexts(routes)


def route_table(app: Any) -> list[RouteInfo]:
    """Every route of ``app`` (mounted applications too: static files are public) with what
    the guard checks before its body: the scope, the gate, whether it takes uploads, and its
    integer parameters."""
    found = []
    for route in _flat_routes(getattr(app, "routes", [])):
        if not hasattr(route, "matches") or getattr(route, "path", None) is None:
            continue
        dependant = getattr(route, "dependant", None)
        ints = tuple((where, param.alias) for where, params in
                     (("query", getattr(dependant, "query_params", [])),
                      ("path", getattr(dependant, "path_params", [])))
                     for param in params if _is_int(param.field_info.annotation))
        found.append(RouteInfo(route, route_scope(route), ints, route_gate(route),
                               takes_uploads(route)))
    return found


def api_routes(app: Any) -> list[RouteInfo]:
    """Every ``/v1`` route of ``app`` with the scope it needs and its integer parameters."""
    return [info for info in route_table(app) if info.api]


# --- the body ------------------------------------------------------------------------------


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
                                   f"of {_megabytes(self.limit)}")
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


def _megabytes(count: int) -> str:
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


def _param_problem(info: RouteInfo, query: str, path_params: dict[str, Any]) -> Refusal | None:
    """An integer query or path parameter beyond 64 bits (a database would overflow)."""
    values = dict(parse_qsl(query, keep_blank_values=True))
    for where, name in info.int_params:
        raw = values.get(name) if where == "query" else path_params.get(name)
        text = str(raw).strip() if raw is not None else ""
        if re.fullmatch(r"[+-]?\d+", text) and not INT64_MIN <= int(text) <= INT64_MAX:
            return Refusal(422, f"Input should be a whole number from {INT64_MIN} to "
                           f"{INT64_MAX}", field=name)
    return None


# --- the middleware ------------------------------------------------------------------------


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
                raise _too_many(wait, "requests for this token")
        if info is not None and info.int_params:
            overflow = _param_problem(info, scope.get("query_string", b"").decode(
                "latin-1"), info.route.matches(scope)[1].get("path_params", {}))
            if overflow is not None:
                raise overflow
        length = exchange.headers.get(b"content-length", b"").strip()
        if length.isdigit() and int(length) > reader.limit:
            raise Refusal(413, "the request body is larger than the server's limit of "
                          f"{_megabytes(reader.limit)}")
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
        for info in self._routes:
            if info.route.matches(scope)[0] == Match.FULL:
                return info
        return None

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
                    raise _too_many(wait, "failed authentications from this address") \
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
