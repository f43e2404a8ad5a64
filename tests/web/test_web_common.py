"""The shared helpers of every page (``web/_common``) called directly: the formatting
filters, URLs, the template environment, preparing and error responses, the security headers,
the route class that turns exceptions into pages or JSON, and rendering for a viewer."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jinja2
import pytest

pytest.importorskip("fastapi", reason="the web interface needs the serve extra")

from judge._errors import ServiceError
from judge._version import __version__
from judge.web import _common

from .views import request_for


def test_formatting_filters() -> None:
    """Percentages, money, times, counts, durations and plurals as the pages print them."""
    assert _common._percent(None) == "–"
    assert _common._percent(float("nan")) == "–"
    assert _common._percent(12.345) == "12.3 %"
    assert _common._percent(12.345, 2) == "12.35 %"
    assert _common._percent(7) == "7.0 %"
    assert _common._money(None) == "–"
    assert _common._money(1.5) == "$1.5000"
    assert _common._money(9.99999) == "$10.0000"
    assert _common._money(10) == "$10.00"
    assert _common._money(1234.5) == "$1,234.50"
    assert _common._when(None) == "–"
    assert _common._when("") == "–"
    assert _common._when("2026-01-02T03:04:05.123Z") == "2026-01-02 03:04"
    assert _common._count(None) == "–"
    assert _common._count(1234567) == "1,234,567"
    assert _common._count(0) == "0"
    assert _common._seconds(None) == "–"
    assert _common._seconds(89.4) == "89 s"
    assert _common._seconds(90) == "2 min"
    assert _common._seconds(600) == "10 min"
    assert _common.plural(1, "label") == "1 label"
    assert _common.plural(3, "label") == "3 labels"
    assert _common.plural(None, "label") == "0 labels"
    assert _common.plural(1204, "turn") == "1,204 turns"
    assert _common.plural(2, "reply", "replies") == "2 replies"
    assert _common.plural(1, "reply", "replies") == "1 reply"


def test_pretty_and_short() -> None:
    """JSON shown indented, unescaped and in its own key order; long text cut with '…'."""
    assert _common._pretty({"b": 1, "a": ["é"]}) == '{\n  "b": 1,\n  "a": [\n    "é"\n  ]\n}'
    assert _common._pretty({"when": 1.5, "x": object}) == (
        '{\n  "when": 1.5,\n  "x": "' + str(object) + '"\n}')
    assert _common._short("  a \n b\t c ") == "a b c"
    assert _common._short(None) == ""
    assert _common._short("x" * 120) == "x" * 120
    assert _common._short("x" * 121) == "x" * 119 + "…"
    assert _common._short("abcdefgh", 5) == "abcd…"
    assert _common._short("abcde", 5) == "abcde"


def test_urls_quote_parts_and_drop_empty_query_values() -> None:
    """Links: the /ui prefix, path parts quoted whole, empty query values left out, lists
    repeated."""
    assert _common._url("/runs") == "/ui/runs"
    assert _common._url("/runs", a=1, b="", c=None, d=[], e=False, f=["p", "q"],
                        g=("r",), h="x y") == "/ui/runs?a=1&f=p&f=q&g=r&h=x+y"
    assert _common._part("a/b?c#d e&") == "a%2Fb%3Fc%23d%20e%26"
    assert _common._part(7) == "7"
    assert _common._turn_url("j/1", "d/1?#", "3", verdict="correct", q="") == (
        "/ui/runs/j%2F1/turns/d%2F1%3F%23/3?verdict=correct")


def test_template_environment() -> None:
    """Autoescaping on, undefined names are errors, block whitespace trimmed, the filters and
    globals the templates use."""
    env = _common.make_environment()
    assert env.from_string("{{ x }}").render(x="<b>&") == "&lt;b&gt;&amp;"
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()
    assert env.from_string("  {% if true %}\nA{% endif %}\n").render() == "A"
    assert env.globals["version"] == __version__
    assert env.globals["prefix"] == "/ui"
    assert env.globals["url"] is _common._url
    assert env.globals["turn_url"] is _common._turn_url
    assert env.globals["part"] is _common._part
    for name, func in (("percent", _common._percent), ("money", _common._money),
                       ("when", _common._when), ("count", _common._count),
                       ("seconds", _common._seconds), ("pretty", _common._pretty),
                       ("short", _common._short), ("plural", _common.plural)):
        assert env.filters[name] is func
    assert env.auto_reload is False
    assert env.get_template("preparing.html").filename.endswith("templates/preparing.html")
    page = env.from_string("{{ version }} {{ 3 | plural('run') }} {{ turn_url('j', 'd', 1) }}")
    assert page.render() == f"{__version__} 3 runs /ui/runs/j/turns/d/1"


def test_preparing_response_for_scripts_and_for_browsers() -> None:
    """A script gets 202 {"preparing": what} with Retry-After; a browser a page that reloads
    the same address."""
    scripted = _common.preparing_response(
        request_for(accept="application/json"), "the turn index of run j")
    assert scripted.status_code == 202
    assert json.loads(scripted.body) == {"preparing": "the turn index of run j"}
    assert scripted.headers["retry-after"] == "2"
    assert scripted.headers["cache-control"] == "no-store"
    page = _common.preparing_response(request_for(query="page=2&q=x"), "the <index>")
    assert page.status_code == 202
    assert page.headers["retry-after"] == "2"
    assert page.headers["cache-control"] == "no-store"
    html = page.body.decode()
    assert '<meta http-equiv="refresh" content="2">' in html
    assert "computing the &lt;index&gt; in the background" in html
    assert "reloads itself every 2 seconds" in html
    assert 'href="/ui/runs/x?page=2&amp;q=x"' in html
    bare = _common.preparing_response(request_for(), "it").body.decode()
    assert 'href="/ui/runs/x">Reload now' in bare


def test_wants_json() -> None:
    """JSON only when asked for and HTML is not."""
    assert _common.wants_json(request_for(accept="application/json"))
    assert not _common.wants_json(request_for(accept="text/html, application/json"))
    assert not _common.wants_json(request_for(accept="*/*"))


def test_error_response_as_json_redirect_or_page() -> None:
    """A refusal: JSON for scripts, a login redirect for a GET without a session, else a page
    with the status and the message."""
    scripted = _common.error_response(request_for(accept="application/json"), 409, "busy",
                                      "options.x")
    assert scripted.status_code == 409
    assert json.loads(scripted.body) == {"error": {"status": 409, "message": "busy",
                                                   "field": "options.x"}}
    login = _common.error_response(request_for(query="page=2"), 401, "log in")
    assert login.status_code == 303
    assert login.headers["location"] == "/ui/login?next=%2Fui%2Fruns%2Fx%3Fpage%3D2"
    plain = _common.error_response(request_for(), 401, "log in")
    assert plain.headers["location"] == "/ui/login?next=%2Fui%2Fruns%2Fx"
    posted = _common.error_response(request_for(method="POST"), 401, "log in")
    assert posted.status_code == 401
    assert "401: not logged in" in posted.body.decode()
    page = _common.error_response(request_for(), 404, "no <such> run", "job")
    assert page.status_code == 404
    html = page.body.decode()
    assert "404: not found" in html
    assert "<code>job</code>: no &lt;such&gt; run" in html
    assert page.headers["cache-control"] == "no-store"
    assert "403: not allowed" in _common.error_response(request_for(), 403, "no").body.decode()


def test_iso_and_now() -> None:
    """Times as the API writes them."""
    assert _common.iso(None) is None
    assert _common.iso(0) == "1970-01-01T00:00:00Z"
    assert _common.iso(86400 + 3661.7) == "1970-01-02T01:01:01Z"
    assert abs(_common.now() - __import__("time").time()) < 5


def test_security_headers_only_on_the_interface() -> None:
    """The middleware adds the headers to /, /ui and /ui/... responses (keeping one the app
    set) and leaves the API's alone."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        request = await receive()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"x-frame-options", b"SAMEORIGIN")]})
        await send({"type": "http.response.body", "body": request["body"]})

    wrapped = _common.SecurityHeaders(app)

    def headers_of(path: str) -> dict[bytes, bytes]:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"ok", "more_body": False}

        asyncio.run(wrapped({"type": "http", "path": path}, receive, send))
        assert sent[1] == {"type": "http.response.body", "body": b"ok"}
        return dict(sent[0]["headers"])

    for path in ("/", "/ui", "/ui/runs/1"):
        got = headers_of(path)
        assert got[b"content-security-policy"] == _common.CSP.encode()
        assert got[b"x-content-type-options"] == b"nosniff"
        assert got[b"x-frame-options"] == b"SAMEORIGIN"
        assert got[b"referrer-policy"] == b"same-origin"
        assert got[b"permissions-policy"] == b"camera=(), microphone=(), geolocation=()"
    for path in ("/v1/jobs", "/uix", "/docs"):
        assert headers_of(path) == {b"x-frame-options": b"SAMEORIGIN"}


