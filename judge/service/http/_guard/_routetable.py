"""What the guard knows of each route before its body is read, looked up in the app at run
time: the scope its caller needs, the :class:`Gate` it carries, whether it takes uploads, and
its integer parameters.

This is the only place that reads FastAPI's route internals (``route.dependant`` and its
``dependencies``, ``body_params``, ``query_params``, ``path_params``,
``field_info.annotation``, ``fastapi.routing.iter_route_contexts``) and Starlette's
``route.matches``; ``tests/service/http/test_guard_internals.py`` fails with a clear message when
an upgrade takes one of them away, and pyproject.toml pins FastAPI to the tested range."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.routing import Match

from ._refusal import Refusal

if TYPE_CHECKING:
    from ...auth import Principal

API_PREFIX = "/v1"

Page = Callable[[dict[str, Any], Refusal], Any]
"""Makes the ASGI response of a refusal for a route that answers in its own form (an HTML
page, a redirect to the login form) instead of the guard's JSON."""


@dataclass(frozen=True)
class Gate:
    """What a route outside ``/v1`` asks the guard to check before its body is read, carried
    as ``guard_gate`` by one of the route's dependencies (the web interface's session check):

    ``check(scope)`` runs in a thread and gives the caller's principal (None: the route has
    no caller, like a login form) or raises :class:`ServiceError` (401, 403...), which the
    guard answers at once, through ``page`` when given."""

    check: Callable[[dict[str, Any]], Principal | None]
    page: Page | None = None


Call = typing.TypeVar("Call", bound=Callable[..., Any])


def gated(call: Call, gate: Gate) -> Call:
    """``call`` (a route dependency) carrying ``gate`` for the guard to find."""
    vars(call)["guard_gate"] = gate
    return call


def uploading(call: Call) -> Call:
    """``call`` (a route dependency) marking its routes as taking files."""
    vars(call)["takes_uploads"] = True
    return call


def _dependency_calls(route: Any) -> Iterator[Any]:
    """The callables of every dependency of ``route``, dependencies of dependencies too."""
    dependant = getattr(route, "dependant", None)
    stack = list(getattr(dependant, "dependencies", []) or [])
    while stack:
        dependency = stack.pop()
        yield dependency.call
        stack.extend(dependency.dependencies or [])


def route_scope(route: Any) -> str | None:
    """The scope the route's caller dependency requires (its ``required_scope``), None when
    the route has none."""
    for call in _dependency_calls(route):
        scope = getattr(call, "required_scope", None)
        if isinstance(scope, str):
            return scope
    return None


def route_gate(route: Any) -> Gate | None:
    """The :class:`Gate` one of the route's dependencies carries (``guard_gate``), if any."""
    for call in _dependency_calls(route):
        gate = getattr(call, "guard_gate", None)
        if isinstance(gate, Gate):
            return gate
    return None


def takes_uploads(route: Any) -> bool:
    """Whether the route takes files (multipart bodies up to the upload limit): a parameter
    of type ``UploadFile``, or a dependency marked ``takes_uploads`` (a form read by hand)."""
    from starlette.datastructures import UploadFile

    dependant = getattr(route, "dependant", None)
    for param in getattr(dependant, "body_params", []) or []:
        annotation = param.field_info.annotation
        if _mentions(annotation, UploadFile):
            return True
    return any(getattr(call, "takes_uploads", False) is True
               for call in _dependency_calls(route))


def _mentions(annotation: Any, kind: type) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, kind):
        return True
    return any(_mentions(a, kind) for a in typing.get_args(annotation))


def _is_int(annotation: Any) -> bool:
    if annotation is int:
        return True
    if typing.get_origin(annotation) is typing.Annotated:
        return _is_int(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_is_int(a) for a in typing.get_args(annotation))
    return False


@dataclass
class RouteInfo:
    route: Any
    scope: str | None
    int_params: tuple[tuple[str, str], ...]
    """(where, name) of the integer parameters: where is ``query`` or ``path``."""
    gate: Gate | None = None
    uploads: bool = False

    @property
    def api(self) -> bool:
        return str(getattr(self.route, "path", "")).startswith(API_PREFIX + "/")

    def path_params(self, scope: dict[str, Any]) -> dict[str, Any]:
        """The path parameters of a request this route matches."""
        params: dict[str, Any] = self.route.matches(scope)[1].get("path_params", {})
        return params


def _flat_routes(routes: Any) -> Iterator[Any]:
    """The routes as the app serves them: with their full paths and the dependencies they got
    from the routers that include them (FastAPI 0.165 keeps an included router as one entry
    and lists its effective routes through ``iter_route_contexts``; older versions copy the
    routes into ``app.routes``)."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # an older FastAPI: the included routes are in app.routes
        yield from routes
        return
    yield from iter_route_contexts(routes)


def route_table(app: Any) -> list[RouteInfo]:
    """Every route of ``app`` (mounted applications too: static files are public) with what
    the guard checks before its body: the scope, the gate, whether it takes uploads, and its
    integer parameters."""
    found = []
    for route in _flat_routes(getattr(app, "routes", [])):
        if not hasattr(route, "matches") or getattr(route, "path", None) is None:
            continue
        dependant = getattr(route, "dependant", None)
        ints = tuple((where, param.alias) for where, params in
                     (("query", getattr(dependant, "query_params", [])),
                      ("path", getattr(dependant, "path_params", [])))
                     for param in params if _is_int(param.field_info.annotation))
        found.append(RouteInfo(route, route_scope(route), ints, route_gate(route),
                               takes_uploads(route)))
    return found


def api_routes(app: Any) -> list[RouteInfo]:
    """Every ``/v1`` route of ``app`` with the scope it needs and its integer parameters."""
    return [info for info in route_table(app) if info.api]


def find_route(routes: list[RouteInfo], scope: dict[str, Any]) -> RouteInfo | None:
    """The route that will answer (the first that matches path and method), or None."""
    for info in routes:
        if info.route.matches(scope)[0] == Match.FULL:
            return info
    return None
