"""Browser sessions on the API's tokens.

A person logs in once with their bearer token; the server answers with a session cookie that
is HttpOnly (scripts cannot read it), SameSite=Strict (other sites cannot send it), limited
to the interface's path and Secure behind HTTPS; what it holds, how it is sealed and where its
key comes from is :mod:`._viewer`'s (a cookie kept after logging out opens nothing). Scopes
are the API's: ``read`` browses, ``submit`` runs and cancels, ``review`` labels.

Every route behind the login gets its checks from the router, not from its own code
(:func:`guard`, a dependency of the router that holds all of them): the session's viewer
first (401 without one; checked by the service's request guard from the cookie alone, before
a byte of the body is read, through the :class:`Gate` the dependency carries), then, for every
state-changing method, the session's CSRF token (a hidden form field, or the ``X-CSRF-Token``
header of the page's scripts; 403 without it). Scopes are dependencies of the routes that need
them (:func:`needs`). The login form, which has no session yet, uses a double-submit cookie
(its cookie is checked before the body too), and its wrong tokens count against the address's
limit of failed authentications, like the API's (429 once it is spent).
"""

from __future__ import annotations

import hmac
import math
import secrets
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.params import Depends as DependsMarker
from fastapi.responses import RedirectResponse, Response

from .._errors import ServiceError
from ..service import (
    Gate,
    Principal,
    Refusal,
    ServiceDep,
    gated,
    note_auth_failure,
)
from ._common import PREFIX, WebRoute, error_response, render
from ._state import web_state
from ._viewer import COOKIE, SESSION_SECONDS, Viewer, check_csrf

LOGIN_COOKIE = "dsj_login"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def current_viewer(request: Request) -> Viewer:
    """The request's viewer, or 401 (a dependency: resolved once per request)."""
    return web_state(request).sessions.viewer(request)


CurrentViewer = Annotated[Viewer, Depends(current_viewer)]


async def guard(request: Request, viewer: CurrentViewer) -> None:
    """The dependency of the router behind the login: a viewer for every route, and the
    session's CSRF token (header or form field) for every state-changing method."""
    if request.method in SAFE_METHODS:
        return
    given = request.headers.get(CSRF_HEADER)
    if not given and request.headers.get("content-type", "").startswith(FORM_TYPES):
        value = (await request.form()).get("csrf")  # parsed once; the handler reuses it
        given = value if isinstance(value, str) else None
    check_csrf(viewer, given)


def _session_gate(scope: dict[str, Any]) -> Principal:
    """The request guard's check of a page's session, from the cookie alone (before the
    body): the viewer is kept for the route, which then does not look it up again."""
    request = Request(scope)
    viewer = web_state(request).sessions.viewer(request)
    return viewer.principal


def _refusal_page(scope: dict[str, Any], refusal: Refusal) -> Response:
    """A refusal of the guard as the interface answers it: the login page for a browser
    without a session, a page or JSON otherwise."""
    response = error_response(Request(scope), refusal.status, refusal.message, refusal.field)
    response.headers.update(refusal.headers)
    return response


gated(guard, Gate(_session_gate, _refusal_page))


def needs(scope: str) -> DependsMarker:
    """A route dependency: the viewer's token has ``scope`` (else 403)."""

    def allowed(viewer: CurrentViewer) -> None:
        viewer.require(scope)

    return DependsMarker(allowed)


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def _safe_next(target: str | None) -> str:
    """Only paths of the interface: no other host, no scheme, no protocol-relative URL."""
    if (not target or not target.startswith(PREFIX + "/") or target.startswith("//")
            or "\\" in target or any(ord(c) < 32 for c in target)):
        return PREFIX + "/"
    return target


public = APIRouter(route_class=WebRoute)
"""The login form: the only routes without a session."""
router = APIRouter(route_class=WebRoute)
"""Routes of a session (included under :func:`guard`)."""


@public.get("/login")
def login_page(request: Request, next: str | None = None) -> Response:
    nonce = secrets.token_urlsafe(24)
    response = render(request, "login.html", viewer=None, csrf=nonce, next=_safe_next(next),
                      error=None)
    response.set_cookie(LOGIN_COOKIE, nonce, max_age=3600, httponly=True, samesite="strict",
                        secure=_secure(request), path=PREFIX)
    return response


EXPIRED_FORM = "The login form expired; please try again."


def _login_form_gate(scope: dict[str, Any]) -> None:
    """The login form's double-submit cookie, checked by the request guard before the body
    (without it the form's answer is 403 whatever the body holds)."""
    if not Request(scope).cookies.get(LOGIN_COOKIE):
        raise ServiceError(EXPIRED_FORM, status=403)


def _login_refusal_page(scope: dict[str, Any], refusal: Refusal) -> Response:
    request = Request(scope)
    response = _login_again(request, _safe_next(request.query_params.get("next")),
                            refusal.message, refusal.status)
    response.headers.update(refusal.headers)
    return response


def login_form() -> None:
    """The login route's dependency that carries its :class:`Gate` (no work of its own)."""


gated(login_form, Gate(_login_form_gate, _login_refusal_page))


@public.post("/login", dependencies=[Depends(login_form)])
def login(request: Request, service: ServiceDep, token: Annotated[str, Form()] = "",
          csrf: Annotated[str, Form()] = "", next: Annotated[str, Form()] = "") -> Response:
    expected = request.cookies.get(LOGIN_COOKIE) or ""
    target = _safe_next(next)
    if not expected or not hmac.compare_digest(csrf.encode(), expected.encode()):
        return _login_again(request, target, EXPIRED_FORM, 403)
    token = token.strip()
    try:
        principal = service.tokens.resolve_token(token) if token else None
    except ServiceError:
        principal = None
    if principal is None:
        wait = note_auth_failure(request.scope)
        if wait:
            seconds = max(1, math.ceil(wait))
            response = _login_again(request, target, "Too many failed logins from this "
                                    f"address; try again in {seconds} s.", 429)
            response.headers["Retry-After"] = str(seconds)
            return response
        return _login_again(request, target, "That token is not valid (or was revoked).", 401)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(COOKIE, web_state(request).sessions.issue(principal.token_id),
                        max_age=SESSION_SECONDS, httponly=True, samesite="strict",
                        secure=_secure(request), path=PREFIX)
    response.delete_cookie(LOGIN_COOKIE, path=PREFIX)
    return response


def _login_again(request: Request, target: str, message: str, status: int) -> Response:
    nonce = secrets.token_urlsafe(24)
    response = render(request, "login.html", code=status, viewer=None, csrf=nonce,
                      next=target, error=message)
    response.set_cookie(LOGIN_COOKIE, nonce, max_age=3600, httponly=True, samesite="strict",
                        secure=_secure(request), path=PREFIX)
    return response


@router.post("/logout")
def logout(viewer: CurrentViewer, service: ServiceDep) -> Response:
    """End the session in the database (every replica refuses its cookie from now on) and
    drop the cookie."""
    service.tokens.end_session(viewer.session)
    response = RedirectResponse(PREFIX + "/login", status_code=303)
    response.delete_cookie(COOKIE, path=PREFIX)
    return response
