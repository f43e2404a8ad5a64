"""Evaluate jobs in mode ``batch`` against the fake server's Batch API (tests/fault_server.py),
which bills every request line like a live call: a batch job's judgments equal a live job's,
each distinct body is paid once, a cancel cancels the batches, an endpoint without a Batch API
refuses the mode, and a replica killed after submitting never makes anyone submit again."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import judge
import judge.errors
from judge.service import create_token as project_token
from judge.service.db._db import jobs
from judge.service.jobs import JobRunLog
from tests.conftest import EXAMPLES
from tests.fault_server import FaultConfig, FaultServer, ServerProcess, get_json
from tests.service.conftest import CANARY_KEY, Api, running_service, service_settings
from tests.service.serve_process import ServeProcess, cli, create_token


def _verdicts(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["dialogue_id"], r["turn_index"], r["verdict"], r.get("rule"), r.get("error"))
            for r in rows]


def _batches(server: FaultServer | ServerProcess) -> list[dict[str, Any]]:
    """Every batch the fake server was asked to create."""
    return list(get_json(server.port, "/v1/batches")["data"])


@pytest.fixture
def batch_env(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """A service whose endpoint 'fake' has a Batch API (batches run for 1.5 s) and whose
    endpoint 'local' has none; batch jobs are polled every 0.5 s. ``other`` submits for a
    second project, which has a ledger of its own. A test marked ``faults`` passes its
    FaultConfig keywords to the fake server."""
    marker = request.node.get_closest_marker("faults")
    config = FaultConfig(**{"batch_seconds": 1.5, **(marker.kwargs if marker else {})})
    with FaultServer(config) as model:
        settings = service_settings(
            tmp_path / "data", model.url, batch_poll_seconds=0.5,
            endpoints={"fake": {"base_url": model.url, "api_key": CANARY_KEY,
                                "batch_api": True},
                       "local": {"base_url": model.url}})
        with running_service(settings) as (service, app):
            api = Api(app, project_token(service.db, "lab", "read,submit")[0])
            other = Api(app, project_token(service.db, "other", "read,submit")[0])
            try:
                yield {"api": api, "model": model, "files": api.upload_examples(),
                       "service": service, "other": other}
            finally:
                api.close()
                other.close()


def _submit(api: Api, files: dict[str, str], mode: str, **options: Any) -> dict[str, Any]:
    response = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files, "mode": mode,
                                          "options": {"model": "fault-model", **options}})
    assert response.status_code == 201, response.text
    return response.json()


def _rows(api: Api, job_id: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in api.get(f"/v1/jobs/{job_id}/judgments").iter_lines()]


def test_batch_job_judges_like_a_live_job_and_pays_each_body_once(batch_env):
    api, model, files = batch_env["api"], batch_env["model"], batch_env["files"]
    queued = _submit(api, files, "batch", batch_max_requests=5)
    assert queued["mode"] == "batch"
    seen: set[str] = set()
    deadline = time.monotonic() + 60
    while (job := api.get(f"/v1/jobs/{queued['id']}").json())["status"] not in (
            "succeeded", "failed", "cancelled", "stopped"):
        seen.add(job["status"])
        assert time.monotonic() < deadline, job
        time.sleep(0.02)
    assert job["status"] == "succeeded" and job["exit_code"] == 0, job
    assert "waiting" in seen  # no worker held the job while its batches ran

    batches = _batches(model)
    stats = model.snapshot()
    progress = job["progress"]["batches"]
    assert progress["files"] == progress["submitted"] == progress["ended"] == len(batches) > 1
    assert progress["requests_done"] == progress["requests"] == stats["completed"]
    assert stats["max_completed_per_body"] == 1
    assert stats["completed"] == stats["distinct_bodies"]

    # the same inputs judged live in another project (a ledger of its own: sent again)
    other = batch_env["other"]
    live = other.wait(_submit(other, other.upload_examples(), "live")["id"])
    assert live["status"] == "succeeded", live
    assert model.snapshot()["completed"] == 2 * stats["completed"]
    batch_rows = _rows(api, job["id"])
    assert _verdicts(batch_rows) == _verdicts(_rows(other, live["id"]))
    assert len(batch_rows) == live["headline"]["turns"]
    summary = api.get(f"/v1/jobs/{job['id']}/results").json()
    assert summary["scored_turns"] == summary["turns"] == live["headline"]["turns"]
    assert [b["status"] for b in summary["batches"]] == ["completed"] * len(batches)
    assert summary["calls"]["ledger"] == {"answered": 0, "recorded": stats["completed"]}
    assert CANARY_KEY not in json.dumps(summary) and "127.0.0.1" not in json.dumps(summary)


def test_a_batch_job_leaves_out_what_the_ledger_holds_and_records_what_it_paid(batch_env):
    """The project's ledger is shared by its batch jobs too: a batch carries only the
    requests no earlier job paid for, and what it pays for answers later jobs free."""
    api, model, files = batch_env["api"], batch_env["model"], batch_env["files"]
    first = api.wait(_submit(api, files, "live", limit=1)["id"])
    assert first["status"] == "succeeded", first
    paid_live = model.snapshot()["completed"]
    assert paid_live > 0

    job = api.wait(_submit(api, files, "batch", batch_max_requests=5)["id"], timeout=60)
    assert job["status"] == "succeeded" and job["exit_code"] == 0, job
    stats = model.snapshot()
    assert stats["max_completed_per_body"] == 1  # nothing the live job paid went out again
    in_batches = stats["completed"] - paid_live
    assert job["progress"]["batches"]["requests"] == in_batches > 0
    summary = api.get(f"/v1/jobs/{job['id']}/results").json()
    first_calls = api.get(f"/v1/jobs/{first['id']}/results").json()["calls"]["planned"]
    assert summary["calls"]["ledger"] == {"answered": first_calls, "recorded": in_batches}
    assert summary["calls"]["answered_from_cache"] >= summary["calls"]["ledger"]["answered"]

    again = api.wait(_submit(api, files, "live")["id"])
    assert again["status"] == "succeeded", again
    assert model.snapshot()["completed"] == stats["completed"]  # every answer from the ledger
    assert _verdicts(_rows(api, again["id"])) == _verdicts(_rows(api, job["id"]))
    repeat = api.wait(_submit(api, files, "batch")["id"], timeout=60)
    assert repeat["status"] == "succeeded" and repeat["exit_code"] == 0, repeat
    assert repeat["progress"]["batches"]["submitted"] == 0  # nothing left to send
    assert len(_batches(model)) == job["progress"]["batches"]["submitted"]
    assert repeat["progress"]["cost_usd"] == 0 and repeat["progress"]["tokens"] == 0


def test_a_batch_job_honours_its_corrections_as_a_live_job_does(batch_env, tmp_path):
    """``inputs.corrections`` of an evaluate job in mode batch: the corrected version is judged
    beside the file's own and named in the result and the manifest, as in a live job (they
    were once accepted and silently dropped)."""
    api, files = batch_env["api"], batch_env["files"]
    fix_file = tmp_path / "corrections.jsonl"
    fix_file.write_text(json.dumps({
        "dialogue_id": "EX001.json", "turn_index": 2, "slot": "hotel-name",
        "value": "worth house", "gold": "2.1", "reviewer": "ann",
        "time": "2026-11-28T10:00:00Z"}) + "\n")
    fix = api.upload(fix_file, "corrections").json()["id"]
    job = api.wait(_submit(api, {**files, "corrections": [fix]}, "batch")["id"], timeout=60)
    assert job["status"] == "succeeded" and job["exit_code"] == 0, job
    summary = api.get(f"/v1/jobs/{job['id']}/results").json()
    assert [c["base"] for c in summary.get("corrections", [])] == ["2.1"], summary.keys()
    name = summary["corrections"][0]["name"]
    assert name.startswith("2.1+corr:") and summary["corrections"][0]["changed_turns"] == 1
    rows = _rows(api, job["id"])
    fixed = next(r for r in rows if (r["dialogue_id"], r["turn_index"]) == ("EX001.json", 2))
    assert set(fixed["rule"]) >= {"2.1", name}
    assert fixed["gold_turn_state"][name].get("hotel-name") == "worth house"
    assert all(name in r["rule"] for r in rows)
    with batch_env["service"].db.read() as conn:
        manifest = conn.execute(sa.select(jobs.c.manifest).where(jobs.c.id == job["id"])
                                ).scalar()
    assert manifest["sources"]["gold_corrections"] == [name]

    other = batch_env["other"]
    other_files = other.upload_examples()
    other_fix = other.upload(fix_file, "corrections").json()["id"]
    live = other.wait(_submit(other, {**other_files, "corrections": [other_fix]}, "live")["id"])
    assert live["status"] == "succeeded", live
    assert _verdicts(rows) == _verdicts(_rows(other, live["id"]))
    live_summary = other.get(f"/v1/jobs/{live['id']}/results").json()
    assert live_summary["corrections"] == summary["corrections"]


def _wait_submitted(api: Api, job_id: str, timeout: float = 30) -> dict[str, Any]:
    """The job once it waits on batches it has all submitted."""
    deadline = time.monotonic() + timeout
    while True:
        shown = api.get(f"/v1/jobs/{job_id}").json()
        batches = shown["progress"].get("batches") or {}
        if shown["status"] == "waiting" and batches.get("submitted") == batches.get("files"):
            return shown
        assert time.monotonic() < deadline, shown
        time.sleep(0.02)


def test_two_batch_jobs_at_once_pay_each_shared_request_once(batch_env):
    """Batch jobs claim the requests they submit: a second batch job leaves out what the
    first has in its batches and waits for those replies, so overlapping systems submitted
    together pay once for what they share."""
    api, model, files = batch_env["api"], batch_env["model"], batch_env["files"]
    weak = {**files, "predictions": api.upload(EXAMPLES / "predictions-weak.jsonl",
                                               "predictions").json()["id"]}
    first = _submit(api, files, "batch", batch_max_requests=8)
    _wait_submitted(api, first["id"])
    same = _submit(api, files, "batch")
    overlapping = _submit(api, weak, "batch")
    done = {job["id"]: api.wait(job["id"], timeout=60) for job in (first, same, overlapping)}
    assert all(j["status"] == "succeeded" and j["exit_code"] == 0 for j in done.values()), done
    stats = model.snapshot()
    assert stats["max_completed_per_body"] == 1
    assert stats["completed"] == stats["distinct_bodies"]
    assert done[same["id"]]["progress"]["batches"]["submitted"] == 0
    shared = api.get(f"/v1/jobs/{same['id']}/results").json()["calls"]["ledger"]
    assert shared == {"answered": done[first["id"]]["progress"]["total"], "recorded": 0}
    assert _verdicts(_rows(api, same["id"])) == _verdicts(_rows(api, first["id"]))
    weak_calls = api.get(f"/v1/jobs/{overlapping['id']}/results").json()["calls"]
    assert 0 < weak_calls["ledger"]["answered"] < weak_calls["planned"]


@pytest.mark.faults(batch_seconds=60)
def test_a_live_job_never_waits_for_a_running_batch(batch_env):
    """A request in a batch that may take a day does not hold up a live job: the live job
    sends it (paying a second time) and finishes while the batch still runs."""
    api, model, files = batch_env["api"], batch_env["model"], batch_env["files"]
    batch = _submit(api, files, "batch")
    _wait_submitted(api, batch["id"])
    live = api.wait(_submit(api, files, "live")["id"], timeout=30)
    assert live["status"] == "succeeded" and live["exit_code"] == 0, live
    assert api.get(f"/v1/jobs/{batch['id']}").json()["status"] == "waiting"
    assert model.snapshot()["max_completed_per_body"] == 2  # the batch's and the live one
    assert api.post(f"/v1/jobs/{batch['id']}/cancel").status_code == 200
    assert api.wait(batch["id"])["status"] == "cancelled"


@pytest.mark.faults(rates={"http_500": 0.4}, transient_attempts=1)
def test_the_error_rows_of_a_batch_job_are_retried_live(batch_env):
    """Lines that failed in the batch are error rows; retry-errors sends just those, live,
    and the run's cost counts the batch part at the batch price and the rest at live."""
    api, model, files = batch_env["api"], batch_env["model"], batch_env["files"]
    job = api.wait(_submit(api, files, "batch", model="gpt-4o")["id"], timeout=60)
    assert job["status"] == "succeeded" and job["exit_code"] == 1, job  # some error rows
    failed_lines = model.snapshot()["by_kind"].get("http_500", 0)
    assert failed_lines > 0
    # the batch's run is kept through the job's run store, as a live run is: an evaluate
    # run carrying what was submitted, every planned call in its log
    db = batch_env["service"].db
    collected = JobRunLog(db, job["id"])
    manifest = collected.read_manifest()
    assert manifest["kind"] == "evaluate" and manifest["run_id"]
    assert manifest["batch"]["kind"] == "batch-requests"
    logged = collected.read_log()
    planned = api.get(f"/v1/jobs/{job['id']}/results").json()["calls"]["planned"]
    assert len(logged) == planned and sum(bool(c.get("error")) for c in logged) > 0
    retry = api.post("/v1/jobs", json={"kind": "retry-errors", "inputs": {"run": job["id"]}})
    assert retry.status_code == 201, retry.text
    done = api.wait(retry.json()["id"])
    assert done["status"] == "succeeded" and done["exit_code"] == 0, done
    assert JobRunLog(db, done["id"]).read_manifest()["run_id"] == manifest["run_id"]
    stats = model.snapshot()
    assert stats["completed"] == stats["distinct_bodies"]  # each body paid once in all
    assert stats["max_completed_per_body"] == 1
    rows = _rows(api, done["id"])
    assert not [r for r in rows if r.get("error")]

    other = batch_env["other"]
    live = other.wait(_submit(other, other.upload_examples(), "live", model="gpt-4o")["id"])
    assert live["status"] == "succeeded" and live["exit_code"] == 0, live
    assert _verdicts(rows) == _verdicts(_rows(other, live["id"]))
    retried = api.get(f"/v1/jobs/{done['id']}/results").json()
    all_live = other.get(f"/v1/jobs/{live['id']}/results").json()
    assert retried["tokens"] == all_live["tokens"]
    assert 0.5 * all_live["cost_usd"] < retried["cost_usd"] < all_live["cost_usd"]


