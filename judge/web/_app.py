"""Mounting the interface on the service's FastAPI app (``mount_web``, called by the
service's app factory): the routers under ``/ui``, the packaged static files, the security
headers, and the per-app state the pages share (:class:`._state.WebState`: sessions, turn
indexes, review queues, the background agreement), made here once.

Every route but the login form is included under one router whose dependency
(:func:`._session.guard`) checks the session and, for state-changing methods, the CSRF token:
a new page gets both by being added to a module's router, with no call of its own.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from . import _compare, _corrections, _detail, _leaderboard, _review, _runs, _session
from ._common import PREFIX, STATIC, SecurityHeaders
from ._state import WebState

PAGES = (_session, _runs, _review, _corrections, _compare, _leaderboard, _detail)
"""The modules whose ``router`` holds pages of a session."""


def web_router() -> APIRouter:
    """The interface's routes: the login form, and every page under the session guard."""
    router = APIRouter(prefix=PREFIX, include_in_schema=False)
    router.include_router(_session.public)
    guarded = APIRouter(dependencies=[Depends(_session.guard)])
    for module in PAGES:
        guarded.include_router(module.router)
    router.include_router(guarded)
    return router


def mount_web(app: FastAPI) -> None:
    """Add the web interface to the service ``app`` (made by ``judge.service.create_app``)."""
    app.state.web = WebState(app.state.service)
    app.include_router(web_router())
    app.mount(PREFIX + "/static", StaticFiles(directory=STATIC), name="web-static")
    app.add_middleware(SecurityHeaders)

    @app.get("/", include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse(PREFIX + "/", status_code=307)
