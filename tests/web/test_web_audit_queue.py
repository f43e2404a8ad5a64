"""The candidates queue of an audit of predictions files (no judge run): an ``audit`` job of
dialogues and predictions files ranks the candidates in the worker, the web queue shows them
with the dialogue text, in the order the reviewer chooses; decisions export as corrections;
an audit given those corrections leaves the decided candidates out; the end of the queue says
so; a job naming neither a run nor predictions is refused."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from tests.conftest import EXAMPLES

from .test_web_corrections import candidate_of, decide, page


def upload(web: dict[str, Any], kind: str, name: str, data: bytes) -> str:
    api = web["client"]()
    made = api.post("/v1/files", data={"kind": kind}, files={"file": (name, data)},
                    headers={"Authorization": f"Bearer {web['tokens']['alice']}"})
    assert made.status_code in (200, 201), made.text  # 200: the same file again
    return str(made.json()["id"])


def audit_job(web: dict[str, Any], corrections: list[str] | None = None) -> dict[str, Any]:
    """A finished audit job of the example's two predictions files."""
    api = web["client"]()
    auth = {"Authorization": f"Bearer {web['tokens']['alice']}"}
    inputs: dict[str, Any] = {
        "schema": upload(web, "schema", "schema.json", (EXAMPLES / "schema.json").read_bytes()),
        "dialogues": upload(web, "dialogues", "dialogues.jsonl",
                            (EXAMPLES / "dialogues.jsonl").read_bytes()),
        "predictions": [upload(web, "predictions", name, (EXAMPLES / name).read_bytes())
                        for name in ("predictions.jsonl", "predictions-weak.jsonl")]}
    if corrections:
        inputs["corrections"] = corrections
    job = api.post("/v1/jobs", json={"kind": "audit", "inputs": inputs}, headers=auth)
    assert job.status_code == 201, job.text
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        state = api.get(f"/v1/jobs/{job.json()['id']}", headers=auth).json()
        if state["status"] in ("succeeded", "failed", "cancelled", "stopped"):
            assert state["status"] == "succeeded", state
            summary = api.get(f"/v1/jobs/{state['id']}/results", headers=auth)
            return {**state, "summary": summary.json()}
        time.sleep(0.1)
    raise AssertionError("the audit did not finish")


def ids_in_order(client: Any, job: str, order: str, size: int) -> list[str]:
    return [candidate_of(page(client, f"/ui/corrections/{job}?pos={i}&order={order}").text)
            for i in range(size)]


