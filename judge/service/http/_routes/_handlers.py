"""Every error the API answers is an :class:`~judge._api_models.Error`: refusals of the
service, request validation, HTTP errors of the framework (404 of unknown paths, 405 with its
``Allow`` header) and, as the last resort, an internal error with no traceback in the body."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute

from ...._api_models import error_body
from ...._errors import ServiceError
from ...._validation import REQUEST_PARTS, first_problem

log = logging.getLogger("dst_judge.service")
ExceptionHandler = Callable[[Request, Exception], Awaitable[JSONResponse]]


async def service_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return JSONResponse(error_body(exc.status, exc.reason, exc.field), status_code=exc.status,
                        headers=headers)


async def validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    # the request's field as a JSON path (``options.top_p``, ``inputs.runs[1]``), without
    # ``body``/``query``/... in front
    problem = first_problem(exc.errors(), skip=REQUEST_PARTS)
    if problem.kind == "json_invalid":  # its location is a character, not a field
        position = problem.location[-1] if problem.location else "?"
        return JSONResponse(error_body(422, f"the body is not valid JSON (at character "
                                            f"{position})"), status_code=422)
    return JSONResponse(error_body(422, problem.message, problem.path or None), status_code=422)


def allowed_methods(routes: Iterable[BaseRoute], path: str) -> set[str]:
    """Every method some route serves at ``path``."""
    return {method for route in routes if isinstance(route, APIRoute)
            and route.path_regex.match(path) for method in route.methods or ()}


def http_error_handler(routes: Iterable[BaseRoute]) -> ExceptionHandler:
    """The framework's own errors, with their headers. A 405's ``Allow`` names every method
    of the path: the router's names only those of the first route it matched (``GET`` of
    ``/v1/jobs`` when ``POST`` was asked, not ``POST`` of the other route)."""
    known = tuple(routes)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            methods = {m.strip() for m in headers.get("Allow", "").split(",") if m.strip()}
            methods |= allowed_methods(known, request.url.path)
            headers["Allow"] = ", ".join(sorted(methods))
        return JSONResponse(error_body(exc.status_code, str(exc.detail)),
                            status_code=exc.status_code, headers=headers)

    return http_error


async def internal_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("internal error on %s %s", request.method, request.url.path)
    return JSONResponse(error_body(500, "internal error in the server (see its log)"),
                        status_code=500)


def install_error_handlers(app: FastAPI, routes: Iterable[BaseRoute]) -> None:
    """Answer every error as an :class:`Error`; ``routes`` are those a 405's ``Allow``
    names the methods of."""
    app.add_exception_handler(ServiceError, service_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error_handler(routes))
    app.add_exception_handler(Exception, internal_error)
