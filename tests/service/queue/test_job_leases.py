"""The queue's promises about leases and cancels (docs/SERVICE.md, How jobs run):

* a job whose lease is held is never claimed by another worker, and one whose lease expired is
  (the claim query; if it were inverted, these tests fail at once instead of hanging);
* a heartbeat extends the lease: a job that runs for several leases, with a second worker
  process polling the queue all along, stays with its worker and is attempted once;
* a running live job cancelled over the API stops at its next heartbeat: its status is
  ``cancelled`` and its requests to the model stop.

The last two run a real ``dst-judge serve`` against the fake model server; every wait has a
deadline that fails the test with what it waited for."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import judge
from judge.service import Database
from tests.conftest import EXAMPLES
from tests.fault_server import FaultConfig, FaultServer
from tests.service.conftest import FINAL, Api, running_service, service_settings
from tests.service.queue_surface import claim, job_store, lease, renew
from tests.service.serve_process import ServeProcess, create_token

pytestmark = pytest.mark.servers


@pytest.fixture
def queued_job(tmp_path: Path, fake_model: FaultServer) -> Any:
    """A queued evaluate job in a database no worker looks at."""
    settings = service_settings(tmp_path / "data", fake_model.url, job_slots=0)
    with running_service(settings) as (service, app):
        token = judge.service.create_token(service.db, "lab", "read,submit")[0]
        api = Api(app, token)
        try:
            files = api.upload_examples()
            job = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                             "options": {"model": "m"}}).json()
            assert job["status"] == "queued", job
        finally:
            api.close()
    db = Database(settings.db_url)
    engine = sa.create_engine(settings.db_url)
    try:
        yield job_store(db), engine, job["id"]
    finally:
        engine.dispose()
        db.dispose()


def test_a_held_lease_is_never_claimed_and_an_expired_one_is(queued_job):
    store, engine, job_id = queued_job
    assert claim(store, "worker-a", 30.0) == job_id
    # while A holds the lease, B finds nothing to do (an inverted expiry test would hand B
    # the job here)
    for _ in range(3):
        assert claim(store, "worker-b", 30.0) is None, "a job whose lease is held was claimed"
    held = lease(engine, job_id)
    assert (held["status"], held["lease_owner"], held["attempts"]) == ("running", "worker-a", 1)
    assert held["lease_expires"] > time.time() + 25


def test_a_renewed_lease_outlives_its_length_and_a_lapsed_one_moves(queued_job):
    store, engine, job_id = queued_job
    length = 2.0
    assert claim(store, "worker-a", length) == job_id
    started = time.monotonic()
    while time.monotonic() - started < 3 * length:  # three lease lengths, renewed all along
        asked = time.time()  # the renewal happens at or after this moment, however slow
        assert renew(store, "worker-a", length, job_id), "the worker lost its own lease"
        assert lease(engine, job_id)["lease_expires"] >= asked + length - 0.01, \
            "renewal did not move lease_expires to a full lease from now"
        assert claim(store, "worker-b", length) is None, \
            f"taken over {time.monotonic() - started:.1f} s into a renewed lease"
        time.sleep(length / 4)
    assert lease(engine, job_id)["attempts"] == 1
    deadline = time.monotonic() + 10
    while (taker := claim(store, "worker-b", 30.0)) is None:  # A went silent
        assert time.monotonic() < deadline, "a lapsed lease was not taken over within 10 s"
        time.sleep(0.1)
    assert taker == job_id
    moved = lease(engine, job_id)
    assert (moved["lease_owner"], moved["attempts"]) == ("worker-b", 2)
    assert not renew(store, "worker-a", length, job_id), "the old owner renewed a lost lease"
    assert lease(engine, job_id)["lease_owner"] == "worker-b"


# --- a real replica --------------------------------------------------------------------------


def _inputs(client: judge.Client) -> dict[str, str]:
    return {kind: client.upload(EXAMPLES / name, kind).id for kind, name in
            (("schema", "schema.json"), ("dialogues", "dialogues.jsonl"),
             ("predictions", "predictions.jsonl"))}


LEASE = 4.0
STARTUP = 240.0
"""How long a replica may take to start its worker processes and claim a job: each worker
process imports the library and loads tokenizers, which takes a minute on a loaded machine."""


@pytest.mark.timeout(600)
def test_a_job_running_past_its_lease_is_not_taken_over_while_its_worker_lives(tmp_path):
    data = tmp_path / "data"
    token = create_token(data, "lab")
    # 22 calls one at a time, 0.7 s each: about four leases long
    with FaultServer(FaultConfig(latency=0.7)) as model:
        args = ["--jobs", "2", "--worker-processes", "2", "--lease", str(LEASE),
                "--grace", "1"]
        with ServeProcess(data, endpoints={"fake": {"base_url": model.url}},
                          args=args) as server:
            processes = server.health(details=True)["worker"].get("processes") or []
            assert len(processes) == 2 and all(p["alive"] for p in processes), processes
            client = judge.Client(server.url, token)
            job_id = client.submit("evaluate", _inputs(client),
                                   {"model": "m", "concurrency": 1}).id
            engine = sa.create_engine(f"sqlite:///{data / 'dst-judge.db'}")
            samples: list[tuple[float, dict[str, Any]]] = []
            deadline = time.monotonic() + STARTUP + 120
            try:
                while True:
                    held = lease(engine, job_id)
                    samples.append((time.time(), held))
                    assert held["attempts"] <= 1, \
                        f"job taken over while its worker lived: {held} ({server.errors()})"
                    if held["status"] in FINAL:
                        break
                    assert time.monotonic() < deadline, \
                        f"job {job_id} still {held['status']} after {STARTUP + 120} s"
                    time.sleep(0.2)
            finally:
                engine.dispose()
            job = client.job(job_id)
    assert job.status == "succeeded" and job.exit_code == 0, (job, server.errors())
    assert job.attempts == 1
    running = [(at, held) for at, held in samples if held["status"] == "running"]
    assert len({held["lease_owner"] for _, held in running}) == 1, running
    assert running[-1][0] - running[0][0] > 2 * LEASE, "the job was not longer than its lease"
    expiries = [held["lease_expires"] for _, held in running]
    assert expiries[-1] - expiries[0] > LEASE, "lease_expires was not extended"
    lapsed = [(at, held["lease_expires"]) for at, held in running if held["lease_expires"] < at]
    assert not lapsed, f"the running job's lease was seen expired: {lapsed}"


@pytest.mark.timeout(600)
def test_a_running_live_job_cancelled_over_the_api_stops_within_its_heartbeat(tmp_path):
    data = tmp_path / "data"
    token = create_token(data, "lab")
    with FaultServer(FaultConfig(latency=0.4)) as model, \
            ServeProcess(data, endpoints={"fake": {"base_url": model.url}},
                         args=["--jobs", "1", "--grace", "1"]) as server:
        client = judge.Client(server.url, token)
        job_id = client.submit("evaluate", _inputs(client),
                               {"model": "m", "concurrency": 1}).id
        deadline = time.monotonic() + STARTUP
        while (job := client.job(job_id)).progress.done < 2:
            assert job.status in ("queued", "running"), job
            assert time.monotonic() < deadline, \
                f"job {job_id} judged fewer than 2 calls in {STARTUP} s: {job}"
            time.sleep(0.05)
        sent_at_cancel = model.snapshot(bodies=False)["total"]
        asked = time.monotonic()
        assert client.cancel(job_id).status in ("running", "cancelled")
        while (job := client.job(job_id)).status not in FINAL:
            assert time.monotonic() - asked < 10, \
                f"job {job_id} still {job.status} 10 s after its cancel"
            time.sleep(0.05)
        took = time.monotonic() - asked
        sent_when_cancelled = model.snapshot(bodies=False)["total"]
        time.sleep(1.5)  # three of its calls' time: none may leave any more
        sent_later = model.snapshot(bodies=False)["total"]
    assert job.status == "cancelled", (job, server.errors())
    # the heartbeat is every second; on a loaded machine allow a few more
    assert took < 5, f"cancelled {took:.1f} s after the request"
    assert sent_when_cancelled - sent_at_cancel <= 3, (sent_at_cancel, sent_when_cancelled)
    assert sent_later == sent_when_cancelled, "requests went on after the job was cancelled"
    assert sent_later < 22, "the job sent every call: the cancel did not stop it"
