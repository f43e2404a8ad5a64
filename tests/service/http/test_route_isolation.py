"""Anything of another project is 404, exactly as if it did not exist (docs/SERVICE.md, Auth):
a property over every route of the app that takes an id in its path, API and web interface
alike, read from the app's route table at run time.

Project 'other' owns files, a judged run, an audit with an artifact, a queued and a cancelled
job, a label and a token. A caller of project 'lab' with every scope (admin token for the API,
a session with read, submit and review for the pages) asks every such route for each of them:
every answer is 404, and the database is unchanged afterwards (a route whose project check
was lost could cancel, resume or delete before answering 404). The owner asking the same
routes gets answers other than 404, so the ids were the right ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judge.service import create_app, create_token
from judge.web import mount_web
from tests.app_surface import (
    STATE_CHANGING,
    RouteInfo,
    changed_tables,
    database_rows,
    routes,
    web_login,
)
from tests.conftest import FIXTURES
from tests.service.conftest import Api, running_service, service_settings

RESOURCES = {"file_id": "files", "job_id": "jobs", "token_id": "tokens", "label_id": "labels"}
"""Path parameters that name a project's resource, and which of 'other's resources to try."""
QUERY_IDS = {"job_id": "jobs", "predictions": "files", "job": "jobs", "run": "jobs"}
"""Query parameters that name a project's run or file."""


@pytest.fixture
def two_projects(tmp_path: Path, fake_model: Any) -> Any:
    settings = service_settings(tmp_path / "data", fake_model.url)
    with running_service(settings) as (service, app):  # 'other' does its work
        eve = create_token(service.db, "other", "read,submit,review", name="eve")[0]
        api = Api(app, eve)
        try:
            files = api.upload_examples()
            spare = api.upload(FIXTURES / "schema_small.json", "schema").json()["id"]
            run = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                             "options": {"model": "m"}}).json()["id"]
            assert api.wait(run)["status"] == "succeeded"
            audit = api.post("/v1/jobs", json={"kind": "audit", "inputs": {"run": run}}
                             ).json()["id"]
            assert api.wait(audit)["status"] == "succeeded"
            board = api.post("/v1/jobs", json={"kind": "leaderboard", "inputs": {
                "systems": [files["predictions"], run], "schema": files["schema"],
                "dialogues": files["dialogues"]}}).json()["id"]
            assert api.wait(board)["status"] == "succeeded"
            artifact = "audit.html"
            assert api.get(f"/v1/jobs/{audit}/artifacts/{artifact}").status_code == 200
            turn = json.loads(api.get(f"/v1/jobs/{run}/judgments").text.splitlines()[0])
            label = api.put("/v1/labels", json={"job_id": run, "dialogue_id":
                                                turn["dialogue_id"], "turn_index":
                                                turn["turn_index"], "label": "correct",
                                                "note": "eve's"}).json()["id"]
        finally:
            api.close()
    # the routes are then asked on an API-only replica: nothing changes the rows but requests
    quiet = settings.model_copy(update={"job_slots": 0})
    app = create_app(quiet)
    mount_web(app)
    service = app.state.service
    service.start()
    api = Api(app, eve)
    try:
        queued = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                            "options": {"model": "m"}}).json()["id"]
        cancelled = api.post("/v1/jobs", json={"kind": "audit", "inputs": {"run": run}}
                             ).json()["id"]
        assert api.post(f"/v1/jobs/{cancelled}/cancel").json()["status"] == "cancelled"
        spare_token = create_token(service.db, "other", "read", name="eve-reader")[1]["id"]
        yield {
            "app": app, "service": service, "db_url": quiet.db_url, "eve": eve,
            "lab_admin": create_token(service.db, "lab", "admin", name="root")[0],
            "lab_web": create_token(service.db, "lab", "read,submit,review", name="alice")[0],
            "other": {"files": [*files.values(), spare],
                      "jobs": [run, audit, cancelled, queued, board],
                      "tokens": [spare_token], "labels": [label]},
            "values": {"name": artifact, "dialogue_id": turn["dialogue_id"],
                       "turn_index": turn["turn_index"]},
        }
    finally:
        api.close()
        service.stop()


def _id_routes(app: Any) -> list[RouteInfo]:
    found = [r for r in routes(app) if r.params]
    assert any(r.path.startswith("/v1/") for r in found) and \
        any(r.path.startswith("/ui/") for r in found), [r.path for r in found]
    return found


