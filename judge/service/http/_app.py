"""The HTTP API (FastAPI; OpenAPI document at ``/openapi.json``, reference at ``/docs``).

Every route under ``/v1`` needs a bearer token; what it may touch is its own project's data
(anything else is a 404, never a 403, so ids of other projects cannot be probed) and what its
scopes allow (403). Errors are JSON: ``{"error": {"status", "message", "field"}}`` where
``field`` is a JSON path into the request (``options.base_url``, ``inputs.schema``).

The routes live in ``_routes/`` (one module per resource); this module only composes them.
Handlers are plain functions run in FastAPI's thread pool against the synchronous SQLAlchemy
engine; long work never happens here (jobs run in the worker), so the API stays fast under a
full queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator

from fastapi import FastAPI

from ..._version import __version__
from ..db import ServiceSettings
from ._guard import RequestGuard
from ._routes import (
    ROUTERS,
    TAGS,
    build_openapi,
    install_docs,
    install_error_handlers,
    operation_id,
)
from ._service import Service

__all__ = ["Service", "create_app"]


def create_app(settings: ServiceSettings, *, run_worker: bool = True) -> FastAPI:
    """The service app; the database is migrated and the worker started on startup."""
    service = Service(settings, run_worker=run_worker)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(service.start)
        try:
            yield
        finally:
            await asyncio.to_thread(service.stop)

    app = FastAPI(title="dst-judge service", version=__version__, lifespan=lifespan,
                  description="Score dialogue state tracking systems with an LLM judge and "
                  "the exact-match metric suite, as a shared service.",
                  openapi_tags=TAGS, docs_url=None, redoc_url=None,
                  generate_unique_id_function=operation_id)
    app.state.service = service
    app.add_middleware(RequestGuard, service=service)
    install_error_handlers(app, [route for router in ROUTERS for route in router.routes])
    for router in ROUTERS:
        app.include_router(router)
    install_docs(app)
    # replacing app.openapi is FastAPI's documented way to finish the document; mypy refuses
    # any assignment to a method
    app.openapi = functools.partial(  # type: ignore[method-assign]
        build_openapi, app, ROUTERS, settings)
    return app
