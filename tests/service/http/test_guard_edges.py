"""Edges of the request guard (judge.service.http._guard), ``/metrics`` and the streamed
responses, in-process: the middleware driven as plain ASGI over a stub app and stub token book,
so each decision (auth before body, rate limits, Content-Length and streamed-body caps, JSON and
integer checks, headers of every answer) is seen at the wire. (The ledger's edges are in
``tests/service/ledger/test_ledger_edges.py``.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Annotated, Any

import pytest
import sqlalchemy as sa
from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.responses import PlainTextResponse
from prometheus_client import CollectorRegistry

from judge._errors import ServiceError
from judge.service import Database
from judge.service.auth._auth import Principal
from judge.service.http._guard import (
    BodyReader,
    ReceivedBytes,
    RequestGuard,
    api_routes,
    uploading,
)

# --- a migrated database (the /metrics tests read it) ----------------------------------


@pytest.fixture
def db(module_database_url: str) -> Iterator[Database]:
    """The module's migrated database (tests/service/conftest.py), opened for this test."""
    database = Database(module_database_url)
    yield database
    database.dispose()


# --- the guard -----------------------------------------------------------------------------

HALF_MB = 512 * 1024
ONE_MB = 1024 * 1024


class _Tokens:
    """``Bearer good`` may submit, ``Bearer reader`` only read, ``Bearer down`` finds the
    database gone (503); anything else is 401."""

    def resolve(self, authorization: str | None) -> Principal:
        scopes = {"Bearer good": ("submit",), "Bearer reader": ("read",),
                  "Bearer other": ("submit",)}
        if authorization == "Bearer down":
            raise ServiceError("the database is unavailable", status=503)
        if authorization not in scopes:
            raise ServiceError("a valid bearer token is needed", status=401)
        token = authorization.split()[1]
        return Principal(f"tok-{token}", token, "p1", "lab", scopes[authorization])


class _Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.seen: list[tuple[str, str, int]] = []

    def observe(self, method: str, template: str, status: int, seconds: float) -> None:
        assert seconds >= 0
        self.seen.append((method, template, status))


class _needs:
    def __init__(self, scope: str) -> None:
        self.required_scope = scope

    def __call__(self, request: Request) -> Principal:
        return request.scope["state"]["principal"]


def _caller(principal: Annotated[Principal, Depends(_needs("submit"))]) -> Principal:
    return principal  # the scope sits one dependency deeper, as in the service


def _takes_uploads() -> None:
    """Marks a route that takes files (its form read by hand)."""


uploading(_takes_uploads)


def _guarded_app(**settings: Any) -> tuple[FastAPI, Any]:
    values = {"max_upload_bytes": ONE_MB, "max_json_bytes": HALF_MB,
              "body_idle_seconds": 0.2, "body_timeout_seconds": 1.0,
              "auth_failures_per_minute": 0, "requests_per_minute": 0}
    values.update(settings)
    host = SimpleNamespace(settings=SimpleNamespace(**values), tokens=_Tokens(),
                           metrics=_Metrics())
    app = FastAPI()
    router = APIRouter()

    @router.get("/v1/items/{item_id}")
    def item(item_id: int, principal: Annotated[Principal, Depends(_needs("read"))],
             q: int | None = None, n: Annotated[int, Query()] = 0, s: str = "",
             request: Request = None) -> dict[str, Any]:  # type: ignore[assignment]
        return {"id": item_id, "q": q, "token": principal.token_id,
                "request_id": request.scope["state"]["request_id"]}

    @router.post("/v1/echo")
    async def echo(request: Request, _: Annotated[Principal, Depends(_caller)]) -> Any:
        body = await request.body()
        return {"size": len(body), "head": body[:20].decode("latin-1")}

    @router.post("/v1/upload", dependencies=[Depends(_takes_uploads)])
    async def upload(request: Request, _: Annotated[Principal, Depends(_caller)]) -> Any:
        body = await request.body()
        return {"size": len(body)}

    @router.get("/v1/open")
    def open_route() -> Any:
        return PlainTextResponse("open", headers={"Cache-Control": "max-age=5"})

    @router.get("/v1/boom")
    def boom(_: Annotated[Principal, Depends(_needs("read"))]) -> None:
        raise RuntimeError("kaputt\nsecond line " + "x" * 400)

    app.include_router(router)

    @app.get("/page")
    def page() -> Any:
        return PlainTextResponse("page", headers={"Cache-Control": "max-age=5",
                                                  "Referrer-Policy": "origin"})

    @app.post("/swallow")
    async def swallow(request: Request) -> Any:
        with contextlib.suppress(Exception):  # an app that answers a body it could not read
            await request.body()
        return PlainTextResponse("fine")

    @app.post("/rethrow")
    async def rethrow(request: Request) -> Any:
        try:  # an app that turns a body it could not read into an error of its own
            await request.body()
        except Exception as exc:
            raise RuntimeError("the app's own error") from exc
        return PlainTextResponse("fine")

    app.add_middleware(RequestGuard, service=host)
    return app, host


