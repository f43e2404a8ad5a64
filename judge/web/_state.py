"""What the pages of one app share (sessions, turn indexes, review and candidate queues, the
background agreement), made once by :func:`._app.mount_web`, and the typed dependency
(:data:`WebDep`) through which pages reach it: the one place that reads it off the app."""

from __future__ import annotations

import functools
from typing import Annotated

from fastapi import Depends, Request

from .._errors import ServiceError
from ..service import JudgmentReads, Service
from ._agreement import AgreementBoard
from ._candidates import CandidateQueues
from ._index import IndexCache
from ._queues import Queues
from ._viewer import Sessions


class WebState:
    """What the pages of one app share."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.reads = JudgmentReads(service)
        self.index = IndexCache(self.reads)
        self.agreement = AgreementBoard(service)
        self.queues = Queues(service, self.reads, self.agreement)
        self.corrections = CandidateQueues(service)
        self._labels: dict[str, str | None] = {}

    @functools.cached_property
    def sessions(self) -> Sessions:
        # made on first use: the data directory (holding the key) exists once the app started
        return Sessions(self.service)

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


def web_state(request: Request) -> WebState:
    """The app's :class:`WebState` (a dependency; also what the session gate uses before a
    route runs)."""
    web: WebState = request.app.state.web
    return web


WebDep = Annotated[WebState, Depends(web_state)]