@pytest.mark.parametrize("created", [True, False], ids=["created", "never-created"])
def test_a_submission_whose_reply_is_lost_is_found_by_its_metadata(batch_env, monkeypatch,
                                                                   created):
    """The provider's reply to a batch creation is lost (or the request never reached it):
    the job waits and looks the batch up by its metadata; it pays for each file once."""
    from judge.service.queue import _batchjob

    api, model, files = batch_env["api"], batch_env["model"], batch_env["files"]
    real, calls = _batchjob.submit, []

    async def lossy(config, path, **kwargs):
        calls.append(kwargs.get("metadata"))
        if len(calls) == 1:
            if created:
                await real(config, path, **kwargs)
            raise judge.errors.ModelError("batch submit failed: connection reset")
        return await real(config, path, **kwargs)

    monkeypatch.setattr(_batchjob, "submit", lossy)
    job = api.wait(_submit(api, files, "batch", batch_max_requests=10)["id"], timeout=60)
    assert job["status"] == "succeeded" and job["exit_code"] == 0, job
    created_batches = _batches(model)
    files_count = job["progress"]["batches"]["files"]
    assert len(created_batches) == job["progress"]["batches"]["submitted"] == files_count >= 2
    assert len(calls) == files_count + (0 if created else 1)
    assert {b["metadata"]["dst_judge_job"] for b in created_batches} == {job["id"]}
    assert len({b["metadata"]["dst_judge_file"] for b in created_batches}) == files_count
    assert model.snapshot()["max_completed_per_body"] == 1


