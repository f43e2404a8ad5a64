"""The finishing touches of ``/openapi.json`` that depend on the server's settings or are
derived from the routes themselves: each operation's required scope (read off its
dependencies, so the document cannot disagree with the code) and the size limit of each
request body."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from ...._api_models import Error
from ...db import ServiceSettings
from ._common import errors, require_scope


def operation_id(route: APIRoute) -> str:
    """Operation ids are the handlers' names (``list_jobs``, ``create_job``): stable,
    readable, and what a generated client names its functions after."""
    return route.name


def scopes_of(dependant: Dependant) -> Iterator[str]:
    """The scopes ``require_scope`` asks for anywhere among a route's dependencies."""
    for dependency in dependant.dependencies:
        if isinstance(dependency.call, require_scope):
            yield dependency.call.required_scope
        yield from scopes_of(dependency)


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):g} MB"


def build_openapi(app: FastAPI, routers: Sequence[APIRouter], settings: ServiceSettings
                  ) -> dict[str, Any]:
    """The app's document, with each operation of ``routers`` finished (once per app)."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description,
                         routes=app.routes, tags=app.openapi_tags)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    error = Error.model_json_schema(ref_template="#/components/schemas/{model}")
    components.update(error.pop("$defs", {}))
    components["Error"] = error
    for name, component in components.items():
        if name.startswith("Body_"):
            _mark_binary(component)
    for router in routers:
        for route in router.routes:
            if isinstance(route, APIRoute) and route.include_in_schema:
                for method in route.methods or ():
                    _finish(schema["paths"][route.path_format][method.lower()], route,
                            settings)
    app.openapi_schema = schema
    return schema


def _mark_binary(component: dict[str, Any]) -> None:
    """Upload fields as ``format: binary`` too: OpenAPI 3.1 says ``contentMediaType``, which
    generators (openapi-python-client) read as a plain string field, not a file."""
    for field in component.get("properties", {}).values():
        if "contentMediaType" in field:
            field["format"] = "binary"


def _finish(operation: dict[str, Any], route: APIRoute, settings: ServiceSettings) -> None:
    scopes = sorted(set(scopes_of(route.dependant)))
    if scopes:
        operation["x-required-scopes"] = scopes
        operation["description"] = (operation.get("description", "") +
                                    f"\n\nScope: `{'`, `'.join(scopes)}`.").strip()
    body = operation.get("requestBody")
    if body is not None:
        multipart = "multipart/form-data" in body.get("content", {})
        limit = settings.max_upload_bytes if multipart else settings.max_json_bytes
        body["x-max-bytes"] = limit
        body["description"] = (body.get("description", "") +
                               f" At most {_megabytes(limit)} (else 413).").strip()
        for code, response in errors(400, 408, 413).items():
            operation["responses"].setdefault(str(code), response)
    for response in operation["responses"].values():
        for media in response.get("content", {}).values():
            if "itemSchema" in media:  # a stream of events: each one is described, not the
                media.pop("schema", None)  # whole stream as one string
    operation["responses"] = dict(sorted(operation["responses"].items()))
