"""The service's ``corrections`` file kind and the jobs that take ``inputs.corrections``:
checked on upload like ``dst-judge validate corrections`` (422 naming line and field),
applied to the gold before judging (evaluate), scored against (metrics, with the change rows),
and added to a run's RULE verdicts without a model call (agreement, audit); the corrected
version is named with its digest in every result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from judge.service.db._db import jobs
from tests.service.conftest import count_rows

CORRECTION = {"dialogue_id": "EX001.json", "turn_index": 2, "slot": "hotel-name",
              "value": "worth house", "gold": "2.1", "reviewer": "ann",
              "time": "2026-11-28T10:00:00Z"}


def _corrections(tmp_path: Path, *records: dict[str, Any]) -> Path:
    path = tmp_path / "corrections.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records or (CORRECTION,)))
    return path


def _evaluate(api: Any, files: dict[str, Any]) -> dict[str, Any]:
    response = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                          "options": {"model": "fake-model"}})
    assert response.status_code == 201, response.text
    return api.wait(response.json()["id"])


def test_a_corrections_upload_is_described_and_bad_records_name_line_and_field(
        service_env, tmp_path):
    api = service_env["api"]
    second = {**CORRECTION, "reviewer": "bob", "adjudicated": True}
    made = api.upload(_corrections(tmp_path, CORRECTION, second), "corrections")
    assert made.status_code == 201, made.text
    info = made.json()["info"]
    assert info == {"corrections": 2, "versions": ["2.1"], "reviewers": ["ann", "bob"],
                    "adjudicated": 1}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(CORRECTION) + "\n" + json.dumps(
        {**CORRECTION, "turn_index": -2}) + "\n")
    refused = api.upload(bad, "corrections")
    assert refused.status_code == 422
    body = refused.json()["error"]
    assert "bad.jsonl" in body["message"] and ":2" in body["message"], body
    assert body["field"] == "turn_index" and "/tmp" not in body["message"]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert api.upload(empty, "corrections").status_code == 422


def test_jobs_apply_the_corrections_and_name_the_corrected_version(service_env, tmp_path):
    api, files = service_env["api"], service_env["files"]
    fix = api.upload(_corrections(tmp_path), "corrections").json()["id"]
    run = _evaluate(api, {**files, "corrections": [fix]})
    assert run["status"] == "succeeded", run
    summary = api.get(f"/v1/jobs/{run['id']}/results").json()
    name = summary["corrections"][0]["name"]
    assert name.startswith("2.1+corr:") and summary["corrections"][0]["changed_turns"] == 1
    rows = [json.loads(line) for line in
            api.get(f"/v1/jobs/{run['id']}/judgments").text.splitlines()]
    fixed = next(r for r in rows if r["dialogue_id"] == "EX001.json" and r["turn_index"] == 2)
    assert set(fixed["rule"]) >= {"2.1", "2.4", name}
    assert fixed["gold_turn_state"][name].get("hotel-name") == "worth house"
    with service_env["service"].db.read() as conn:
        manifest = conn.execute(sa.select(jobs.c.manifest).where(jobs.c.id == run["id"])
                                ).scalar()
    assert manifest["sources"]["gold_corrections"] == [name]

    retry = api.post("/v1/jobs", json={"kind": "retry-errors", "inputs": {"run": run["id"]}})
    retried = api.wait(retry.json()["id"])
    assert retried["status"] == "succeeded", retried
    again = api.get(f"/v1/jobs/{retried['id']}/results").json()
    assert again["corrections"][0]["name"] == name and again["calls"]["sent"] == 0

    plain = _evaluate(api, files)
    metrics = api.post("/v1/jobs", json={
        "kind": "metrics", "inputs": {"schema": files["schema"], "dialogues": files["dialogues"],
                                      "predictions": [files["predictions"]],
                                      "corrections": [fix]},
        "options": {"gold": "2.1"}}).json()
    audit = api.post("/v1/jobs", json={"kind": "audit", "inputs": {
        "run": plain["id"], "corrections": [fix]}}).json()
    agreement = api.post("/v1/jobs", json={"kind": "agreement", "inputs": {
        "run": plain["id"], "corrections": [fix]}, "options": {"n_boot": 20}}).json()
    done = {k: api.wait(j["id"]) for k, j in
            (("metrics", metrics), ("audit", audit), ("agreement", agreement))}
    assert all(j["status"] == "succeeded" for j in done.values()), done
    report = api.get(f"/v1/jobs/{metrics['id']}/results").json()
    assert report["options"]["gold"] == name and report["corrections"][0]["name"] == name
    change = report["change"]
    assert change["columns"][:3] == ["system", "gold", "corrected"]
    row = dict(zip(change["columns"], change["rows"][0], strict=True))
    assert (row["gold"], row["corrected"], row["turns changed"]) == ("2.1", name, 1)
    assert row["Δ low"] <= row["Δ JGA"] <= row["Δ high"]
    assert row["Δ JGA"] == row["JGA corr."] - row["JGA"]
    audited = api.get(f"/v1/jobs/{audit['id']}/results").json()
    assert audited["corrections"][0]["name"] == name
    item = next(i for i in audited["list"]
                if (i["dialogue_id"], i["turn_index"], i["slot"]) == ("EX001.json", 2,
                                                                       "hotel-name"))
    assert item["gold"] == {"2.1": None, "2.4": "worth house", name: "worth house"}
    assert name in item["rule"]
    agreed = api.get(f"/v1/jobs/{agreement['id']}/results").json()
    assert agreed["corrections"][0]["name"] == name


def test_the_corrections_of_a_job_that_is_no_judge_run_are_refused_with_its_kind(
        service_env):
    """What schemathesis met with 25 examples per operation (issue 36): a metrics job's id is
    schema-valid, and its export is a 422 that says why, never a 500 or an empty file."""
    api, files = service_env["api"], service_env["files"]
    made = api.post("/v1/jobs", json={"kind": "metrics", "inputs": {
        **files, "predictions": [files["predictions"]]}})
    assert made.status_code == 201, made.text
    job = api.wait(made.json()["id"])
    refused = api.get(f"/v1/jobs/{job['id']}/corrections")
    assert refused.status_code == 422, refused.text
    assert "is a metrics job; candidates are a judge run's" in refused.json()["error"]["message"]
    assert api.get("/v1/jobs/job_0000000000000000/corrections").status_code == 404


def test_a_corrections_file_of_another_project_is_refused_and_no_job_is_written(
        service_env, tmp_path):
    api, files, tokens = service_env["api"], service_env["files"], service_env["tokens"]
    theirs = api.upload(_corrections(tmp_path), "corrections", token=tokens["other"])
    assert theirs.status_code == 201
    their_id = theirs.json()["id"]
    assert api.get(f"/v1/files/{their_id}").status_code == 404
    db = service_env["service"].db
    before = count_rows(db, jobs)
    refused = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": {
        **files, "corrections": [their_id]}, "options": {"model": "fake-model"}})
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "inputs.corrections[0]"
    assert "no file" in refused.json()["error"]["message"]
    wrong_kind = api.post("/v1/jobs", json={"kind": "metrics", "inputs": {
        "schema": files["schema"], "dialogues": files["dialogues"],
        "predictions": [files["predictions"]], "corrections": [files["schema"]]}})
    assert wrong_kind.status_code == 422 and "expected corrections" in \
        wrong_kind.json()["error"]["message"]
    assert count_rows(db, jobs) == before
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(jobs)).scalar() == before


def _decision(candidate: str, reviewer: str, value: str | None, was: str | None = "x",
              adjudicated: bool = False) -> dict[str, Any]:
    action = "reject" if value == was else "edit"
    return {"candidate": candidate, "dialogue_id": candidate, "turn_index": 0, "slot": "a-b",
            "gold": "2.1", "action": action, "value": value, "was": was,
            "adjudicated": adjudicated, "reviewer": reviewer, "note": None,
            "updated_at": 1_800_000_000.0}


def test_progress_agreement_and_records_of_decisions():
    from judge.service import corrections_records, progress, reviewer_agreement

    decisions = [
        _decision("c1", "ann", "y"), _decision("c1", "bob", "y"),      # both change: same
        _decision("c2", "ann", "x"), _decision("c2", "bob", "x"),      # both reject
        _decision("c3", "ann", "y"), _decision("c3", "bob", "x"),      # dispute
        _decision("c4", "ann", "y"), _decision("c4", "bob", "z"),      # both change, apart
        _decision("c4", "adjudicator", "z", adjudicated=True),
        _decision("c5", "ann", "y"),                                   # one reviewer only
    ]
    assert progress(decisions, 7) == {"candidates": 7, "reviewed": 5, "accepted": 3,
                                      "rejected": 1, "disputed": 1, "adjudicated": 1}
    agreement = reviewer_agreement(decisions)
    # pairs (ann, bob) on c1..c4: changes (T,T) (F,F) (T,F) (T,T); same value on c1, c2
    observed, first, second = 3 / 4, 3 / 4, 2 / 4
    chance = first * second + (1 - first) * (1 - second)
    assert agreement["pairs"] == 4 and agreement["candidates_shared"] == 4
    assert agreement["same"] == 0.5
    assert abs(agreement["kappa"] - (observed - chance) / (1 - chance)) < 1e-12
    records = corrections_records(decisions)
    assert records[2]["value"] == records[2]["was"] == "x" and records[2]["reviewer"] == "ann"
    assert records[8]["adjudicated"] is True and "adjudicated" not in records[0]
    assert records[0]["time"] == "2027-01-15T08:00:00+00:00"


def test_a_first_decision_saved_at_once_on_another_replica_updates_it(db, monkeypatch):
    """Two replicas saving one reviewer's first decision on a candidate at the same moment: the
    one that loses the unique constraint (Postgres) updates the row instead of failing with a
    500."""
    from judge.service import ensure_project
    from judge.service.auth._auth import Principal
    from judge.service.db._db import correction_decisions
    from judge.service.storage._decisions import DecisionStore

    project = ensure_project(db, "lab")
    reviewer = Principal("tok_1", "ann", project, "lab", ("review",))
    store = DecisionStore(db)
    values = {"candidate": "c1", "dialogue_id": "EX001.json", "turn_index": 2,
              "slot": "hotel-name", "gold": "2.1", "value": "worth house", "was": None}
    real = DecisionStore._upsert
    raced: list[bool] = []

    def racing(self: Any, key: dict[str, Any], data: dict[str, Any], moment: float) -> Any:
        if not raced:  # the other replica's insert lands first; this insert then collides
            raced.append(True)
            real(self, key, {**data, "action": "reject", "value": "other"}, moment)
            raise sa.exc.IntegrityError("INSERT", {}, Exception("unique constraint"))
        return real(self, key, data, moment)

    monkeypatch.setattr(DecisionStore, "_upsert", racing)
    saved = store.put(reviewer, "job_1", {**values, "action": "accept"})
    assert raced and saved["action"] == "accept" and saved["value"] == "worth house"
    assert count_rows(db, correction_decisions) == 1