def test_a_batch_job_over_its_budget_submits_nothing_and_resumes_with_more(batch_env):
    """A batch is paid as a whole: the job's budget is checked on the estimate before any
    batch goes out (exit 3, resumable); with a larger budget the job runs."""
    api, model, files = batch_env["api"], batch_env["model"], batch_env["files"]
    job = _submit(api, files, "batch", model="gpt-4o", budget=0.0001)
    done = api.wait(job["id"], timeout=60)
    assert done["status"] == "stopped" and done["exit_code"] == 3, done
    assert "would cost about" in done["error"] and "0.0001 USD" in done["error"]
    assert _batches(model) == []
    retry = api.post("/v1/jobs", json={"kind": "retry-errors", "inputs": {"run": job["id"]}})
    assert retry.status_code == 422 and retry.json()["error"]["field"] == "inputs.run"
    assert "never collected" in retry.text  # nothing judged yet: resume it instead
    resumed = api.post(f"/v1/jobs/{job['id']}/resume", json={"budget": 100}).json()
    assert resumed["status"] == "queued"
    final = api.wait(job["id"], timeout=60)
    assert final["status"] == "succeeded" and final["exit_code"] == 0, final
    assert len(_batches(model)) >= 1


def test_mode_batch_is_refused_where_there_is_no_batch_api(batch_env):
    api, files = batch_env["api"], batch_env["files"]
    response = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files, "mode": "batch",
                                          "options": {"endpoint": "local"}})
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "mode" and "Batch API" in response.text
    live_only = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                           "options": {"batch_max_requests": 5}})
    assert live_only.status_code == 422
    assert live_only.json()["error"]["field"] == "options.batch_max_requests"
    metrics = api.post("/v1/jobs", json={"kind": "metrics", "mode": "batch",
                                         "inputs": {"schema": files["schema"],
                                                    "dialogues": files["dialogues"],
                                                    "predictions": [files["predictions"]]}})
    assert metrics.status_code == 422 and metrics.json()["error"]["field"] == "mode"