def _call(app: Any, method: str, path: str, *, headers: dict[str, str] | None = None,
          chunks: list[bytes] | None = None, query: bytes = b"", scheme: str = "http",
          client: tuple[str, int] | None = ("10.0.0.1", 5000), stall: bool = False
          ) -> SimpleNamespace:
    """One request as raw ASGI; returns status, headers, body, every message sent and how
    often the app's ``receive`` was called."""
    parts = list(chunks or [])
    sent: list[dict[str, Any]] = []
    received = [0]

    async def receive() -> dict[str, Any]:
        received[0] += 1
        if parts:
            body = parts.pop(0)
            return {"type": "http.request", "body": body, "more_body": bool(parts) or stall}
        if stall:
            await asyncio.sleep(30)
        await asyncio.sleep(0.01)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": scheme, "path": path, "raw_path": path.encode(),
             "query_string": query, "root_path": "",
             "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
             "client": client, "server": ("testserver", 80)}
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 10))
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1, sent
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    raw = starts[0]["headers"]
    return SimpleNamespace(status=starts[0]["status"], raw_headers=raw,
                           headers={k.decode(): v.decode() for k, v in raw},
                           body=body, receives=received[0])


def _error(answer: SimpleNamespace) -> dict[str, Any]:
    assert answer.headers["content-type"] == "application/json"
    assert answer.headers["content-length"] == str(len(answer.body))
    return json.loads(answer.body)["error"]


GOOD = {"Authorization": "Bearer good"}


def test_a_request_without_a_token_is_401_with_the_guard_s_headers():
    app, host = _guarded_app()
    answer = _call(app, "GET", "/v1/items/1")
    assert answer.status == 401
    assert _error(answer) == {"status": 401, "message": "a valid bearer token is needed",
                              "field": None}
    assert answer.headers["www-authenticate"] == "Bearer"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "no-referrer"
    assert answer.headers["cache-control"] == "no-store"
    assert len(answer.headers["x-request-id"]) == 32
    assert "connection" not in answer.headers and "strict-transport-security" not in \
        answer.headers
    assert host.metrics.seen == [("GET", "unmatched", 401)]


def test_auth_comes_before_the_body_and_its_size():
    """A caller without a token learns 401 without a byte of the body read (a huge
    Content-Length included); the connection is then closed, the body being unread."""
    app, _ = _guarded_app()
    answer = _call(app, "POST", "/v1/echo", chunks=[b"x" * 10],
                   headers={"Content-Length": str(10 ** 9), "Content-Type": "application/json"})
    assert answer.status == 401 and answer.receives == 0
    assert answer.headers["connection"] == "close"


def test_a_token_without_the_route_s_scope_is_403_without_a_challenge():
    app, _ = _guarded_app()
    answer = _call(app, "POST", "/v1/echo", headers={"Authorization": "Bearer reader"})
    assert answer.status == 403
    assert _error(answer)["message"] == "this token lacks the 'submit' scope"
    assert "www-authenticate" not in answer.headers