def _requests(route: RouteInfo, other: dict[str, list[Any]],
              values: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(method, url, which id) for every resource of 'other' the route's id parameter can
    name; a parameter the test does not know fails the test, saying so."""
    ids = [p for p in route.params if p in RESOURCES]
    unknown = [p for p in route.params if p not in RESOURCES and p not in values]
    assert not unknown, f"{route.path}: path parameter(s) {unknown} name nothing this test " \
                        "knows; add them to RESOURCES or to the values"
    assert ids, f"{route.path} takes no id of a project's resource"
    made = []
    for method in sorted(route.methods - {"HEAD"}):
        for param in ids:
            for resource in other[RESOURCES[param]]:
                made.append((method, route.url({**values, **{p: resource for p in ids}}),
                             resource))
    return made


def _ask(client: Api, method: str, url: str, csrf: str | None) -> Any:
    if url.startswith("/ui/") and method in STATE_CHANGING:
        return client.request(method, url, json={"dialogue_id": "x", "turn_index": 0,
                                                 "label": "correct"},
                              headers={"X-CSRF-Token": csrf or "", "Accept": "text/html"})
    return client.request(method, url)


def test_every_route_that_takes_an_id_answers_404_for_another_projects(two_projects):
    env = two_projects
    app = env["app"]
    other = env["other"]
    api = Api(app, env["lab_admin"])
    page = Api(app, None)
    try:
        csrf = web_login(page, env["lab_web"])
        before = database_rows(env["db_url"])
        answers = []
        for route in _id_routes(app):
            client = page if route.path.startswith("/ui/") else api
            for method, url, resource in _requests(route, other, env["values"]):
                response = _ask(client, method, url, csrf)
                answers.append((route.path, method, resource, response.status_code))
        wrong = [a for a in answers if a[3] != 404]
        assert not wrong, f"another project's id was not 404: {wrong}"
        changed = changed_tables(before, database_rows(env["db_url"]))
        assert not changed, f"refused requests changed table(s) {changed}"
    finally:
        api.close()
        page.close()


def test_the_owner_reaches_every_route_with_the_same_ids(two_projects):
    """The control of the property above: with the owner's token the same routes answer
    something other than 404 for at least one of the ids (read routes only, in a stable
    order: the state-changing ones would spend the fixtures)."""
    env = two_projects
    app = env["app"]
    other = env["other"]
    owner_admin = create_token(env["service"].db, "other", "admin,review", name="eve-root")[0]
    api = Api(app, owner_admin)
    page = Api(app, None)
    try:
        web_login(page, env["eve"])
        unreached = []
        for route in _id_routes(app):
            if route.methods & STATE_CHANGING:
                continue
            client = page if route.path.startswith("/ui/") else api
            # the first answer that is not 404 ends the route (an event stream of a job not
            # final would not end: the finished run comes first)
            if not any(_ask(client, method, url, None).status_code != 404
                       for method, url, _ in _requests(route, other, env["values"])):
                unreached.append(route.path)
        assert not unreached, f"the owner got 404 from {unreached}: the ids tried were wrong"
    finally:
        api.close()
        page.close()


def test_every_query_that_names_a_run_or_file_treats_another_projects_as_missing(
        two_projects):
    """The same promise for ids in the query string (``GET /v1/labels?job_id=``, the compare
    page's ``run``, the live updates' ``job``), read routes only: the answer for another
    project's id is the answer for an id that does not exist (same status, same body once the
    id itself is blanked out); for the API that is a 404."""
    env = two_projects
    app = env["app"]
    api = Api(app, env["lab_admin"])
    page = Api(app, None)
    try:
        web_login(page, env["lab_web"])
        differ, seen = [], set()
        for route in routes(app):
            named = [q for q in route.query if q in QUERY_IDS]
            if not named or route.params or "GET" not in route.methods:
                continue
            client = page if route.path.startswith("/ui/") else api
            for query in named:
                for resource in env["other"][QUERY_IDS[query]]:
                    missing = resource[:-4] + "0000" if not resource.endswith("0000") \
                        else resource[:-4] + "1111"
                    theirs = client.get(route.path, params={query: resource})
                    nobodys = client.get(route.path, params={query: missing})
                    seen.add(route.path)
                    if (theirs.status_code, theirs.text.replace(resource, "ID")) != \
                            (nobodys.status_code, nobodys.text.replace(missing, "ID")):
                        differ.append((route.path, query, resource, theirs.status_code,
                                       nobodys.status_code))
                    if route.path.startswith("/v1/"):
                        assert theirs.status_code == 404, (route.path, query, theirs.text)
        assert seen >= {"/v1/labels", "/ui/compare", "/ui/events"}, seen
        assert not differ, f"another project's id was answered unlike a missing one: {differ}"
    finally:
        api.close()
        page.close()