def test_cancelling_a_waiting_batch_job_cancels_its_batches(tmp_path):
    with FaultServer(FaultConfig(batch_seconds=60)) as model:
        settings = service_settings(
            tmp_path / "data", model.url, batch_poll_seconds=0.1,
            endpoints={"fake": {"base_url": model.url, "batch_api": True}})
        with running_service(settings) as (service, app):
            api = Api(app, project_token(service.db, "lab", "read,submit")[0])
            try:
                files = api.upload_examples()
                job = _submit(api, files, "batch", batch_max_requests=10)
                deadline = time.monotonic() + 30
                while True:
                    shown = api.get(f"/v1/jobs/{job['id']}").json()
                    batches = shown["progress"].get("batches") or {}
                    if shown["status"] == "waiting" and batches.get("submitted") == \
                            batches.get("files"):
                        break
                    assert time.monotonic() < deadline, shown
                    time.sleep(0.02)
                assert api.post(f"/v1/jobs/{job['id']}/cancel").status_code == 200
                done = api.wait(job["id"], timeout=30)
                deleted = api.delete(f"/v1/jobs/{job['id']}")
            finally:
                api.close()
        created = _batches(model)
    assert done["status"] == "cancelled", done
    assert len(created) == batches["files"] >= 2
    assert {b["status"] for b in created} == {"cancelled"}
    assert deleted.status_code == 204