def _route_app() -> Any:
    from fastapi import APIRouter, FastAPI
    from starlette.exceptions import HTTPException

    router = APIRouter(route_class=_common.WebRoute)

    @router.get("/ui/refused")
    def refused() -> None:
        raise ServiceError("no such run", status=404, field="job_id")

    @router.get("/ui/later")
    def later() -> None:
        raise _common.Preparing("the turn index of run j")

    @router.get("/ui/number")
    def number(n: int) -> dict[str, int]:
        return {"n": n}

    @router.get("/ui/teapot")
    def teapot() -> None:
        raise HTTPException(418, "short and stout")

    app = FastAPI()
    app.include_router(router)
    return app


def test_web_route_turns_exceptions_into_pages_or_json() -> None:
    """Service errors, preparing work, invalid parameters and HTTP errors of a page become
    the interface's error page, or JSON for scripts."""
    import httpx

    async def go() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=_route_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            js = {"accept": "application/json"}
            return [await client.get("/ui/refused", headers=js),
                    await client.get("/ui/refused"),
                    await client.get("/ui/later", headers=js),
                    await client.get("/ui/number?n=x", headers=js),
                    await client.get("/ui/number", headers=js),
                    await client.get("/ui/number?n=4", headers=js),
                    await client.get("/ui/teapot", headers=js)]

    refused, page, later, bad, missing, fine, teapot = asyncio.run(go())
    assert refused.status_code == 404
    assert refused.json() == {"error": {"status": 404, "message": "no such run",
                                        "field": "job_id"}}
    assert page.status_code == 404 and "<code>job_id</code>: no such run" in page.text
    assert later.status_code == 202 and later.json() == {"preparing": "the turn index of run j"}
    assert later.headers["retry-after"] == "2"
    assert bad.status_code == 422
    assert bad.json()["error"]["field"] == "n"
    assert "integer" in bad.json()["error"]["message"]
    assert missing.status_code == 422 and missing.json()["error"] == {
        "status": 422, "message": "Field required", "field": "n"}
    assert fine.json() == {"n": 4}
    assert teapot.status_code == 418
    assert teapot.json() == {"error": {"status": 418, "message": "short and stout",
                                       "field": None}}