def test_a_good_token_reaches_the_route_with_its_principal_and_request_id():
    app, host = _guarded_app()
    answer = _call(app, "GET", "/v1/items/7", query=b"q=3",
                   headers={**GOOD, "X-Request-ID": "abc.DEF_1:2-3"})
    assert answer.status == 200
    assert json.loads(answer.body) == {"id": 7, "q": 3, "token": "tok-good",
                                       "request_id": "abc.DEF_1:2-3"}
    assert answer.headers["x-request-id"] == "abc.DEF_1:2-3"
    assert host.metrics.seen == [("GET", "/v1/items/{item_id}", 200)]


@pytest.mark.parametrize("given", ["has space", "x" * 65, "", "ü"])
def test_an_insane_request_id_is_replaced(given):
    app, _ = _guarded_app()
    answer = _call(app, "GET", "/page", headers={"X-Request-ID": given})
    assert answer.headers["x-request-id"] != given
    assert len(answer.headers["x-request-id"]) == 32
    assert _call(app, "GET", "/page", headers={"X-Request-ID": "y" * 64}).headers[
        "x-request-id"] == "y" * 64


def test_failed_authentications_are_limited_per_address_but_never_refuse_a_valid_token():
    app, _ = _guarded_app(auth_failures_per_minute=2)
    bad = {"Authorization": "Bearer nope"}
    assert [_call(app, "GET", "/v1/items/1", headers=bad).status for _ in range(2)] == [401, 401]
    answer = _call(app, "GET", "/v1/items/1", headers=bad)
    assert answer.status == 429
    assert _error(answer)["message"] == ("too many failed authentications from this address; "
                                         "try again in 30 s")
    assert answer.headers["retry-after"] == "30"
    assert _call(app, "GET", "/v1/items/1").status == 429  # no credentials: the same
    # the valid tokens beside the careless client (one proxy, one NAT) still pass
    assert _call(app, "GET", "/v1/items/1", headers=GOOD).status == 200
    assert _call(app, "GET", "/v1/items/1", headers={"Authorization": "Bearer reader"}
                 ).status == 200
    assert _call(app, "GET", "/v1/items/1", headers=bad).status == 429  # still the attacker's
    elsewhere = _call(app, "GET", "/v1/items/1", headers=bad, client=("10.0.0.2", 1))
    assert elsewhere.status == 401
    assert _call(app, "GET", "/v1/items/1", headers=bad, client=None).status == 401


def test_a_database_outage_is_503_and_no_failed_login():
    app, _ = _guarded_app(auth_failures_per_minute=1)
    down = _call(app, "GET", "/v1/items/1", headers={"Authorization": "Bearer down"})
    assert down.status == 503 and down.headers["connection"] == "close"
    assert "www-authenticate" not in down.headers
    assert _error(down)["message"] == "the database is unavailable"
    assert _call(app, "GET", "/v1/items/1", headers=GOOD).status == 200
    assert _call(app, "GET", "/v1/items/1", headers={"Authorization": "Bearer reader"}
                 ).status == 200


def test_requests_are_limited_per_token():
    app, _ = _guarded_app(requests_per_minute=2)
    assert [_call(app, "GET", "/v1/items/1", headers=GOOD).status for _ in range(2)] == [200,
                                                                                        200]
    answer = _call(app, "GET", "/v1/items/1", headers=GOOD)
    assert answer.status == 429 and answer.headers["retry-after"] == "30"
    assert _error(answer)["message"] == "too many requests for this token; try again in 30 s"
    assert _call(app, "GET", "/v1/items/1", headers={"Authorization": "Bearer other"}
                 ).status == 200


def test_a_route_without_a_scope_needs_a_valid_token_only():
    app, _ = _guarded_app()
    assert _call(app, "GET", "/v1/open").status == 401
    answer = _call(app, "GET", "/v1/open", headers={"Authorization": "Bearer reader"})
    assert answer.status == 200 and answer.body == b"open"
    assert answer.headers["cache-control"] == "no-store"  # the route's own is replaced
    assert [v for k, v in answer.raw_headers if k == b"cache-control"] == [b"no-store"]


