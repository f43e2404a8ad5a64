"""Every refused request, on every route, leaves every table's row count as it was: a property
over the route table read from the app at run time (tests/app_surface.py), API and web
interface alike, so a route added later is tried without anyone listing it.

Each route is asked, by every method it has, the ways a request gets refused: no credentials
and a wrong token or session cookie (401, and 429 once the address has spent its failures),
a token or session without the scope (403), a page's form without its CSRF token (403), a
project's ids asked by another project (404), a body past the limit (413), NaN in a JSON body
and an integer past 64 bits in a query or path (422). After each refused answer the row count
of every table is compared with the one before it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from judge._errors import ServiceError
from judge.service import create_token
from judge.service.auth._auth import new_id
from judge.service.db._db import projects
from judge.service.http._routes import ServiceDep, Submitter
from judge.web import mount_web
from tests.app_surface import VOLATILE_TABLES, RouteInfo, routes, web_login
from tests.service.conftest import Api, running_service, service_settings

FAILURES = 4
REFUSED = frozenset({401, 403, 404, 405, 409, 413, 422, 429})
HUGE = str(2 ** 70)
ADMIN_READS = {"/metrics", "/v1/tokens"}
"""GET routes a read-only token may not use (every other GET it may: a job's event stream
would then never end, so reads are tried without the scope only here)."""


class Counts:
    """The row count of every table, in one query (cheap enough to ask around each
    request)."""

    def __init__(self, url: str) -> None:
        self.engine = sa.create_engine(url)
        names = [n for n in sa.inspect(self.engine).get_table_names()
                 if n not in VOLATILE_TABLES]
        assert {"jobs", "files", "tokens", "labels", "web_sessions"} <= set(names), names
        self.names = names
        self.query = sa.text("SELECT " + ", ".join(
            f'(SELECT count(*) FROM "{n}")' for n in names))

    def __call__(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return dict(zip(self.names, conn.execute(self.query).one(), strict=True))


@pytest.fixture
def lab(tmp_path: Path, fake_model: Any) -> Iterator[dict[str, Any]]:
    settings = service_settings(tmp_path / "data", fake_model.url, job_slots=0,
                                max_json_mb=0.0625, max_upload_mb=0.25,
                                auth_failures_per_minute=FAILURES, requests_per_minute=0)
    with running_service(settings) as (service, app):
        mount_web(app)
        made = {name: create_token(service.db, project, scopes, name=name)
                for name, project, scopes in (("root", "lab", "admin"),
                                              ("reader", "lab", "read"),
                                              ("eve", "other", "admin"))}
        tokens = {name: token for name, (token, _) in made.items()}
        clients: list[Api] = []

        def client(token: str | None = None) -> Api:
            made_client = Api(app, token)
            clients.append(made_client)
            return made_client

        try:
            root = client(tokens["root"])
            files = root.upload_examples()
            job = root.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                              "options": {"model": "m"}}).json()["id"]
            sessions = {}
            for name in ("root", "reader", "eve"):
                browser = client()
                sessions[name] = (browser, web_login(browser, tokens[name]))
            values = {"job_id": job, "file_id": files["schema"],
                      "token_id": made["reader"][1]["id"], "label_id": 1,
                      "dialogue_id": "d1", "turn_index": 0, "name": "audit.html"}
            forged = client()
            yield {"app": app, "counts": Counts(settings.db_url), "tokens": tokens,
                   "client": client, "sessions": sessions, "values": values,
                   "anonymous": client(), "forged": forged}
        finally:
            for made_client in clients:
                made_client.close()


def _leaky(job_id: str, caller: Submitter, service: ServiceDep) -> None:
    """A broken route: it writes a row before its project check refuses the request."""
    with service.db.write() as conn:
        conn.execute(projects.insert().values(id=new_id("prj"), name=new_id("leak"),
                                              created_at=0.0, settings={}))
    raise ServiceError(f"no job {job_id} in {caller.project_name}", status=404)


def _attempts(lab: dict[str, Any], method: str, route: RouteInfo
              ) -> Iterator[tuple[str, Api, dict[str, Any]]]:
    """(what, client, request arguments) of each refusal tried on ``route``."""
    values, tokens, sessions = lab["values"], lab["tokens"], lab["sessions"]
    url = route.url(values)
    body = method in ("POST", "PUT", "PATCH", "DELETE")
    anonymous = lab["anonymous"]
    anonymous.client.cookies.clear()
    json_accept = {"Accept": "application/json"}
    if route.path.startswith("/ui"):
        forged = lab["forged"]
        forged.client.cookies.clear()
        forged.client.cookies.set("dsj_session", "forged-session")
        yield "no session", anonymous, {"headers": json_accept}
        yield "forged session", forged, {"headers": json_accept}
        for name in ("reader", "eve"):  # the scope lacking; another project's ids
            browser, csrf = sessions[name]
            if (name == "eve" and route.params) or (name == "reader" and body):
                yield f"{name}'s session", browser, {
                    "headers": {**json_accept, "X-CSRF-Token": csrf}}
        browser, csrf = sessions["root"]
        if body:
            yield "no CSRF token", browser, {"headers": json_accept, "json": {}}
            yield "body past the limit", browser, {
                "headers": {**json_accept, "X-CSRF-Token": csrf,
                            "Content-Length": str(300 * 1024)}, "content": b"x" * 1024}
            yield "JSON nested too deep", browser, {
                "headers": {**json_accept, "X-CSRF-Token": csrf,
                            "Content-Type": "application/json"},
                "content": b"[" * 300 + b"]" * 300}
        if "turn_index" in route.params:
            yield "turn past 64 bits", browser, {
                "url": route.url({**values, "turn_index": HUGE}), "headers": json_accept}
        for name in route.query:
            yield f"{name} past 64 bits", browser, {
                "url": f"{url}?{name}={HUGE}", "headers": json_accept}
        return
    yield "no token", anonymous, {}
    yield "wrong token", anonymous, {"token": "dsj_wrong"}
    if body or route.path in ADMIN_READS:
        yield "read-only token", anonymous, {"token": tokens["reader"]}
    if route.params:
        yield "another project's token", anonymous, {"token": tokens["eve"]}
    if body:
        yield "body past the limit", anonymous, {
            "token": tokens["root"], "headers": {"Content-Length": str(300 * 1024)},
            "content": b"x" * 1024}
        yield "NaN in the body", anonymous, {
            "token": tokens["root"], "content": b'{"kind": "evaluate", "x": NaN}',
            "headers": {"Content-Type": "application/json"}}
    for name in route.query:
        yield f"{name} past 64 bits", anonymous, {"token": tokens["root"],
                                                  "url": f"{url}?{name}={HUGE}"}


def _refusals(lab: dict[str, Any]) -> tuple[list[Any], dict[int, int]]:
    """Every refusal tried on every route: the ones that changed a row count, and how often
    each status was answered."""
    counts = lab["counts"]
    every = [(method, route) for route in routes(lab["app"]) for method in sorted(route.methods)]
    assert len(every) >= 50
    # logging out is no refusal: the reader's session is tried on it last
    every.sort(key=lambda pair: pair[1].path == "/ui/logout")
    seen: dict[int, int] = {}
    changed = []
    for method, route in every:
        if route.path == "/ui/login" and method == "POST":
            continue  # below, with its own refusals
        for what, client, arguments in _attempts(lab, method, route):
            url = arguments.pop("url", route.url(lab["values"]))
            before = counts()
            answer = client.request(method, url, **arguments)
            if answer.status_code in REFUSED or (answer.status_code == 303 and "/ui/login"
                                                 in answer.headers.get("location", "")):
                seen[answer.status_code] = seen.get(answer.status_code, 0) + 1
                after = counts()
                if after != before:
                    changed.append((method, route.path, what, answer.status_code,
                                    {k: (before[k], after[k]) for k in before
                                     if before[k] != after[k]}))
    # the login form: without its cookie, with a wrong token (until the address is spent)
    browser = lab["client"]()
    for token in ("dsj_wrong-1", "dsj_wrong-2", "dsj_wrong-3"):
        before = counts()
        browser.client.cookies.clear()
        answers = [browser.post("/ui/login", data={"token": token, "csrf": "x"})]  # no cookie
        nonce = re.search(r'name="csrf" value="([^"]+)"', browser.get("/ui/login").text)
        answers.append(browser.post("/ui/login", data={"token": token, "csrf": nonce.group(1)}))
        for got in answers:
            seen[got.status_code] = seen.get(got.status_code, 0) + 1
        if counts() != before:
            changed.append(("POST", "/ui/login", token, [a.status_code for a in answers]))
    return changed, seen


def test_every_refused_request_on_every_route_leaves_every_row_count(lab):
    changed, seen = _refusals(lab)
    assert not changed, f"refused requests that changed row counts: {changed}"
    assert {401, 403, 404, 413, 422, 429} <= set(seen), seen


def test_a_route_that_writes_before_it_refuses_is_caught(lab):
    """The property has teeth: a route added to the app that writes a row and then answers
    404 (a project check after the write) is found by the same battery."""
    lab["app"].add_api_route("/v1/leaky/{job_id}", _leaky, methods=["POST"])
    changed, _ = _refusals(lab)
    assert [(method, path) for method, path, *_ in changed] == [("POST", "/v1/leaky/{job_id}")]
