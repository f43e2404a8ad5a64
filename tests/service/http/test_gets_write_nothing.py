"""No GET writes a row: every GET route of the app (API and web interface, read from the
app's route table at run time, so a route added later is walked too) is asked by every kind
of caller (an admin token, a read-only one, a review-only one, none), plainly and with its
query parameters filled, and every table's row count is compared before and after each
request (issue 42, item 6; the direct case below compares the rows themselves).

The run walked has no review sample yet, and another run has an estimate sample fixed by a
label: opening the sample queue of either with an ``n`` and a ``seed`` of the reader's choice
once drew and stored a sample (a ``files`` and a ``blobs`` row per request, and a replaced
estimate sample); a draw is now a reviewer's ``POST``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge.service import create_token
from judge.web import mount_web
from tests.app_surface import changed_tables, database_rows, routes, web_login
from tests.service.conftest import Api, running_service, service_settings
from tests.web.synthetic import bundle, synthetic_rows

from .test_refusals_leave_rows import Counts

SCOPES = {"root": "admin", "reader": "read", "checker": "review"}
QUERY = {"queue": "sample", "n": 7, "seed": 3, "pos": 1, "reveal": 1, "limit": 5,
         "offset": 0, "format": "labels", "verdict": "true", "status": "succeeded",
         "kind": "evaluate", "page": 1, "next": "/ui/", "dialogue_id": "SYN00001.json"}
"""Values for the query parameters routes declare (a name not here is left out)."""


@pytest.fixture
def lab(tmp_path: Path, fake_model: Any) -> Iterator[dict[str, Any]]:
    settings = service_settings(tmp_path / "data", fake_model.url, job_slots=0,
                                auth_failures_per_minute=0, requests_per_minute=0)
    with running_service(settings) as (service, app):
        mount_web(app)
        tokens = {name: create_token(service.db, "lab", scopes, name=name)[0]
                  for name, scopes in SCOPES.items()}
        clients: list[Api] = []

        def client(token: str | None = None) -> Api:
            made = Api(app, token)
            clients.append(made)
            return made

        try:
            root = client(tokens["root"])
            runs = []
            for seed in (3, 5):
                answer = root.post("/v1/bundles", files={"file": (
                    "run.tar.gz", bundle(synthetic_rows(40, seed=seed),
                                         predictions_sha256=f"{seed}" * 64))})
                assert answer.status_code == 201, answer.text
                runs.append(answer.json()["id"])
            files = root.upload_examples()
            sessions = {}
            for name, token in tokens.items():
                browser = client()
                sessions[name] = (browser, web_login(browser, token))
            # the second run's estimate sample, drawn by a reviewer and fixed by a label
            browser, csrf = sessions["root"]
            drawn = browser.post(f"/ui/review/{runs[1]}/sample",
                                 data={"n": "6", "seed": "1", "csrf": csrf})
            assert drawn.status_code == 303, drawn.text
            page = browser.get(drawn.headers["location"])
            dialogue = re.search(r'data-dialogue="([^"]+)"', page.text).group(1)
            turn = int(re.search(r'data-turn="(\d+)"', page.text).group(1))
            label = root.put("/v1/labels", json={"dialogue_id": dialogue, "turn_index": turn,
                                                 "label": "correct", "job_id": runs[1]})
            assert label.status_code == 200, label.text
            yield {"app": app, "url": settings.db_url, "counts": Counts(settings.db_url),
                   "tokens": tokens, "runs": runs, "sessions": sessions,
                   "anonymous": client(), "client": client,
                   "values": {"file_id": files["predictions"], "label_id": label.json()["id"],
                              "token_id": "tok_0123456789abcdef", "name": "audit.html",
                              "dialogue_id": dialogue, "turn_index": turn}}
        finally:
            for made in clients:
                made.close()


def _callers(lab: dict[str, Any], path: str) -> Iterator[tuple[str, Api, dict[str, Any]]]:
    """(who, client, request arguments) for every kind of caller."""
    anonymous = lab["anonymous"]
    anonymous.client.cookies.clear()
    yield "no token", anonymous, {}
    for name in SCOPES:
        if path.startswith("/ui") or path == "/":
            browser, _ = lab["sessions"][name]
            yield f"{name}'s session", browser, {}
        else:
            yield f"{name}'s token", anonymous, {"token": lab["tokens"][name]}


def _urls(route: Any, values: dict[str, Any]) -> list[str]:
    """The route plainly, and with every query parameter it declares that QUERY fills."""
    url = route.url(values)
    filled = "&".join(f"{name}={QUERY[name]}" for name in route.query if name in QUERY)
    return [url, f"{url}?{filled}"] if filled else [url]


def _walk(lab: dict[str, Any]) -> tuple[list[Any], dict[int, int]]:
    gets = [route for route in routes(lab["app"]) if "GET" in route.methods]
    assert len(gets) >= 40, [r.path for r in gets]  # the enumeration works
    assert any(r.path == "/ui/review/{job_id}" for r in gets)
    writes, answered, counts = [], {}, lab["counts"]
    for job_id in lab["runs"]:
        values = {**lab["values"], "job_id": job_id}
        for route in gets:
            for url in _urls(route, values):
                for who, client, arguments in _callers(lab, route.path):
                    before = counts()
                    answer = client.request("GET", url, headers={"Accept": "text/html"},
                                            **arguments)
                    answered[answer.status_code] = answered.get(answer.status_code, 0) + 1
                    after = counts()
                    if after != before:
                        writes.append((url, who, answer.status_code,
                                       {k: (before[k], after[k]) for k in before
                                        if before[k] != after[k]}))
    return writes, answered


def test_no_get_route_writes_a_row_whoever_asks(lab):
    writes, answered = _walk(lab)
    assert not writes, f"GET requests that changed the database: {writes}"
    assert {200, 401, 403} <= set(answered), answered  # pages shown, and refused


def test_a_reader_opening_the_sample_queue_draws_nothing(lab):
    """The case the walk pins, asked directly: a read-only session opening the sample queue
    of a run without a sample, or with another n and seed than its fixed one, is shown the
    queue (or that none is drawn) and stores no file."""
    browser, _ = lab["sessions"]["reader"]
    for job_id in lab["runs"]:
        before = database_rows(lab["url"])
        page = browser.get(f"/ui/review/{job_id}?queue=sample&n=4000&seed=9")
        assert page.status_code == 200, page.text[:300]
        assert "a reviewer draws it" in page.text and "Draw a random sample" not in page.text
        assert changed_tables(before, database_rows(lab["url"])) == []
    refused = browser.post(f"/ui/review/{lab['runs'][0]}/sample",
                           data={"n": "5", "seed": "0", "csrf": lab["sessions"]["reader"][1]},
                           headers={"Accept": "application/json"})
    assert refused.status_code == 403
