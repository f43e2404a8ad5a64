"""The candidates queue of a judge run in the web: two reviewers decide the same candidate
differently, it goes to the adjudication view, the adjudicator settles it; progress and the
reviewers' agreement follow; the decisions export as a corrections file (web download, API
route) that validates against the published schema and applies with ``apply_corrections``;
another project sees none of it (404, no row written)."""

from __future__ import annotations

import gzip
import json
import re
import time
from typing import Any

import jsonschema
from fastapi.testclient import TestClient

import judge
import judge.client
from judge import load_dialogues, load_schema
from judge.cli import main
from judge.data import Located, apply_corrections
from judge.data._corrections import Correction
from judge.service import create_token
from judge.service.db._db import correction_decisions
from tests.app_surface import database_rows
from tests.conftest import EXAMPLES, ROOT

from .conftest import Browserless


def judged_run(web: dict[str, Any]) -> str:
    """The examples judged (fake model) in project 'lab': a finished evaluate job's id."""
    api = web["client"]()
    auth = {"Authorization": f"Bearer {web['tokens']['alice']}"}
    files = {}
    for kind, name in (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
                       ("predictions", "predictions.jsonl")):
        made = api.post("/v1/files", data={"kind": kind}, headers=auth,
                        files={"file": (name, (EXAMPLES / name).read_bytes())})
        files[kind] = made.json()["id"]
    job = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                     "options": {"model": "fake-model"}}, headers=auth).json()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = api.get(f"/v1/jobs/{job['id']}", headers=auth).json()
        if state["status"] in ("succeeded", "failed", "cancelled", "stopped"):
            assert state["status"] == "succeeded", state
            return str(job["id"])
        time.sleep(0.1)
    raise AssertionError("the run did not finish")


def page(client: Browserless, url: str) -> Any:
    """A page once the candidates are ranked (the first request starts the ranking)."""
    deadline = time.monotonic() + 30
    while True:
        answer = client.get(url)
        if answer.status_code != 202 or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def candidate_of(html: str) -> str:
    return re.search(r'name="candidate" value="([^"]+)"', html).group(1)


def decide(client: Browserless, csrf: str, job: str, candidate: str, action: str,
           value: str = "", adjudicate: bool = False) -> Any:
    data = {"csrf": csrf, "candidate": candidate, "action": action, "value": value}
    if adjudicate:
        data["adjudicate"] = "1"
    return client.post(f"/ui/corrections/{job}/decisions", data=data)