def test_pages_outside_v1_keep_their_headers_and_need_no_token():
    app, _ = _guarded_app()
    answer = _call(app, "GET", "/page", scheme="https")
    assert answer.status == 200 and answer.body == b"page"
    assert answer.headers["cache-control"] == "max-age=5"
    assert [v for k, v in answer.raw_headers if k == b"referrer-policy"] == [b"origin"]
    assert answer.headers["strict-transport-security"] == "max-age=31536000"
    plain = _call(app, "GET", "/nowhere")
    assert plain.status == 404 and plain.headers["referrer-policy"] == "same-origin"
    assert "strict-transport-security" not in plain.headers


@pytest.mark.parametrize(("query", "path", "field"), [
    (b"q=9223372036854775808", "/v1/items/1", "q"),
    (b"q=-9223372036854775809", "/v1/items/1", "q"),
    (b"n=%2B99999999999999999999", "/v1/items/1", "n"),
    (b"", "/v1/items/9223372036854775808", "item_id"),
])
def test_an_integer_parameter_past_64_bits_is_422_naming_it(query, path, field):
    app, _ = _guarded_app()
    answer = _call(app, "GET", path, query=query, headers=GOOD)
    assert answer.status == 422
    assert _error(answer) == {"status": 422, "field": field, "message": (
        "Input should be a whole number from -9223372036854775808 to 9223372036854775807")}


def test_integers_at_the_64_bit_edges_and_other_text_pass():
    app, _ = _guarded_app()
    answer = _call(app, "GET", "/v1/items/9223372036854775807",
                   query=b"q=-9223372036854775808&s=99999999999999999999", headers=GOOD)
    assert answer.status == 200 and json.loads(answer.body)["q"] == -(2 ** 63)
    assert _call(app, "GET", "/v1/items/1", query=b"q=+5", headers=GOOD).status == 200


def test_a_declared_length_past_the_limit_is_413_before_reading():
    app, _ = _guarded_app()
    answer = _call(app, "POST", "/v1/echo", chunks=[b"{}"],
                   headers={**GOOD, "Content-Length": str(HALF_MB + 1),
                            "Content-Type": "application/json"})
    assert answer.status == 413 and answer.receives == 0
    assert _error(answer)["message"] == ("the request body is larger than the server's limit "
                                         "of 0.5 MB")
    assert answer.headers["connection"] == "close"
    at_limit = _call(app, "POST", "/v1/echo", chunks=[b" " * HALF_MB],
                     headers={**GOOD, "Content-Length": str(HALF_MB)})
    assert at_limit.status == 200 and json.loads(at_limit.body)["size"] == HALF_MB


def test_multipart_bodies_have_the_upload_limit_only_on_routes_that_take_files():
    app, _ = _guarded_app()
    kind = {"Content-Type": "multipart/form-data; boundary=x"}
    answer = _call(app, "POST", "/v1/upload", chunks=[b"y" * (HALF_MB + 10)],
                   headers={**GOOD, **kind, "Content-Length": str(HALF_MB + 10)})
    assert answer.status == 200 and json.loads(answer.body)["size"] == HALF_MB + 10
    # a route that takes no files keeps the JSON limit whatever the body calls itself
    small = _call(app, "POST", "/v1/echo", chunks=[b"y" * (HALF_MB + 10)],
                  headers={**GOOD, **kind, "Content-Length": str(HALF_MB + 10)})
    assert small.status == 413 and small.receives == 0
    assert _error(small)["message"].endswith("limit of 0.5 MB")
    streamed = _call(app, "POST", "/v1/echo", chunks=[b"y" * (200 * 1024)] * 4,
                     headers={**GOOD, **kind, "Transfer-Encoding": "chunked"})
    assert streamed.status == 413 and streamed.receives == 3
    over = _call(app, "POST", "/v1/upload", chunks=[b"y"],
                 headers={**GOOD, "Content-Type": "MULTIPART/form-data; boundary=x",
                          "Content-Length": str(ONE_MB + 1)})
    assert over.status == 413
    assert _error(over)["message"].endswith("limit of 1 MB")