class _Viewer:
    name, project, csrf = "alice", "lab", "tok-123"
    principal = type("P", (), {"scopes": ["read", "submit"]})()

    def can(self, scope: str) -> bool:
        return scope == "submit"


def test_render_fills_viewer_csrf_and_path_from_the_request() -> None:
    """A page rendered for a logged-in viewer carries their CSRF token, name and the current
    page marked in the navigation; without a viewer the token is empty; the status and no-store
    header are set."""
    request = request_for(path="/ui/compare")
    request.state.viewer = _Viewer()
    page = _common.render(request, "error.html", code=409, status_code=409, message="m",
                          field=None)
    assert page.status_code == 409 and page.headers["cache-control"] == "no-store"
    html = page.body.decode()
    assert '<meta name="csrf-token" content="tok-123">' in html
    assert '<input type="hidden" name="csrf" value="tok-123">' in html
    assert "<strong>alice</strong> · lab · read, submit" in html
    assert 'href="/ui/compare" aria-current="page"' in html
    assert 'href="/ui/runs/new">New evaluation' in html
    assert f"dst-judge {__version__} ·" in html
    assert "409: cannot do that" in html
    anonymous = _common.render(request_for(), "error.html", status_code=404, message="m",
                               field=None)
    assert anonymous.status_code == 200
    assert '<meta name="csrf-token" content="">' in anonymous.body.decode()
    assert "Log out" not in anonymous.body.decode()
    chosen = _common.render(request, "error.html", csrf="given", request_path="/ui/review",
                            status_code=400, message="m", field=None).body.decode()
    assert '<meta name="csrf-token" content="given">' in chosen
    assert 'href="/ui/review" aria-current="page"' in chosen