def test_a_predictions_audit_is_reviewed_in_the_web_and_reaudited(web):
    state = audit_job(web)
    job = state["id"]
    alice = web["client"]()
    csrf = alice.login(web["tokens"]["alice"])
    first = page(alice, f"/ui/corrections/{job}")
    assert first.status_code == 200, first.text
    html = first.text
    assert "The dialogue up to this turn" in html and "no judge run" in html
    size = int(re.search(r"Candidate 1 of (\d+)", html).group(1))
    assert size == state["summary"]["candidates"] > 2
    # the example's first dialogue's words are on the page of one of its candidates
    candidate = candidate_of(html)
    dialogue_id, turn, _ = candidate.rsplit(":", 2)
    record = next(json.loads(line) for line in
                  (EXAMPLES / "dialogues.jsonl").read_text().splitlines()
                  if json.loads(line)["dialogue_id"] == dialogue_id)
    said = record["turns"][int(turn)]["user"]
    assert said.replace("'", "&#39;") in html

    # reached from the review index and from the job's page
    assert f"/ui/corrections/{job}" in alice.get("/ui/review").text
    assert "audit of 2 predictions files" in alice.get("/ui/review").text
    assert 'id="review-candidates"' in alice.get(f"/ui/runs/{job}").text

    # the reviewer chooses the order: both hold the same candidates, in other orders
    review = ids_in_order(alice, job, "review", size)
    evidence = ids_in_order(alice, job, "evidence", size)
    assert sorted(review) == sorted(evidence) and review != evidence
    assert 'id="order-evidence"' in html and "real errors" in html

    # decide three: accept, reject and edit; the form keeps the order chosen
    chosen = decide(alice, csrf, job, evidence[0], "accept")
    assert chosen.status_code == 303
    data = {"csrf": csrf, "candidate": evidence[1], "action": "reject", "order": "evidence"}
    moved = alice.post(f"/ui/corrections/{job}/decisions", data=data)
    assert moved.status_code == 303 and "order=evidence" in moved.headers["location"]
    assert decide(alice, csrf, job, evidence[2], "edit", value="a value of mine").status_code \
        == 303
    exported = alice.get(f"/ui/corrections/{job}/corrections.jsonl")
    records = [json.loads(line) for line in exported.text.splitlines()]
    assert [r["candidate"] for r in records] == evidence[:3]
    assert all(r["gold"] == "2.1" for r in records)
    api = web["client"]()  # the API's export (dst-judge corrections export) says the same
    same = api.get(f"/v1/jobs/{job}/corrections",
                   headers={"Authorization": f"Bearer {web['tokens']['reader']}"})
    assert same.status_code == 200 and same.text == exported.text

    # an audit given the exported corrections leaves the three out
    corrections = upload(web, "corrections", "corrections.jsonl", exported.content)
    again = audit_job(web, [corrections])
    assert again["summary"]["candidates"] <= size - 3 and again["summary"]["decided"] >= 3
    reviewer = web["client"]()
    reviewer.login(web["tokens"]["alice"])
    later = page(reviewer, f"/ui/corrections/{again['id']}")
    left = int(re.search(r"Candidate 1 of (\d+)", later.text).group(1))
    remaining = ids_in_order(reviewer, again["id"], "review", left)
    assert not set(evidence[:3]) & set(remaining)
    assert set(remaining) <= set(review) - set(evidence[:3])


def test_the_end_of_the_queue_says_so(web):
    job = audit_job(web)["id"]
    alice = web["client"]()
    csrf = alice.login(web["tokens"]["alice"])
    html = page(alice, f"/ui/corrections/{job}").text
    size = int(re.search(r"Candidate 1 of (\d+)", html).group(1))
    assert 'id="queue-done"' not in html
    for position in range(size):
        candidate = candidate_of(alice.get(f"/ui/corrections/{job}?pos={position}").text)
        assert decide(alice, csrf, job, candidate, "reject").status_code == 303
    done = alice.get(f"/ui/corrections/{job}")
    assert 'id="queue-done"' in done.text and "End of the queue" in done.text


def test_an_audit_needs_a_run_or_predictions(web):
    api = web["client"]()
    auth = {"Authorization": f"Bearer {web['tokens']['alice']}"}
    dialogues = upload(web, "dialogues", "dialogues.jsonl",
                       (EXAMPLES / "dialogues.jsonl").read_bytes())
    for inputs, field in (({"dialogues": dialogues}, "inputs.predictions"),
                          ({}, "inputs.dialogues"),
                          ({"run": "job_x", "dialogues": dialogues}, "inputs.dialogues")):
        answer = api.post("/v1/jobs", json={"kind": "audit", "inputs": inputs}, headers=auth)
        assert answer.status_code == 422, answer.text
        assert field in answer.text


def test_a_judge_runs_queue_takes_either_order_too(web):
    from .test_web_corrections import judged_run

    job = judged_run(web)
    alice = web["client"]()
    alice.login(web["tokens"]["alice"])
    html = page(alice, f"/ui/corrections/{job}").text
    size = int(re.search(r"Candidate 1 of (\d+)", html).group(1))
    review = ids_in_order(alice, job, "review", size)
    evidence = ids_in_order(alice, job, "evidence", size)
    assert sorted(review) == sorted(evidence) and len(set(review)) == size
    assert "<strong>most likely errors first</strong>" in page(
        alice, f"/ui/corrections/{job}?order=evidence").text
    assert alice.get(f"/ui/corrections/{job}?order=sideways").status_code == 422
