"""What every page shares: the template environment (autoescaping on, undefined names are
errors), the security headers, the route class that turns service errors into HTML pages (or
JSON for the page's own scripts), and small formatting filters.

Nothing from the data is ever marked safe: dialogue text, slot names, system names and file
names all go through Jinja's autoescape, into text nodes or quoted attributes, never into a
URL scheme position. Links are built from job ids (server-made) and URL-quoted path parts.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._errors import ServiceError
from .._validation import REQUEST_PARTS, first_problem
from .._version import __version__
from ..service import JobStatus, uploading

PREFIX = "/ui"
PACKAGE = Path(__file__).parent
STATIC = PACKAGE / "static"

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
"""No inline script or style, no other origin: an injected ``<script>`` or ``onerror=`` would
not run even if escaping failed somewhere."""

SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}


def _percent(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{float(value):.{digits}f} %"


def _money(value: Any) -> str:
    if value is None:
        return "–"
    value = float(value)
    return f"${value:.4f}" if value < 10 else f"${value:,.2f}"


def _when(value: Any) -> str:
    """ISO times of the API as a short UTC time (the full time is in the title)."""
    if not value:
        return "–"
    text = str(value)
    return text[:16].replace("T", " ")


def _count(value: Any) -> str:
    return "–" if value is None else f"{int(value):,}"


def _seconds(value: Any) -> str:
    if value is None:
        return "–"
    value = float(value)
    if value < 90:
        return f"{value:.0f} s"
    return f"{value / 60:.0f} min"


def plural(value: Any, one: str, many: str | None = None) -> str:
    """``1 label``, ``3 labels``, ``1,204 turns``: a count with its noun in the right number."""
    count = int(value or 0)
    return f"{count:,} {one if count == 1 else (many or one + 's')}"


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def _short(value: Any, size: int = 120) -> str:
    text = " ".join(str(value or "").split())
    return text if len(text) <= size else text[: size - 1] + "…"


def _url(path: str, **query: Any) -> str:
    """A link inside the interface: ``path`` with quoted parts and the non-empty query."""
    pairs = [(k, v) for k, v in query.items() if v not in (None, "", [], False)]
    flat: list[tuple[str, Any]] = []
    for key, value in pairs:
        if isinstance(value, (list, tuple)):
            flat.extend((key, v) for v in value)
        else:
            flat.append((key, value))
    return PREFIX + path + (("?" + urlencode(flat)) if flat else "")


def _part(value: Any) -> str:
    """One URL path segment (a dialogue id may hold '/', '?', '#' or anything else)."""
    return quote(str(value), safe="")


def _turn_url(job_id: str, dialogue_id: str, turn_index: int, **query: Any) -> str:
    return _url(f"/runs/{_part(job_id)}/turns/{_part(dialogue_id)}/{int(turn_index)}", **query)


def make_environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(PACKAGE / "templates")),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True, auto_reload=False)
    env.filters.update(percent=_percent, money=_money, when=_when, count=_count,
                       seconds=_seconds, pretty=_pretty, short=_short, plural=plural)
    env.globals.update(url=_url, turn_url=_turn_url, part=_part, version=__version__,
                       prefix=PREFIX, JobStatus=JobStatus)  # states named by the lifecycle
    return env


ENV = make_environment()


def render(request: Request, name: str, *, code: int = 200, **context: Any) -> HTMLResponse:
    """A full page or a fragment from ``templates/<name>``; ``viewer`` and ``csrf`` come from
    the request's session when there is one."""
    viewer = getattr(request.state, "viewer", None)
    context.setdefault("viewer", viewer)
    context.setdefault("csrf", viewer.csrf if viewer is not None else "")
    context.setdefault("request_path", request.url.path)
    html = ENV.get_template(name).render(**context)
    return HTMLResponse(html, status_code=code, headers={"Cache-Control": "no-store"})


def wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def error_response(request: Request, status: int, message: str, field: str | None = None
                   ) -> Response:
    """A refusal as the caller wants it: JSON for the page's scripts, a redirect to the login
    page for a browser without a session, else an HTML page with the message."""
    if wants_json(request):
        return JSONResponse({"error": {"status": status, "message": message, "field": field}},
                            status_code=status)
    if status == 401 and request.method == "GET":
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(_url("/login", next=target), status_code=303)
    return render(request, "error.html", code=status, status_code=status, message=message,
                  field=field)


class Preparing(Exception):
    """The page needs something being computed in the background (a large run's turn index,
    ranked candidates): the browser gets a short page that reloads itself, a script 202 with
    ``Retry-After``; the request never waits for the computation."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


RETRY_SECONDS = 2


def preparing_response(request: Request, what: str) -> Response:
    headers = {"Retry-After": str(RETRY_SECONDS), "Cache-Control": "no-store"}
    if wants_json(request):
        return JSONResponse({"preparing": what}, status_code=202, headers=headers)
    again = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    response = render(request, "preparing.html", code=202, what=what, retry=RETRY_SECONDS,
                      again=again)
    response.headers.update(headers)
    return response


class WebRoute(APIRoute):
    """Routes of the interface: a :class:`ServiceError` (401, 403, 404, 409, 422...) becomes
    a page or a JSON error instead of the API's JSON body; :class:`Preparing` a page that
    reloads itself."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except ServiceError as exc:
                return error_response(request, exc.status, exc.reason, exc.field)
            except Preparing as exc:
                return preparing_response(request, exc.what)
            except RequestValidationError as exc:
                problem = first_problem(exc.errors(), skip=REQUEST_PARTS)
                return error_response(request, 422, problem.message, problem.path or None)
            except StarletteHTTPException as exc:
                return error_response(request, exc.status_code, str(exc.detail))

        return guarded


async def json_body(request: Request) -> Any:
    """The request's JSON body, only when it says it is JSON: the request guard has then
    held it to the API's rules (size, number of values, depth, NaN), which it applies to the
    bodies that say so. Any other body is refused (415) before it is parsed."""
    if b"json" not in request.headers.get("content-type", "").lower().encode("latin-1"):
        raise ServiceError("expected a JSON body (Content-Type: application/json)",
                           status=415)
    try:
        return await request.json()
    except ValueError:
        raise ServiceError("expected a JSON body", status=422) from None


def _takes_uploads() -> None:
    """A dependency marking a route whose form carries files: the request guard lets its
    multipart body grow to the upload limit (other routes' bodies stop at the JSON limit)."""


takes_uploads = uploading(_takes_uploads)


class SecurityHeaders:
    """ASGI middleware: the headers above on every response of the interface (pages, static
    files, downloads, event streams), without touching the API's responses."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.headers = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == "/" or path == PREFIX or path.startswith(PREFIX + "/")):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []),
                                      *((k, v) for k, v in self.headers if k not in present)]
            await send(message)

        await self.app(scope, receive, with_headers)


def now() -> float:
    return time.time()


def iso(moment: float | None) -> str | None:
    if moment is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))