def test_two_reviewers_disagree_and_the_adjudicator_settles_it(web, tmp_path, monkeypatch,
                                                              capsys):
    job = judged_run(web)
    service = web["service"]
    adjudicator = create_token(service.db, "lab", "review", name="adjudicator")[0]
    alice, bob, judge_of = web["client"](), web["client"](), web["client"]()
    alice_csrf = alice.login(web["tokens"]["alice"])
    bob_csrf = bob.login(web["tokens"]["bob"])
    adj_csrf = judge_of.login(adjudicator)

    first = page(alice, f"/ui/corrections/{job}")
    assert first.status_code == 200, first.text
    candidate = candidate_of(first.text)
    assert "Later turns the fix covers" in first.text and "Judge" in first.text
    assert bob.get(f"/ui/corrections/{job}").status_code == 200

    accepted = decide(alice, alice_csrf, job, candidate, "accept")
    assert accepted.status_code == 303 and "saved=1" in accepted.headers["location"]
    assert decide(bob, bob_csrf, job, candidate, "reject").status_code == 303
    queue = alice.get(f"/ui/corrections/{job}?pos=0").text
    assert re.search(r'data-field="disputed">1<', queue), queue
    assert "same decision 0.0 %" in queue and "κ (accept vs reject) 0.00" in queue

    refused = decide(bob, bob_csrf, job, candidate, "accept", adjudicate=True)
    assert refused.status_code == 403
    disputes = judge_of.get(f"/ui/corrections/{job}/disputes").text
    assert candidate.split(":")[0] in disputes and "disputed" in disputes
    settled = decide(judge_of, adj_csrf, job, candidate, "edit", value="worth house",
                     adjudicate=True)
    assert settled.status_code == 303 and settled.headers["location"].endswith("/disputes")
    queue = alice.get(f"/ui/corrections/{job}?pos=0").text
    assert re.search(r'data-field="disputed">0<', queue)
    assert re.search(r'data-field="adjudicated">1<', queue)

    web_file = alice.get(f"/ui/corrections/{job}/corrections.jsonl")
    assert web_file.status_code == 200
    api = web["client"]()
    exported = api.get(f"/v1/jobs/{job}/corrections",
                       headers={"Authorization": f"Bearer {web['tokens']['alice']}"})
    assert exported.status_code == 200
    assert exported.text == web_file.text
    records = [json.loads(line) for line in exported.text.splitlines()]
    assert [(r["reviewer"], r.get("adjudicated", False)) for r in records] == [
        ("alice", False), ("bob", False), ("adjudicator", True)]
    schema = json.loads((ROOT / "judge/data/formats/corrections.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema,
                                                format_checker=jsonschema.FormatChecker())
    for record in records:
        validator.validate(record)
        assert record["candidate"] == candidate and "was" in record
    assert records[1]["value"] == records[1]["was"]  # a reject: the annotation's own value
    located = [Located(Correction.model_validate(r), "export", i + 1)
               for i, r in enumerate(records)]
    loaded_schema = load_schema(EXAMPLES / "schema.json")
    dialogues = load_dialogues(EXAMPLES / "dialogues.jsonl", schema=loaded_schema)
    result = apply_corrections(dialogues, records[0]["gold"], located, schema=loaded_schema)
    turn = dialogues.get(records[0]["dialogue_id"]).turns[records[0]["turn_index"]]
    fixed = result.dialogues.get(records[0]["dialogue_id"]).turns[records[0]["turn_index"]]
    assert fixed.gold_states[result.name].get(records[0]["slot"]) == "worth house"
    assert result.applied == 3 and (turn.gold_states[result.base].get(records[0]["slot"])
                                    != "worth house") == bool(result.changed_slots)

    # the CLI: dst-judge corrections export, through judge.client, writes the same records
    transport = TestClient(web["app"])._transport
    client_class = judge.client.Client  # the command imports judge.client when it runs
    monkeypatch.setattr(judge.client, "Client",
                        lambda url: client_class(url, transport=transport))
    monkeypatch.setenv("DST_JUDGE_TOKEN", web["tokens"]["reader"])
    out = tmp_path / "corrections.jsonl"
    assert main(["corrections", "export", "--job", job, "--out", str(out),
                 "--server", "http://testserver"]) == 0
    assert "3 corrections" in capsys.readouterr().out
    assert [json.loads(line) for line in out.read_text().splitlines()] == records
    assert main(["validate", "corrections", str(out), "--schema",
                 str(EXAMPLES / "schema.json")]) == 0
    packed = tmp_path / "corrections.jsonl.gz"  # a .gz name is written gzip, same records
    assert main(["corrections", "export", "--job", job, "--out", str(packed),
                 "--server", "http://testserver"]) == 0
    assert [json.loads(line) for line in
            gzip.decompress(packed.read_bytes()).decode().splitlines()] == records


def test_another_project_sees_no_queue_and_writes_no_decision(web):
    job = judged_run(web)
    alice = web["client"]()
    csrf = alice.login(web["tokens"]["alice"])
    candidate = candidate_of(page(alice, f"/ui/corrections/{job}").text)
    eve = web["client"]()
    eve_csrf = eve.login(web["tokens"]["eve"])
    before = database_rows(web["settings"].db_url)
    for url in (f"/ui/corrections/{job}", f"/ui/corrections/{job}/disputes",
                f"/ui/corrections/{job}/corrections.jsonl"):
        assert eve.get(url).status_code == 404, url
    assert decide(eve, eve_csrf, job, candidate, "accept").status_code == 404
    assert eve.get(f"/v1/jobs/{job}/corrections", headers={
        "Authorization": f"Bearer {web['tokens']['eve']}"}).status_code == 404
    assert database_rows(web["settings"].db_url) == before
    assert decide(alice, csrf, job, candidate, "accept").status_code == 303
    with web["service"].db.read() as conn:
        rows = conn.execute(correction_decisions.select()).all()
    assert [(r.reviewer, r.candidate) for r in rows] == [("alice", candidate)]


def test_a_typed_value_and_a_reviewer_name_with_markup_stay_text(web):
    job = judged_run(web)
    planted = "</textarea></script>'\"><i data-xss=\"v\">"
    odd = create_token(web["service"].db, "lab", "read,review", name="<i data-xss=\"r\">")[0]
    alice, other = web["client"](), web["client"]()
    csrf = alice.login(web["tokens"]["alice"])
    other_csrf = other.login(odd)
    candidate = candidate_of(page(alice, f"/ui/corrections/{job}").text)
    assert decide(alice, csrf, job, candidate, "edit", value=planted).status_code == 303
    assert decide(other, other_csrf, job, candidate, "reject").status_code == 303
    queue = alice.get(f"/ui/corrections/{job}?pos=0").text
    disputes = alice.get(f"/ui/corrections/{job}/disputes").text
    for html in (queue, disputes):
        assert "<i data-xss=" not in html
    assert "&lt;i data-xss=&#34;v&#34;&gt;" in queue  # the reviewer's own value, as text
    assert "&lt;i data-xss=&#34;r&#34;&gt;" in disputes and "&lt;i data-xss=&#34;v&#34;" \
        in disputes
    download = alice.get(f"/ui/corrections/{job}/corrections.jsonl")
    assert download.headers["content-type"].startswith("application/x-ndjson")
    assert download.headers["x-content-type-options"] == "nosniff"


def test_the_queue_ranks_the_run_as_its_run_store_reads_it(web):
    """The candidates queue reads the judge run through the job's run store (the path the
    analysis jobs take, ``Service.jobs.run``), not from the job row its caller holds: a row
    without its summary still ranks the run under its system's name."""
    import dataclasses

    from judge import analysis
    from judge.service import ensure_project
    from judge.service.jobs import job_run
    from judge.web._candidates import run_candidates

    job = judged_run(web)
    service = web["service"]
    lab = ensure_project(service.db, "lab")
    run = service.jobs.run(lab, job)
    assert run == job_run(service.db, lab, job) and run.rows
    ran = run_candidates(service, dataclasses.replace(service.jobs.row(lab, job), summary=None))
    assert ran.source == analysis.source_from_run(run)
    assert ran.source.name == run.summary["data"]["system"] == "example-dst"
