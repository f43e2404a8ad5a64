"""The request guard's rules hold on every route of the app, the web interface's included: a
property over the route table read at run time (tests/app_surface.py), so a route added
tomorrow is held to them without anyone listing it here.

* Auth before body: a request without credentials, on any route outside the short list of
  public ones, is refused without the app pulling a single byte of its body (a 1 MB body,
  announced or streamed).
* Body caps: with valid credentials (a token with every scope, a session with its CSRF
  token, the login form's cookie), a body announced past the upload limit is 413 before a byte
  is read, and a multipart body streamed past the JSON limit is read no further than one chunk
  past it (413) on every route but the few that take files (listed here: a new upload route
  is a decision).
* Public routes (liveness, readiness, the docs, the login page) are exactly the listed ones.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from judge.service import create_token
from judge.web import mount_web
from tests.app_surface import RouteInfo, routes, web_login
from tests.service.conftest import Api, running_service, service_settings

JSON_CAP = 64 * 1024
UPLOAD_CAP = 256 * 1024
CHUNK = 16 * 1024
PUBLIC = {("GET", "/openapi.json"), ("HEAD", "/openapi.json"), ("GET", "/healthz"),
          ("GET", "/readyz"), ("GET", "/docs"), ("GET", "/docs/oauth2-redirect"),
          ("GET", "/ui/login"), ("GET", "/")}
"""Routes a caller without credentials may use (no body of theirs is ever read)."""
UPLOADS = {("POST", "/v1/files"), ("POST", "/v1/bundles"), ("POST", "/ui/runs/new")}
"""Routes that take files: their multipart bodies may grow to the upload limit."""
REFUSED_ANONYMOUS = {401, 403, 303}
"""No credentials: 401 (API, or a page's script), 403 (the login form without its cookie),
303 (a page sends the browser to the login form)."""
VALUES = {"job_id": "job_0123456789abcdef", "file_id": "file_0123456789abcdef",
          "token_id": "tok_0123456789abcdef", "label_id": 1, "dialogue_id": "d1",
          "turn_index": 0, "name": "audit.html"}


PREAMBLE = (b'--x\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\n'
            b"Content-Type: application/octet-stream\r\n\r\n")
"""The start of a well-formed multipart body: one file, whose bytes follow (a parser reads on
as long as the route wants the file)."""


class Body:
    """A multipart request body the app pulls chunk by chunk; ``pulled`` counts what it
    took."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.pulled = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        sent = 0
        while sent < self.size:
            part = (PREAMBLE if sent == 0 else b"") + b"x" * CHUNK
            part = part[: self.size - sent]
            sent += len(part)
            self.pulled += len(part)
            yield part


@pytest.fixture
def surface(tmp_path: Path, fake_model: Any) -> Iterator[dict[str, Any]]:
    settings = service_settings(tmp_path / "data", fake_model.url, job_slots=0,
                                max_json_mb=JSON_CAP / 2 ** 20,
                                max_upload_mb=UPLOAD_CAP / 2 ** 20,
                                auth_failures_per_minute=0, requests_per_minute=0)
    with running_service(settings) as (service, app):
        mount_web(app)
        root = create_token(service.db, "lab", "admin", name="root")[0]
        clients = [Api(app), Api(app), Api(app, root)]
        anonymous, browser, bearer = clients
        try:
            csrf = web_login(browser, root)
            browser.get("/ui/login")  # the login form's cookie, for the login route itself
            yield {"app": app, "anonymous": anonymous, "browser": browser, "csrf": csrf,
                   "bearer": bearer}
        finally:
            for client in clients:
                client.close()


def _every(app: Any) -> list[tuple[str, RouteInfo]]:
    found = [(method, route) for route in routes(app) for method in sorted(route.methods)]
    assert len(found) >= 50, [(m, r.path) for m, r in found]  # the enumeration works
    assert {(m, r.path) for m, r in found} >= PUBLIC | UPLOADS
    return found


def _send(client: Api, method: str, url: str, body: Body, *, announce: int | None = None,
          headers: dict[str, str] | None = None) -> Any:
    sent = {"Content-Type": "multipart/form-data; boundary=x", **(headers or {})}
    if announce is not None:
        sent["Content-Length"] = str(announce)
    return client.request(method, url, content=body, headers=sent)


def _credentials(surface: dict[str, Any], method: str, path: str) -> tuple[Api, dict[str, str]]:
    """The client and headers that pass the route's check: the bearer token (API), the
    session and its CSRF token (pages), the login form's cookie (the login form)."""
    if path.startswith("/ui"):
        return surface["browser"], {"X-CSRF-Token": surface["csrf"],
                                    "Accept": "application/json"}
    return surface["bearer"], {}


def test_no_route_reads_a_body_before_its_caller_is_known(surface):
    app, anonymous = surface["app"], surface["anonymous"]
    leaks, answered = [], []
    for method, route in _every(app):
        if (method, route.path) in PUBLIC:
            continue
        url = route.url(VALUES)
        for announce in (1 << 20, None):  # announced, and streamed without a length
            body = Body(1 << 20)
            anonymous.client.cookies.clear()  # a refused login form hands out a fresh cookie
            answer = _send(anonymous, method, url, body, announce=announce,
                           headers={"Accept": "application/json"})
            if answer.status_code not in REFUSED_ANONYMOUS or body.pulled:
                leaks.append((method, route.path, announce, answer.status_code, body.pulled))
            answered.append(answer.status_code)
    assert not leaks, f"routes that read a body (or answered) without a caller: {leaks}"
    assert {401, 403} <= set(answered)  # the API's and the login form's refusals both seen


def test_every_route_caps_its_body_before_and_while_reading_it(surface):
    app = surface["app"]
    over_announced, taking_files = [], set()
    # logging out ends the session the other routes are tried with: last
    for method, route in sorted(_every(app), key=lambda pair: pair[1].path == "/ui/logout"):
        if method in ("GET", "HEAD") and (method, route.path) not in PUBLIC:
            continue  # event streams and pages: a GET's body is never read by a route
        client, headers = _credentials(surface, method, route.path)
        if (method, route.path) in PUBLIC:
            client, headers = surface["anonymous"], {}
        url = route.url(VALUES)
        body = Body(UPLOAD_CAP + 1)
        answer = _send(client, method, url, body, announce=UPLOAD_CAP + 1, headers=headers)
        if answer.status_code != 413 or body.pulled:
            over_announced.append((method, route.path, answer.status_code, body.pulled))
        if method in ("GET", "HEAD"):
            continue
        body = Body(4 * JSON_CAP)  # no length: the guard counts it as the app reads it
        answer = _send(client, method, url, body, headers=headers)
        if body.pulled > JSON_CAP + CHUNK:
            taking_files.add((method, route.path))
        elif body.pulled > JSON_CAP:
            assert answer.status_code == 413, (method, route.path, answer.status_code)
    assert not over_announced, f"bodies announced past the upload limit not refused at once: " \
                               f"{over_announced}"
    assert taking_files == UPLOADS, "routes that read a multipart body past the JSON limit"


def test_the_routes_without_a_caller_are_exactly_the_public_ones(surface):
    app, anonymous = surface["app"], surface["anonymous"]
    public = set()
    for method, route in _every(app):
        anonymous.client.cookies.clear()
        answer = anonymous.request(method, route.url(VALUES),
                                   headers={"Accept": "application/json"})
        if answer.status_code not in REFUSED_ANONYMOUS | {404, 405, 422}:
            public.add((method, route.path))
    assert public <= PUBLIC, f"routes that answer a caller without credentials: " \
                             f"{sorted(public - PUBLIC)}"
    assert {("GET", "/healthz"), ("GET", "/ui/login"), ("GET", "/openapi.json")} <= public
