"""Mounting the interface on the service's FastAPI app (``mount_web``, called by the
service's app factory): the routers under ``/ui``, the packaged static files, the security
headers, and the per-app state the pages share (sessions, turn indexes, review queues, the
background agreement).

Every route but the login form is included under one router whose dependency
(:func:`._session.guard`) checks the session and, for state-changing methods, the CSRF token:
a new page gets both by being added to a module's router, with no call of its own.
"""

from __future__ import annotations

import functools

from fastapi import APIRouter, Depends, FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from .._errors import ServiceError
from ..service import JudgmentReads, Service
from . import _compare, _corrections, _detail, _review, _runs, _session
from ._agreement import AgreementBoard
from ._common import PREFIX, STATIC, SecurityHeaders
from ._index import IndexCache
from ._review import Queues

PAGES = (_session, _runs, _review, _corrections, _compare, _detail)
"""The modules whose ``router`` holds pages of a session."""


class WebState:
    """What the pages of one app share."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.reads = JudgmentReads(service)
        self.index = IndexCache(self.reads)
        self.agreement = AgreementBoard(service)
        self.queues = Queues(service, self.reads, self.agreement)
        self.corrections = _corrections.CandidateQueues(service)
        self._labels: dict[str, str | None] = {}

    @functools.cached_property
    def sessions(self) -> _session.Sessions:
        # made on first use: the data directory (holding the key) exists once the app started
        return _session.Sessions(self.service)

    def file_label(self, project_id: str, file_id: str) -> str | None:
        """A predictions file's system name (or file name); file records never change."""
        if file_id not in self._labels:
            try:
                record = self.service.files.get(project_id, file_id)
            except ServiceError:
                return None
            info = record.get("info") or {}
            self._labels[file_id] = info.get("system_name") or record.get("name")
        return self._labels[file_id]


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