def test_a_chunked_body_is_cut_off_the_moment_it_passes_the_limit():
    app, _ = _guarded_app()
    chunk = b"z" * (200 * 1024)
    answer = _call(app, "POST", "/v1/echo", chunks=[chunk] * 5,
                   headers={**GOOD, "Transfer-Encoding": "chunked",
                            "Content-Type": "application/json"})
    assert answer.status == 413 and answer.receives == 3
    assert answer.headers["connection"] == "close"
    swallowed = _call(app, "POST", "/swallow", chunks=[chunk] * 5,
                      headers={"Transfer-Encoding": "chunked"})
    assert swallowed.status == 413 and swallowed.body != b"fine"  # the guard answers


def test_a_failed_body_read_is_answered_as_such_when_the_app_then_raises(caplog):
    app, host = _guarded_app(body_idle_seconds=0.1, body_timeout_seconds=5)
    chunk = b"z" * (200 * 1024)
    over = _call(app, "POST", "/rethrow", chunks=[chunk] * 5,
                 headers={"Transfer-Encoding": "chunked"})
    assert over.status == 413 and over.headers["connection"] == "close"
    assert _error(over)["message"] == ("the request body is larger than the server's limit "
                                       "of 0.5 MB")
    slow = _call(app, "POST", "/rethrow", chunks=[b"a"], stall=True,
                 headers={"Content-Length": "50"})
    assert slow.status == 408 and "0.1 s between parts" in _error(slow)["message"]
    # the client's fault, not the server's: no internal error logged, counted as answered
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [seen[2] for seen in host.metrics.seen] == [413, 408]


def test_a_body_split_in_parts_within_the_limit_reaches_the_route_whole():
    app, _ = _guarded_app()
    parts = [b'{"a": ', b"[1, 2", b"]}"]
    answer = _call(app, "POST", "/v1/echo", chunks=parts,
                   headers={**GOOD, "Transfer-Encoding": "chunked",
                            "Content-Type": "application/json"})
    assert answer.status == 200
    assert json.loads(answer.body) == {"size": 13, "head": '{"a": [1, 2]}'}


def test_a_stalled_body_is_408():
    app, _ = _guarded_app(body_idle_seconds=0.1, body_timeout_seconds=5)
    started = time.monotonic()
    answer = _call(app, "POST", "/v1/echo", chunks=[b'{"a":'], stall=True,
                   headers={**GOOD, "Content-Length": "50", "Content-Type": "application/json"})
    assert answer.status == 408 and time.monotonic() - started < 3
    assert _error(answer)["message"] == ("the request body came too slowly (the server waits "
                                         "0.1 s between parts, 5 s in all)")
    assert answer.headers["connection"] == "close"


def test_a_body_is_timed_in_all_too():
    app, _ = _guarded_app(body_idle_seconds=5, body_timeout_seconds=0.1)
    answer = _call(app, "POST", "/swallow", chunks=[b"a"], stall=True,
                   headers={"Content-Length": "50"})
    assert answer.status == 408
    assert "0.1 s in all" in _error(answer)["message"]


@pytest.mark.parametrize(("body", "message", "field"), [
    (b'{"a": {"b": NaN}}', "NaN is not a number this service accepts (NaN and Infinity are "
     "refused)", "a.b"),
    (b'[1, 99999999999999999999]', "an integer outside what the database holds (64 bits)",
     "[1]"),
    (b'1e400', "a number too large to hold (it reads as Infinity)", None),
    (b"-Infinity", "-Infinity is not a number this service accepts (NaN and Infinity are "
     "refused)", None),
])
def test_a_json_body_the_database_cannot_hold_is_422(body, message, field):
    app, _ = _guarded_app()
    answer = _call(app, "POST", "/v1/echo", chunks=[body],
                   headers={**GOOD, "Content-Length": str(len(body)),
                            "Content-Type": "Application/JSON; charset=utf-8"})
    assert answer.status == 422
    assert _error(answer) == {"status": 422, "message": message, "field": field}
    assert "connection" not in answer.headers  # the body was read whole: the link is fine