@pytest.mark.servers
@pytest.mark.timeout(300)  # server processes killed and restarted: longer than the suite's 60 s
def test_kill_9_after_submission_the_restarted_replica_polls_and_never_resubmits(tmp_path):
    data = tmp_path / "serve"
    token = create_token(data, "lab")
    args = ["--lease", "3", "--batch-poll", "0.3", "--grace", "1"]
    with ServerProcess(FaultConfig(), max_seconds=300) as model:
        # batches stay in progress until the doomed replica is dead: on a busy machine a
        # clock (batch_seconds) let it finish the job before the kill landed
        model.hold_batches()
        endpoints = {"fake": {"base_url": model.url, "batch_api": True}}
        doomed = ServeProcess(data, endpoints=endpoints, args=args)
        with doomed:
            client = judge.Client(doomed.url, token)
            files = {kind: client.upload(EXAMPLES / name, kind).id for kind, name in
                     (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
                      ("predictions", "predictions.jsonl"))}
            queued = cli("submit", "evaluate", "--server", doomed.url, "--mode", "batch",
                         "--schema", files["schema"], "--dialogues", files["dialogues"],
                         "--predictions", files["predictions"], "--model", "m",
                         "-o", "batch_max_requests=8", env={"DST_JUDGE_TOKEN": token})
            job_id = queued.stdout.split()[-1]
            assert client.job(job_id).mode == "batch"
            deadline = time.monotonic() + 60
            while True:  # every batch submitted and recorded, none finished yet
                batches = client.job(job_id).progress.batches
                if batches and batches.files and batches.submitted == batches.files:
                    break
                assert time.monotonic() < deadline, client.job(job_id)
                time.sleep(0.05)
            doomed.kill()
        submitted_before = len(_batches(model))
        with ServeProcess(data, endpoints=endpoints, args=args) as survivor:
            client = judge.Client(survivor.url, token)
            model.hold_batches(False)
            job = client.wait(job_id, timeout=120)
            rows = list(client.judgments(job_id))
            survivor_id = survivor.health(details=True)["worker"]["id"]
        stats = model.snapshot()
        created = _batches(model)
    assert batches is not None and submitted_before == batches.files >= 2
    assert len(created) == submitted_before  # the restarted replica submitted nothing
    assert job.status == "succeeded" and job.exit_code == 0, job
    assert job.progress.worker == survivor_id
    assert stats["max_completed_per_body"] == 1
    assert job.headline is not None
    assert len(rows) == job.headline.turns and all(r["verdict"] is not None for r in rows)


