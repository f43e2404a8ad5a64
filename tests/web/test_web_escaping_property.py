"""Every page escapes every stored text a person or a data file put there (docs: "Jinja2,
autoescaped"): markup is planted in each stored text field (project and token names, which are
the reviewers' names, label notes and slots, a predictions file's system name, a run's system
name and input names, and the run's dialogue ids, utterances, slot names and model replies;
uploaded file names, which are stored cleaned of such characters, are checked for that), then
every page of the interface, read from the app's route table, is fetched for each run.

No HTML page may carry a planted tag as markup; every planted field shows, escaped, on at least
one page (so the pages were the ones that show it), the turn page's label table among them;
any other answer that carries planted text is not HTML and may not be sniffed as HTML."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from judge.service import create_token
from tests.app_surface import routes, web_login
from tests.conftest import EXAMPLES

from .conftest import Browserless, import_run
from .synthetic import XSS, XSS_IMG, bundle, synthetic_rows

FIELDS = ("project", "reviewer", "reviewer2", "note", "slot", "system_name", "system")
"""Planted fields that pages show. File names are planted too, but uploads store a cleaned
name (no markup characters at all): the test checks that instead."""


def planted(field: str) -> str:
    """Markup that breaks out of text, attributes, textareas and script blocks alike."""
    return f"</textarea></script>'\"><i data-xss=\"{field}\">"


RAW = re.compile(r"<i data-xss=")
ESCAPED = r"(&lt;|\\u003c)i data-xss=(&#34;|&quot;|\\u0022|\\\"){field}"


def _html_pages(client: Browserless, app: Any, runs: dict[str, dict[str, Any]]
                ) -> dict[str, Any]:
    """Every GET page of the interface for every run (query parameters naming the runs are
    added to every URL; pages ignore those they do not take)."""
    query = "&".join(f"{name}={job}" for job in runs for name in ("run", "job"))
    pages: dict[str, Any] = {}
    for route in routes(app):
        if not route.path.startswith("/ui") or "GET" not in route.methods:
            continue
        if route.path in ("/ui/login",):
            continue
        for job_id, values in runs.items():
            url = route.url({"job_id": job_id, **values}) + "?" + query
            pages[url] = _settled(client, url)
            if not route.params:
                break
    return pages


def _settled(client: Browserless, url: str, timeout: float = 30.0) -> Any:
    """The page once its background figures are computed (the agreement panel)."""
    deadline = time.monotonic() + timeout
    while True:
        response = client.get(url)
        if 'data-updating="true"' not in response.text:
            return response
        assert time.monotonic() < deadline, f"{url} still updating after {timeout} s"
        time.sleep(0.1)


def _plant(web: dict[str, Any]) -> tuple[Browserless, dict[str, dict[str, Any]]]:
    service = web["service"]
    project = planted("project")
    token = create_token(service.db, project, "read,submit,review,admin",
                         name=planted("reviewer"))[0]
    second = create_token(service.db, project, "review", name=planted("reviewer2"))[0]
    api = Browserless(web["app"])
    auth = {"Authorization": f"Bearer {token}"}
    try:
        rows = synthetic_rows(30, seed=5, hostile=True)
        web["tokens"]["hostile"] = token
        imported = import_run(web, bundle(rows, system=planted("system")), token="hostile")
        files = {}
        for kind, name in (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
                           ("predictions", "predictions.jsonl")):
            data = (EXAMPLES / name).read_bytes()
            if kind == "predictions":
                data = data.replace(b'"example-dst"', b'"' + planted("system_name")
                                    .replace('"', '\\"').encode() + b'"')
            upload = api.post("/v1/files", data={"kind": kind}, headers=auth,
                              files={"file": (planted("file") + name, data)})
            assert upload.status_code == 201, upload.text
            assert not set("<>\"'&") & set(upload.json()["name"]), upload.json()["name"]
            files[kind] = upload.json()["id"]
        judged = api.post("/v1/jobs", headers=auth, json={
            "kind": "evaluate", "inputs": files, "options": {"model": "m"}}).json()["id"]
        deadline = time.monotonic() + 60
        while (job := api.get(f"/v1/jobs/{judged}", headers=auth).json())["status"] not in (
                "succeeded", "failed", "cancelled", "stopped"):
            assert time.monotonic() < deadline, f"job {judged} not final after 60 s: {job}"
            time.sleep(0.05)
        assert job["status"] == "succeeded", job
        first = api.get(f"/v1/jobs/{judged}/judgments", headers=auth).text.splitlines()[0]
        judged_turn = json.loads(first)
        runs = {imported: {"dialogue_id": rows[0]["dialogue_id"], "turn_index": 0},
                judged: {"dialogue_id": judged_turn["dialogue_id"],
                         "turn_index": judged_turn["turn_index"]}}
        for job_id, turn in runs.items():
            for who in (token, second):
                for slot in ("", planted("slot")):
                    put = api.request("PUT", "/v1/labels",
                                      headers={"Authorization": f"Bearer {who}"},
                                      json={"job_id": job_id, **turn, "slot": slot,
                                            "label": "unsure", "note": planted("note")})
                    assert put.status_code == 200, put.text
        for job_id in runs:
            turn = runs[job_id]
            turn["name"] = "audit.html"
    finally:
        api.close()
    client = web["client"]()
    web_login(client, token)
    return client, runs


def test_markup_in_every_stored_text_field_is_escaped_on_every_page(web):
    client, runs = _plant(web)
    pages = _html_pages(client, web["app"], runs)
    assert len(pages) >= 10, list(pages)
    shown: dict[str, list[str]] = {field: [] for field in FIELDS}
    for url, response in pages.items():
        text = response.text
        kind = response.headers.get("content-type", "")
        if "text/html" in kind:
            assert not RAW.search(text), f"{url}: a planted tag is markup: " + \
                text[max(0, RAW.search(text).start() - 200):RAW.search(text).start() + 100]
            assert XSS not in text and XSS_IMG not in text, f"{url}: hostile run text unescaped"
            for field in FIELDS:
                if re.search(ESCAPED.format(field=field), text):
                    shown[field].append(url)
        elif "data-xss" in text:
            assert "html" not in kind, (url, kind)
            assert response.headers.get("x-content-type-options") == "nosniff", url
    missing = [field for field, urls in shown.items() if not urls]
    assert not missing, f"planted field(s) {missing} shown on no page: the pages tried were " \
                        f"not those that show them ({sorted(pages)})"
    turn_pages = [url for url in pages if "/turns/" in url]
    assert turn_pages and all(url in shown["note"] and url in shown["reviewer2"]
                              for url in turn_pages), (turn_pages, shown["note"])