def test_only_json_bodies_are_checked_for_numbers():
    app, _ = _guarded_app()
    body = b'{"a": NaN}'
    answer = _call(app, "POST", "/v1/echo", chunks=[body],
                   headers={**GOOD, "Content-Length": str(len(body)),
                            "Content-Type": "text/plain"})
    assert answer.status == 200 and json.loads(answer.body)["size"] == len(body)
    nested = b"[" * 300 + b"]" * 300
    deep = _call(app, "POST", "/v1/echo", chunks=[nested],
                 headers={**GOOD, "Content-Length": str(len(nested)),
                          "Content-Type": "application/json"})
    assert deep.status == 422 and "nested deeper than" in _error(deep)["message"]


def test_an_escaped_exception_is_a_500_with_one_short_log_line(caplog):
    app, host = _guarded_app()
    caplog.set_level(logging.DEBUG, logger="dst_judge.service")
    answer = _call(app, "GET", "/v1/boom", headers={**GOOD, "X-Request-ID": "r-1"})
    assert answer.status == 500 and answer.headers["connection"] == "close"
    assert _error(answer) == {"status": 500, "field": None, "message": (
        "internal error in the server (request r-1; see its log)")}
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    line = errors[0].getMessage()
    assert line.startswith("internal error, request r-1: GET /v1/boom: RuntimeError: "
                           "kaputt second line xxx")
    assert len(line) == len("internal error, request r-1: GET /v1/boom: RuntimeError: ") + 300
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert [r.getMessage() for r in debug] == ["request r-1 failed"]
    assert isinstance(debug[0].exc_info[1], RuntimeError)
    assert host.metrics.seen == [("GET", "/v1/boom", 500)]


def test_the_guard_passes_other_scopes_through_and_counts_received_bytes():
    _, host = _guarded_app()
    seen = []

    async def inner(scope, receive, send):
        seen.append(scope["type"])

    guard = RequestGuard(inner, host)
    asyncio.run(guard({"type": "websocket"}, None, None))
    assert seen == ["websocket"]
    before = ReceivedBytes.total
    ReceivedBytes.add(5)
    assert ReceivedBytes.total == before + 5
    assert host.metrics.registry.get_sample_value(
        "dst_judge_http_received_bytes_total") == before + 5


def test_the_body_reader_passes_the_stream_through_once_the_body_is_read():
    messages = [{"type": "http.request", "body": b"ab", "more_body": False},
                {"type": "http.disconnect"}]

    async def receive():
        return messages.pop(0)

    async def run():
        reader = BodyReader(receive, 10, 1.0, 1.0)
        assert await reader.read_all() == b"ab"
        assert reader.done and reader.seen == 2
        assert await reader() == {"type": "http.request", "body": b"ab", "more_body": False}
        assert await reader() == {"type": "http.disconnect"}  # passed through

    asyncio.run(run())


def test_a_message_without_a_body_is_an_empty_part():
    messages = [{"type": "http.request", "more_body": True},
                {"type": "http.request", "body": b"x", "more_body": False}]

    async def receive():
        return messages.pop(0)

    async def run():
        reader = BodyReader(receive, 10, 1.0, 1.0)
        assert await reader.read_all() == b"x"
        assert reader.seen == 1

    asyncio.run(run())


def test_a_disconnect_ends_the_body_early():
    async def receive():
        return {"type": "http.disconnect"}

    async def run():
        reader = BodyReader(receive, 10, 1.0, 1.0)
        assert await reader.read_all() == b""
        assert reader.done and reader.failure is None

    asyncio.run(run())


