"""The FastAPI and Starlette internals the request guard reads (judge/service/http/_guard/
_routetable.py), each checked by name, so that an upgrade past the pinned range fails here with
a message saying which one went, not as a guard that quietly stops checking a route."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

fastapi = pytest.importorskip("fastapi")
from fastapi import APIRouter, Depends, FastAPI, UploadFile  # noqa: E402
from starlette.routing import Match  # noqa: E402

from judge.service.http._guard import Gate, api_routes, gated, route_table  # noqa: E402

PIN = "pyproject.toml pins fastapi to the range the guard is tested with"


def _caller() -> None:
    return None


_caller.required_scope = "jobs:read"  # type: ignore[attr-defined]


def _app() -> FastAPI:
    """An app shaped like the service's: a router included with a dependency, a path and a
    query integer, an upload, and a gated route outside /v1."""
    router = APIRouter(prefix="/v1", dependencies=[Depends(_caller)])

    @router.get("/things/{thing_id}")
    def thing(thing_id: int, limit: Annotated[int | None, "q"] = None) -> dict[str, Any]:
        return {}

    @router.post("/files")
    def upload(file: UploadFile) -> dict[str, Any]:
        return {}

    app = FastAPI()
    app.include_router(router)

    @app.get("/web", dependencies=[Depends(gated(lambda: None, Gate(lambda scope: None)))])
    def page() -> dict[str, Any]:
        return {}

    return app


def _flat(app: FastAPI) -> list[Any]:
    from fastapi.routing import iter_route_contexts

    return [r for r in iter_route_contexts(app.routes) if getattr(r, "path", None)]


def test_fastapi_lists_the_effective_routes_of_included_routers():
    import fastapi.routing

    assert hasattr(fastapi.routing, "iter_route_contexts"), (
        f"fastapi {fastapi.__version__} has no fastapi.routing.iter_route_contexts, which the "
        f"guard uses to list the routes of included routers with their dependencies; {PIN}")
    paths = {r.path for r in _flat(_app())}
    assert {"/v1/things/{thing_id}", "/v1/files", "/web"} <= paths, (
        f"iter_route_contexts no longer gives the routes with their full paths: {paths}; {PIN}")


def test_a_route_s_dependant_has_the_fields_the_guard_reads():
    routes = {r.path: r for r in _flat(_app())}
    route = routes["/v1/things/{thing_id}"]
    dependant = getattr(route, "dependant", None)
    assert dependant is not None, f"FastAPI routes have no .dependant any more; {PIN}"
    for name in ("dependencies", "body_params", "query_params", "path_params"):
        assert isinstance(getattr(dependant, name, None), list), (
            f"a route's dependant has no list .{name} (fastapi {fastapi.__version__}); {PIN}")
    calls = [d.call for d in dependant.dependencies]
    assert _caller in calls, (
        f"the router's dependency is not among the route's dependant.dependencies[].call; {PIN}")
    assert all(isinstance(d.dependencies, list) for d in dependant.dependencies)
    param = dependant.path_params[0]
    assert (param.alias, param.field_info.annotation) == ("thing_id", int), (
        f"a parameter no longer has .alias and .field_info.annotation; {PIN}")
    upload = routes["/v1/files"].dependant.body_params[0].field_info.annotation
    assert upload is UploadFile


def test_starlette_matches_a_request_and_gives_its_path_parameters():
    route = {r.path: r for r in _flat(_app())}["/v1/things/{thing_id}"]
    scope = {"type": "http", "method": "GET", "path": "/v1/things/7", "root_path": ""}
    match, child = route.matches(scope)
    assert match == Match.FULL and child.get("path_params") == {"thing_id": "7"}, (
        f"starlette's route.matches(scope) no longer gives (Match.FULL, {{'path_params'}}); "
        f"{PIN}")


def test_the_guard_s_route_table_reads_all_of_it():
    """The whole lookup at once: if this fails and the three above pass, the guard's reading
    of them is what changed."""
    table = {str(info.route.path): info for info in route_table(_app())}
    thing = table["/v1/things/{thing_id}"]
    assert thing.scope == "jobs:read"
    assert set(thing.int_params) == {("path", "thing_id"), ("query", "limit")}
    assert table["/v1/files"].uploads is True
    assert table["/web"].gate is not None and table["/web"].scope is None
    assert {str(i.route.path) for i in api_routes(_app())} == {"/v1/things/{thing_id}",
                                                                "/v1/files"}