def test_a_batch_job_waits_and_finishes_on_postgres(postgres_db, tmp_path):
    with FaultServer(FaultConfig()) as model:
        model.running.batches_held.set()  # finished once the test has seen the job wait
        settings = service_settings(
            tmp_path / "data", model.url, db=postgres_db, batch_poll_seconds=0.2,
            endpoints={"fake": {"base_url": model.url, "batch_api": True}})
        with running_service(settings) as (service, app):
            api = Api(app, project_token(service.db, "lab", "read,submit")[0])
            try:
                files = api.upload_examples()
                job = _submit(api, files, "batch", batch_max_requests=12)
                waiting = []
                deadline = time.monotonic() + 60
                while (shown := api.get(f"/v1/jobs/{job['id']}").json())["status"] not in (
                        "succeeded", "failed", "cancelled", "stopped"):
                    if shown["status"] == "waiting":
                        waiting.append(api.get("/v1/jobs", params={"status": "waiting"})
                                       .json()["jobs"])
                        model.running.batches_held.clear()
                    assert time.monotonic() < deadline, shown
                    time.sleep(0.05)
            finally:
                api.close()
        created = _batches(model)
    assert shown["status"] == "succeeded" and shown["exit_code"] == 0, shown
    assert shown["attempts"] == 1  # polls are visits, not new attempts
    assert waiting and all([j["id"] for j in listed] == [job["id"]] for listed in waiting
                           if listed)
    assert shown["progress"]["batches"]["submitted"] == len(created) >= 2