def test_api_routes_read_scopes_and_integer_parameters_through_included_routers():
    app, _ = _guarded_app()
    routes = {r.route.path: r for r in api_routes(app)}
    assert set(routes) == {"/v1/items/{item_id}", "/v1/echo", "/v1/upload", "/v1/open",
                           "/v1/boom"}
    assert routes["/v1/upload"].uploads and not routes["/v1/echo"].uploads
    assert routes["/v1/echo"].scope == "submit"  # a dependency of a dependency
    assert routes["/v1/items/{item_id}"].scope == "read"
    assert routes["/v1/open"].scope is None
    assert set(routes["/v1/items/{item_id}"].int_params) == {("query", "q"), ("query", "n"),
                                                             ("path", "item_id")}
    assert routes["/v1/echo"].int_params == ()


# --- /metrics ------------------------------------------------------------------------------


def test_metrics_report_jobs_by_status_live_workers_and_this_replica(db):
    """Every job status has a sample (0 when none); workers count only with a heartbeat in
    the last 30 s; a worker of this process adds its running jobs, calls in flight and pool
    grants by endpoint; an API-only replica has none of those."""
    from judge.service.db._db import workers
    from judge.service.http._metrics import ServiceMetrics

    with db.write() as conn:
        conn.execute(workers.delete())
        moment = time.time()
        conn.execute(workers.insert(), [
            {"id": f"w{i}", "host": "h", "pid": i, "started_at": moment, "heartbeat_at": beat,
             "draining": False}
            for i, beat in enumerate((moment, moment - 10, moment - 30.5, moment - 40))])

    class Worker:
        def __init__(self) -> None:
            self.running = {"j1": 1, "j2": 2}

        def tallies(self):
            return {}

        def in_flight(self):
            return 4

        def pool_grants(self):
            return {"openai": 3, "local": 0}

    host = SimpleNamespace(db=db, jobs=SimpleNamespace(counts=lambda: {"queued": 2,
                                                                       "failed": 1}),
                           worker=Worker())
    metrics = ServiceMetrics(host)
    metrics.observe("GET", "/v1/jobs", 200, 0.003)
    metrics.observe("GET", "/v1/jobs", 200, 0.2)
    value = metrics.registry.get_sample_value
    assert value("dst_judge_jobs", {"status": "queued"}) == 2
    assert value("dst_judge_jobs", {"status": "failed"}) == 1
    assert value("dst_judge_jobs", {"status": "stopped"}) == 0
    assert value("dst_judge_workers") == 2
    assert value("dst_judge_replica_running_jobs") == 2
    assert value("dst_judge_replica_calls_in_flight") == 4
    assert value("dst_judge_replica_pool_grants", {"endpoint": "openai"}) == 3
    assert value("dst_judge_replica_pool_grants", {"endpoint": "local"}) == 0
    assert value("dst_judge_http_requests_total",
                 {"method": "GET", "route": "/v1/jobs", "status": "200"}) == 2
    assert value("dst_judge_http_request_seconds_bucket",
                 {"route": "/v1/jobs", "le": "0.005"}) == 1
    assert value("dst_judge_http_request_seconds_bucket",
                 {"route": "/v1/jobs", "le": "0.25"}) == 2
    text, kind = metrics.render()
    assert kind.startswith("text/plain") and b"dst_judge_workers 2.0" in text
    for line in ("dst_judge_jobs Jobs in the database by status",
                 "dst_judge_workers Workers with a heartbeat in the last 30 s",
                 "dst_judge_replica_running_jobs Jobs this replica is running",
                 "dst_judge_replica_calls_in_flight Model calls of this replica in flight",
                 "dst_judge_replica_pool_grants Requests this replica's jobs took from shared "
                 "pools",
                 "dst_judge_http_requests_total HTTP requests served",
                 "dst_judge_http_request_seconds HTTP request latency"):
        assert f"# HELP {line}\n".encode() in text, line
    host.worker = None
    assert value("dst_judge_replica_running_jobs") is None
    assert value("dst_judge_workers") == 2


