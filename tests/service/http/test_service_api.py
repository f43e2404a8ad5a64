"""The /v1 API in-process: uploads with the CLI's validation, every job kind from submission to
results, judgments, export and import, labels, usage, health, metrics and the OpenAPI docs."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import judge
from judge.service import Database
from judge.service.queue import JobQueue
from tests.conftest import EXAMPLES
from tests.service.conftest import CANARY_KEY, Api, running_service, service_settings


def _evaluate(env, **options):
    api, files = env["api"], env["files"]
    response = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                          "options": {"model": "fake-model", **options}})
    assert response.status_code == 201, response.text
    return api.wait(response.json()["id"])


def test_upload_is_content_addressed_and_gz_is_the_same_file(service_env):
    api = service_env["api"]
    plain = (EXAMPLES / "dialogues.jsonl").read_bytes()
    again = api.upload(EXAMPLES / "dialogues.jsonl", "dialogues")
    assert again.status_code == 200  # same content, same kind: the existing record
    assert again.json()["id"] == service_env["files"]["dialogues"]
    packed = api.upload(EXAMPLES / "dialogues.jsonl", "dialogues", name="d.jsonl.gz",
                        content=gzip.compress(plain))
    assert packed.status_code == 200
    assert packed.json()["sha256"] == again.json()["sha256"]
    info = again.json()["info"]
    assert info == {"dialogues": 4, "turns": 11, "versions": ["2.1", "2.4"]}
    listed = api.get("/v1/files").json()["files"]
    assert {f["kind"] for f in listed} == {"schema", "dialogues", "predictions"}
    content = api.get(f"/v1/files/{again.json()['id']}/content")
    assert content.content == plain


def test_upload_errors_name_file_line_and_field_like_the_cli(service_env, tmp_path):
    api = service_env["api"]
    lines = (EXAMPLES / "dialogues.jsonl").read_text().splitlines()
    bad = json.loads(lines[1])
    bad["turns"][0]["turn_index"] = 5
    lines[1] = json.dumps(bad)
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(lines) + "\n")
    response = api.upload(path, "dialogues")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["message"].startswith("broken.jsonl:2: field 'turns[0].turn_index'")
    assert error["field"] == "turns[0].turn_index"
    assert str(tmp_path) not in response.text and "/tmp" not in error["message"]
    cli = judge.InputError  # the library raises the same reason for the same file
    try:
        judge.load_dialogues(path)
    except cli as exc:
        assert exc.reason in error["message"]
    wrong_json = api.upload(path, "schema", content=b"{not json", name="s.json")
    assert wrong_json.status_code == 422
    assert wrong_json.json()["error"]["message"].startswith("s.json:1: invalid JSON")
    unknown = api.upload(path, "weights")
    assert unknown.status_code == 422 and unknown.json()["error"]["field"] == "kind"


def test_evaluate_job_runs_and_reports_progress_and_results(service_env):
    api, model = service_env["api"], service_env["model"]
    job = _evaluate(service_env)
    assert job["status"] == "succeeded" and job["exit_code"] == 0, job
    assert job["exit_meaning"] == "every turn judged"
    assert job["progress"]["total"] == 22 and job["progress"]["done"] == 22
    assert job["progress"]["tokens"] > 0
    assert job["headline"]["turns"] == 11 and job["headline"]["tsa"] is not None
    assert model.snapshot()["completed"] == 22
    # the whole run log is in the database with the outcome (a retry-errors job or another
    # worker starts from it): the last calls go in the transaction that finishes the job
    stored = service_env["service"].jobs.calls(job["id"])
    assert len(stored) == 22 and len({c["custom_id"] for c in stored}) == 22
    summary = api.get(f"/v1/jobs/{job['id']}/results").json()
    assert summary["turns"] == 11 and summary["options"]["endpoint"] == "fake"
    assert "base_url" not in summary["options"] and "cache_dir" not in summary["options"]
    assert summary["data"]["predictions"] == "predictions.jsonl"
    rows = [json.loads(line) for line in
            api.get(f"/v1/jobs/{job['id']}/judgments").text.splitlines()]
    assert len(rows) == 11 and rows[0]["dialogue_id"]
    some = api.get(f"/v1/jobs/{job['id']}/judgments",
                   params={"dialogue_id": rows[0]["dialogue_id"], "limit": 1}).text
    assert len(some.splitlines()) == 1
    wrong = api.get(f"/v1/jobs/{job['id']}/judgments", params={"verdict": "false"}).text
    assert all(not json.loads(line)["verdict"] for line in wrong.splitlines())
    events = api.get(f"/v1/jobs/{job['id']}/events")
    assert events.headers["content-type"].startswith("text/event-stream")
    assert "event: end" in events.text and '"status": "succeeded"' in events.text


def test_second_job_of_the_project_is_answered_by_the_project_cache(service_env):
    model = service_env["model"]
    first = _evaluate(service_env)
    second = _evaluate(service_env)
    assert second["status"] == "succeeded"
    assert second["progress"]["cache_hits"] == 22
    assert model.snapshot()["completed"] == 22  # paid once for both jobs
    assert first["id"] != second["id"]


def test_jobs_of_a_worker_share_its_connections_to_an_endpoint(tmp_path, fake_model):
    """A worker keeps its connections to an endpoint open across jobs (aiohttp backend): the
    second job, with predictions of its own (nothing in the ledger), opens none."""
    endpoint = {"base_url": fake_model.url, "api_key": CANARY_KEY, "http_backend": "aiohttp"}
    settings = service_settings(tmp_path / "data", fake_model.url, endpoints={"fake": endpoint})
    rows = [json.loads(line) for line in
            (EXAMPLES / "predictions.jsonl").read_text(encoding="utf-8").splitlines() if line]
    for row in rows:
        for turn in row["turns"]:
            turn["pred_turn_state"] = {slot: f"{value} again"
                                       for slot, value in turn["pred_turn_state"].items()}
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with running_service(settings) as (service, app):
        from judge.service import create_token

        api = Api(app, create_token(service.db, "lab", "read,submit", name="alice")[0])
        try:
            files = {kind: api.upload(path, kind).json()["id"] for kind, path in
                     (("schema", EXAMPLES / "schema.json"),
                      ("dialogues", EXAMPLES / "dialogues.jsonl"),
                      ("predictions", EXAMPLES / "predictions.jsonl"))}
            env = {"api": api, "files": files}
            first = _evaluate(env, concurrency=2)
            opened = fake_model.snapshot()["connections"]
            env["files"] = {**files, "predictions": api.upload(other, "predictions").json()["id"]}
            second = _evaluate(env, concurrency=2)
        finally:
            api.close()
    assert first["status"] == second["status"] == "succeeded"
    assert second["progress"]["cache_hits"] < second["progress"]["total"]  # it sent requests
    stats = fake_model.snapshot()
    assert stats["completed"] > 22 and 1 <= opened <= 2
    assert stats["connections"] == opened


def test_metrics_agreement_compare_audit_and_retry_errors_jobs(service_env, tmp_path):
    api, files = service_env["api"], service_env["files"]
    run = _evaluate(service_env)
    metrics = api.post("/v1/jobs", json={
        "kind": "metrics", "inputs": {"schema": files["schema"], "dialogues": files["dialogues"],
                                      "predictions": [files["predictions"]]},
        "options": {"match": "nospace", "gold": "2.4"}}).json()
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"dialogue_id": r["dialogue_id"],
                                          "turn_index": r["turn_index"], "label": 1}) + "\n"
                              for r in map(json.loads, api.get(
                                  f"/v1/jobs/{run['id']}/judgments").text.splitlines())))
    human = api.upload(labels, "labels").json()["id"]
    agreement = api.post("/v1/jobs", json={"kind": "agreement",
                                           "inputs": {"run": run["id"], "human": human},
                                           "options": {"n_boot": 50}}).json()
    compare = api.post("/v1/jobs", json={"kind": "compare",
                                         "inputs": {"runs": [run["id"], run["id"]]}}).json()
    audit = api.post("/v1/jobs", json={"kind": "audit", "inputs": {"run": run["id"]}}).json()
    retry = api.post("/v1/jobs", json={"kind": "retry-errors",
                                       "inputs": {"run": run["id"]}}).json()
    done = {name: api.wait(job["id"]) for name, job in (
        ("metrics", metrics), ("agreement", agreement), ("compare", compare),
        ("audit", audit), ("retry", retry))}
    assert all(j["status"] == "succeeded" for j in done.values()), done
    report = api.get(f"/v1/jobs/{metrics['id']}/results").json()
    assert report["options"]["gold"] == "2.4" and report["systems"][0]["name"] == "example-dst"
    assert report["data"]["dialogues"] == "dialogues.jsonl"
    figures = api.get(f"/v1/jobs/{agreement['id']}/results").json()
    assert "human" in figures["raters"] and figures["turns"] == 11
    table = api.get(f"/v1/jobs/{compare['id']}/results").json()
    assert len(table["methods"]) == 2
    audited = api.get(f"/v1/jobs/{audit['id']}/results").json()
    assert audited["items"] == len(audited["list"]) > 0
    page = api.get(f"/v1/jobs/{audit['id']}/artifacts/audit.html")
    assert page.status_code == 200 and b"<html" in page.content.lower()
    assert page.headers["content-disposition"].startswith("attachment")
    retried = api.get(f"/v1/jobs/{retry['id']}/results").json()
    assert retried["calls"]["resumed"] == 22 and retried["calls"]["sent"] == 0


def test_export_and_import_a_bundle(service_env):
    api = service_env["api"]
    job = _evaluate(service_env)
    bundle = api.get(f"/v1/jobs/{job['id']}/export")
    assert bundle.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(bundle.content), mode="r:gz") as tar:
        names = set(tar.getnames())
        meta = json.loads(tar.extractfile("bundle.json").read())
        manifest = json.loads(tar.extractfile("manifest.json").read())
    assert names == {"bundle.json", "manifest.json", "summary.json", "judgments.jsonl",
                     "calls.jsonl"}
    assert meta["inputs"]["dialogues"]["sha256"] == manifest["inputs"]["dialogues"]
    assert (meta["job_id"], meta["kind"], meta["status"], meta["exit_code"]) == (
        job["id"], "evaluate", "succeeded", job["exit_code"])
    assert (meta["endpoint"], meta["options"]) == (job["endpoint"], job["options"])
    assert "sources" not in manifest and "options" not in manifest
    # the run's configuration travels, without the name of this server's endpoint
    assert manifest["config"]["model"] == "fake-model" and "endpoint" not in manifest["config"]
    imported = api.post("/v1/bundles", token=service_env["tokens"]["other"],
                        files={"file": ("b.tar.gz", bundle.content)})
    assert imported.status_code == 201, imported.text
    copy = imported.json()
    assert copy["imported"] and copy["status"] == "succeeded"
    # the options travel; the endpoint's name is the exporter's, not one of this service
    assert (copy["endpoint"], copy["options"]) == (None, job["options"])
    other = service_env["tokens"]["other"]
    rows = api.get(f"/v1/jobs/{copy['id']}/judgments", token=other).text.splitlines()
    assert len(rows) == 11
    assert api.get(f"/v1/jobs/{copy['id']}/results", token=other).json()["turns"] == 11
    junk = api.post("/v1/bundles", files={"file": ("b.tar.gz", b"not a tarball")})
    assert junk.status_code == 422 and junk.json()["error"]["field"] == "file"


def test_cancel_resume_delete_and_usage(service_env):
    api, files = service_env["api"], service_env["files"]
    service = service_env["service"]
    service.worker.drain()  # nothing is claimed from here on: the job stays queued
    service.worker.stop(5)
    job = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                     "options": {"model": "m"}}).json()
    assert job["status"] == "queued"
    busy = api.delete(f"/v1/files/{files['schema']}")
    assert busy.status_code == 409
    assert api.delete(f"/v1/jobs/{job['id']}").status_code == 409
    cancelled = api.post(f"/v1/jobs/{job['id']}/cancel").json()
    assert cancelled["status"] == "cancelled"
    again = api.post(f"/v1/jobs/{job['id']}/resume", json={"budget": 1.0}).json()
    assert again["status"] == "queued" and again["budget_usd"] == 1.0
    api.post(f"/v1/jobs/{job['id']}/cancel")
    assert api.delete(f"/v1/jobs/{job['id']}").status_code == 204
    assert api.get(f"/v1/jobs/{job['id']}").status_code == 404
    usage = api.get("/v1/usage").json()
    assert usage["project"]["jobs"] == 0
    assert api.get("/v1/jobs", params={"status": "queued"}).json()["jobs"] == []


def test_labels_round_trip_to_the_labels_file_format(service_env, tmp_path):
    api, tokens = service_env["api"], service_env["tokens"]
    body = {"dialogue_id": "PMUL0001", "turn_index": 0, "label": "incorrect", "note": "x"}
    unsaid = api.put("/v1/labels", token=tokens["review"], json=body)
    assert unsaid.status_code == 422 and unsaid.json()["error"]["field"] == "job_id"
    schema = api.put("/v1/labels", token=tokens["review"],
                     json={**body, "predictions": service_env["files"]["schema"]})
    assert schema.status_code == 422 and schema.json()["error"]["field"] == "predictions"
    body["predictions"] = service_env["files"]["predictions"]
    first = api.put("/v1/labels", token=tokens["review"], json=body)
    assert first.status_code == 200, first.text
    sha = api.get(f"/v1/files/{body['predictions']}").json()["sha256"]
    assert first.json()["subject"] == sha
    replaced = api.put("/v1/labels", token=tokens["review"], json={**body, "label": "correct"})
    assert replaced.json()["id"] == first.json()["id"]
    api.put("/v1/labels", token=tokens["review"],
            json={**body, "slot": "hotel-area", "label": "unsure"})
    assert api.put("/v1/labels", token=tokens["read"], json=body).status_code == 403
    listed = api.get("/v1/labels", token=tokens["read"]).json()["labels"]
    assert len(listed) == 2 and {x["reviewer"] for x in listed} == {"bob"}
    mixed = api.get("/v1/labels", token=tokens["read"], params={"format": "labels"})
    assert mixed.status_code == 422 and mixed.json()["error"]["field"] == "job_id"
    exported = api.get("/v1/labels", token=tokens["read"],
                       params={"format": "labels", "predictions": body["predictions"]})
    path = tmp_path / "labels.jsonl"
    path.write_bytes(exported.content)
    rows = [json.loads(line) for line in exported.text.splitlines() if line]
    assert [row.get("note") for row in rows if row.get("slot") is None] == ["x"]  # kept
    labels = judge.load_labels(path)  # today's reader takes the export
    assert [(r.dialogue_id, r.label, r.annotator, r.predictions_sha256)
            for r in labels.records] == [("PMUL0001", 1, "bob", sha)]


def test_health_metrics_openapi_and_me(service_env):
    api = service_env["api"]
    health = api.get("/healthz", token="")
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert api.get("/healthz").json() == {"status": "ok"}  # a token without the admin scope
    details = api.get("/healthz", token=service_env["tokens"]["admin"])
    assert details.status_code == 200 and details.json()["database"] == "ok"
    _evaluate(service_env)
    assert api.get("/metrics", token="").status_code == 401
    assert api.get("/metrics").status_code == 403  # a token without the admin scope
    text = api.get("/metrics", token=service_env["tokens"]["admin"]).text
    assert 'dst_judge_jobs{status="succeeded"} 1.0' in text
    assert 'dst_judge_http_requests_total{method="POST",route="/v1/jobs",status="201"}' in text
    assert "dst_judge_workers 1.0" in text
    schema = api.get("/openapi.json", token="").json()
    assert "/v1/jobs/{job_id}/judgments" in schema["paths"]
    assert api.get("/docs", token="").status_code == 200
    me = api.get("/v1/me").json()
    assert me["project"]["name"] == "lab" and me["scopes"] == ["read", "submit"]
    endpoints = api.get("/v1/endpoints").json()
    assert {e["name"] for e in endpoints["endpoints"]} == {"fake", "other"}
    assert "base_url" not in json.dumps(endpoints)


def test_failed_inputs_give_exit_code_2_with_the_cli_message(service_env, tmp_path):
    api, files = service_env["api"], service_env["files"]
    lines = (EXAMPLES / "predictions.jsonl").read_text().splitlines()
    path = tmp_path / "short.jsonl"
    path.write_text("\n".join(lines[:-1]) + "\n")
    short = api.upload(path, "predictions").json()["id"]
    job = api.post("/v1/jobs", json={"kind": "evaluate",
                                     "inputs": {**files, "predictions": short}}).json()
    done = api.wait(job["id"])
    assert done["status"] == "failed" and done["exit_code"] == 2
    assert done["error"].startswith("short.jsonl: predictions cover 3 of 4 dialogues")
    assert "/files/" not in done["error"]


def test_budget_stop_is_exit_3_and_resumable(service_env):
    api, files = service_env["api"], service_env["files"]
    job = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                     "options": {"model": "gpt-4o", "budget": 0.0001,
                                                 "concurrency": 1}}).json()
    done = api.wait(job["id"])
    assert done["status"] == "stopped" and done["exit_code"] == 3, done
    assert done["progress"]["cost_usd"] > 0
    resumed = api.post(f"/v1/jobs/{job['id']}/resume", json={"budget": 100}).json()
    assert resumed["status"] == "queued"
    final = api.wait(job["id"])
    assert final["status"] == "succeeded" and final["attempts"] == 2
    assert service_env["model"].snapshot()["max_completed_per_body"] == 1


def test_migrations_match_the_tables(tmp_path):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from judge.service.db._db import metadata

    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    db.migrate()
    db.migrate()  # a second start finds nothing to do
    with db.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    assert diff == []


def test_a_token_spending_cap_stops_its_jobs_then_refuses_new_ones(service_env):
    from judge.service import create_token

    api, files = service_env["api"], service_env["files"]
    capped = create_token(service_env["service"].db, "lab", "read,submit",
                          spend_cap_usd=0.0001)[0]
    job = api.post("/v1/jobs", token=capped, json={
        "kind": "evaluate", "inputs": files,
        "options": {"model": "gpt-4o", "concurrency": 1}}).json()
    done = api.wait(job["id"], token=capped)
    assert done["status"] == "stopped" and done["exit_code"] == 3, done
    refused = api.post("/v1/jobs", token=capped, json={"kind": "evaluate", "inputs": files})
    assert refused.status_code == 403 and "spending cap" in refused.json()["error"]["message"]
    usage = api.get("/v1/usage", token=capped).json()
    mine = [t for t in usage["tokens"] if t["spend_cap_usd"] == 0.0001]
    assert mine and mine[0]["cost_usd"] >= 0.0001


def test_an_uploaded_rules_file_is_used_by_name(service_env, tmp_path):
    api, files = service_env["api"], service_env["files"]
    rules = api.upload(EXAMPLES.parent / "rules" / "multiwoz.json", "rules")
    assert rules.status_code == 201, rules.text
    job = api.post("/v1/jobs", json={"kind": "evaluate",
                                     "inputs": {**files, "rules": rules.json()["id"]},
                                     "options": {"model": "m"}}).json()
    done = api.wait(job["id"])
    assert done["status"] == "succeeded"
    summary = api.get(f"/v1/jobs/{job['id']}/results").json()
    assert "/files/" not in json.dumps(summary)


def test_retention_deletes_finished_jobs_with_their_results(service_env):
    import time as clock

    api, service = service_env["api"], service_env["service"]
    job = _evaluate(service_env)
    assert JobQueue(service.db).purge(clock.time() - 3600) == []  # younger than the retention
    assert JobQueue(service.db).purge(clock.time() + 1) == [job["id"]]
    assert api.get(f"/v1/jobs/{job['id']}").status_code == 404
    assert api.get(f"/v1/jobs/{job['id']}/judgments").status_code == 404


def test_the_workers_housekeeping_applies_retention_to_jobs_and_the_ledger(service_env):
    """``--retention-days``: the worker's periodic pass deletes finished jobs and the ledger's
    replies older than the setting (here every job and reply is older: the clock is moved)."""
    import asyncio
    from unittest import mock

    import sqlalchemy as sa

    from judge.service.db._db import ledger_requests

    api, service = service_env["api"], service_env["service"]
    job = _evaluate(service_env)
    with service.db.read() as conn:
        replies = conn.execute(sa.select(sa.func.count()).select_from(ledger_requests)).scalar()
    assert replies > 0
    worker = service.worker
    worker.settings = worker.settings.model_copy(update={"retention_days": 1.0})
    worker._last_retention = float("-inf")
    import judge.service.queue._worker as worker_module

    later = worker_module.now() + 2 * 86400
    with mock.patch.object(worker_module, "now", lambda: later):
        asyncio.run(worker._housekeeping())
    with service.db.read() as conn:
        left = conn.execute(sa.select(sa.func.count()).select_from(ledger_requests)).scalar()
    assert left == 0
    assert api.get(f"/v1/jobs/{job['id']}").status_code == 404