def test_metrics_leave_out_the_database_figures_when_it_fails(db):
    from judge.service.http._metrics import ServiceMetrics

    def broken():
        raise sa.exc.OperationalError("SELECT", {}, Exception("gone"))

    metrics = ServiceMetrics(SimpleNamespace(db=db, jobs=SimpleNamespace(counts=broken),
                                             worker=None))
    assert metrics.registry.get_sample_value("dst_judge_jobs", {"status": "queued"}) is None
    assert b"dst_judge_workers" not in metrics.render()[0]


# --- streams -------------------------------------------------------------------------------


def test_server_sent_events_are_numbered_framed_kept_alive_and_end_when_over():
    from judge.service.http._streams import ServerEvent, server_sent_events

    polls = [([ServerEvent("progress", {"done": 1, "name": "ü"})], False), ([], False),
             ([], False), ([ServerEvent("status", "x"), ServerEvent("end", None)], True),
             ([ServerEvent("never", 0)], False)]

    async def poll():
        return polls.pop(0)

    class Client:
        async def is_disconnected(self):
            return False

    async def run():
        return [part async for part in server_sent_events(
            poll, Client(), closing=lambda: False, interval=0.001, keep_alive=0.002)]

    parts = asyncio.run(run())
    assert parts == ['id: 1\nevent: progress\ndata: {"done": 1, "name": "ü"}\n\n'.encode(),
                     b": keep-alive\n\n",
                     b'id: 2\nevent: status\ndata: "x"\n\n', b"id: 3\nevent: end\ndata: null\n\n"]


def test_server_sent_events_stop_when_the_client_leaves_or_the_replica_closes():
    from judge.service.http._streams import ServerEvent, server_sent_events

    calls = []

    async def poll():
        calls.append(1)
        return [ServerEvent("tick", len(calls))], False

    class Gone:
        async def is_disconnected(self):
            return True

    async def run(request, closing):
        return [part async for part in server_sent_events(poll, request, closing=closing,
                                                          interval=0.001)]

    assert asyncio.run(run(Gone(), lambda: False)) == [b"id: 1\nevent: tick\ndata: 1\n\n"]
    assert asyncio.run(run(Gone(), lambda: True)) == []
    assert len(calls) == 1


def test_stream_responses_carry_their_types_and_headers():
    from judge.service.http._streams import (
        GzipResponse,
        NDJSONResponse,
        OctetStreamResponse,
        attachment,
        event_stream,
        json_lines,
    )

    async def empty():
        if False:
            yield b""

    response = event_stream(empty())
    assert response.media_type == "text/event-stream"
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    assert NDJSONResponse.media_type == "application/x-ndjson"
    assert GzipResponse.media_type == "application/gzip"
    assert OctetStreamResponse.media_type == "application/octet-stream"
    assert list(json_lines([{"a": "ü"}, {"b": 1}])) == ['{"a": "ü"}\n'.encode(), b'{"b": 1}\n']
    assert attachment('a b/../"x"\r\nSet: 1.json') == {
        "Content-Disposition": 'attachment; filename="ab..xSet1.json"'}
    assert attachment("Ü/ü") == {"Content-Disposition": 'attachment; filename="download"'}
    assert attachment("run_2-a.jsonl") == {
        "Content-Disposition": 'attachment; filename="run_2-a.jsonl"'}


def test_a_quiet_stream_sends_a_keep_alive_every_15_s_by_default(monkeypatch):
    """Defaults: a poll every 0.5 s, a keep-alive comment after 15 s without an event (the
    sleeps are skipped here; the count of polls shows the clock)."""
    from judge.service.http import _streams

    polls = []

    async def poll():
        polls.append(1)
        return [], len(polls) >= 40

    async def no_wait(seconds):
        assert seconds == 0.5

    class Client:
        async def is_disconnected(self):
            return False

    monkeypatch.setattr(_streams.asyncio, "sleep", no_wait)

    async def run():
        seen = []
        async for part in _streams.server_sent_events(poll, Client(), closing=lambda: False):
            seen.append((len(polls), part))
        return seen

    assert asyncio.run(run()) == [(31, b": keep-alive\n\n")]
