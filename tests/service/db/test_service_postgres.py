"""The service on a real Postgres (pgserver): migrations, a whole job through the API, claims
that never hand one job to two workers (``FOR UPDATE SKIP LOCKED``), an expired lease taken
over, and the shared rate-limit pool holding across engines (as across replicas)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from judge.service import Database, create_token
from judge.service.auth._auth import Principal
from judge.service.db._db import jobs, metadata
from judge.service.jobs._jobs import JobStore
from judge.service.jobs._jobspec import JobSpec
from judge.service.ledger._limits import EndpointPool
from judge.service.queue import JobQueue
from tests.service.conftest import Api, running_service, service_settings


def test_migrations_on_postgres_match_the_tables(postgres_db):
    db = Database(postgres_db)
    try:
        db.migrate()
        db.migrate()
        with db.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), metadata) == []
    finally:
        db.dispose()


def test_a_job_runs_through_the_api_on_postgres(postgres_db, tmp_path, fake_model):

    settings = service_settings(tmp_path / "data", fake_model.url, db=postgres_db)
    with running_service(settings) as (service, app):
        api = Api(app, create_token(service.db, "lab", "read,submit")[0])
        try:
            files = api.upload_examples()
            job = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                             "options": {"model": "m"}}).json()
            done = api.wait(job["id"])
            assert done["status"] == "succeeded" and done["exit_code"] == 0
            rows = api.get(f"/v1/jobs/{job['id']}/judgments").text.splitlines()
            assert len(rows) == 11
            assert api.get(f"/v1/jobs/{job['id']}/results").json()["turns"] == 11
        finally:
            api.close()


def _queue(db: Database, count: int) -> list[str]:
    store = JobStore(db)
    project = Principal("tok_x", "x", "prj_x", "x", ("submit",))
    with db.write() as conn:
        conn.execute(sa.text("INSERT INTO projects (id, name, created_at, settings) "
                             "VALUES ('prj_x', 'x', 0, '{}')"))
    return [store.submit(project, JobSpec("audit", "live", {"run": "job_y"}, {}))["id"]
            for _ in range(count)]


def test_concurrent_claims_never_share_a_job(postgres_db):
    db = Database(postgres_db)
    db.migrate()
    try:
        queued = _queue(db, 40)
        engines = [Database(postgres_db) for _ in range(4)]  # as four replicas
        claimed: list[str] = []
        lock = threading.Lock()

        def claimer(index: int) -> None:
            store = JobQueue(engines[index % 4])
            for _ in range(len(queued) + 1):  # bounded: a claim of a job held would loop
                row = store.claim(f"w{index}", 30.0)
                if row is None:
                    return
                with lock:
                    claimed.append(row.id)
            raise AssertionError(f"claimer w{index} kept claiming after {len(queued)} jobs: "
                                 "a job whose lease is held was claimed again")

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(claimer, range(8)))
        for engine in engines:
            engine.dispose()
        assert sorted(claimed) == sorted(queued)  # each exactly once
        with db.read() as conn:
            owners = conn.execute(sa.select(sa.func.count(sa.distinct(jobs.c.lease_owner))))
            assert owners.scalar() > 1  # the work was spread, not serialised on one claimer
    finally:
        db.dispose()


def test_an_expired_lease_is_taken_over_and_the_old_owner_cannot_write(postgres_db):
    db = Database(postgres_db)
    db.migrate()
    try:
        (job_id,) = _queue(db, 1)
        store = JobQueue(db)
        first = store.claim("dead", 0.2)
        assert first.id == job_id and store.claim("alive", 30.0) is None
        time.sleep(0.3)
        second = store.claim("alive", 30.0)
        assert second.id == job_id and second.attempts == 2
        assert store.renew(job_id, "dead", 30.0) == (False, False)
        assert not store.finish(job_id, "dead", status="succeeded", exit_code=0)
        assert store.finish(job_id, "alive", status="succeeded", exit_code=0)
    finally:
        db.dispose()


def test_the_shared_pool_holds_across_engines(postgres_db):
    setup = Database(postgres_db)
    setup.migrate()
    setup.dispose()
    replicas = [Database(postgres_db) for _ in range(2)]
    pools = [EndpointPool(db, "fake", rpm=10, tpm=None, window=1.0, margin=0.0)
             for db in replicas]
    granted: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + 2.5

    def hammer(index: int) -> None:
        pool = pools[index % 2]
        while time.monotonic() < stop:
            wait, ticket = pool.try_acquire(f"job{index % 3}", 1)
            if ticket is not None:
                with lock:
                    granted.append(time.time())
                time.sleep(0.01)  # the request travels
                pool.finished(ticket)
            else:
                time.sleep(min(wait, 0.05))

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(hammer, range(6)))
    for db in replicas:
        db.dispose()
    granted.sort()
    worst = max(sum(1 for t in granted if start <= t < start + 1.0) for start in granted)
    assert worst <= 10  # never more than rpm in any window
    assert len(granted) >= 20  # and the pool was used, not starved


def test_copy_db_moves_a_sqlite_server_to_postgres(postgres_db, tmp_path, fake_model):
    from judge.cli import main

    settings = service_settings(tmp_path / "data", fake_model.url)
    with running_service(settings) as (service, app):
        token = create_token(service.db, "lab", "read,submit,review")[0]
        api = Api(app, token)
        try:
            files = api.upload_examples()
            job = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                             "options": {"model": "m"}}).json()
            api.wait(job["id"])
            first = api.put("/v1/labels", json={"dialogue_id": "EX001.json", "turn_index": 0,
                                                "label": "correct", "job_id": job["id"]})
            assert first.status_code == 200, first.text
        finally:
            api.close()
    sqlite_url = settings.db_url
    assert main(["serve", "copy-db", "--from", sqlite_url, "--to", postgres_db]) == 0
    moved = service_settings(tmp_path / "data2", fake_model.url, db=postgres_db)
    with running_service(moved) as (service, app):
        api = Api(app, token)  # the same token works: its hash moved with it
        try:
            assert api.get(f"/v1/jobs/{job['id']}").json()["status"] == "succeeded"
            assert len(api.get(f"/v1/jobs/{job['id']}/judgments").text.splitlines()) == 11
            label = api.put("/v1/labels", json={"dialogue_id": "EX002.json", "turn_index": 0,
                                                "label": "incorrect", "job_id": job["id"]})
            assert label.status_code == 200  # the id sequence continues after the copy
            assert label.json()["subject"] == first.json()["subject"]  # the subject moved
            again = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                               "options": {"model": "m"}}).json()
            assert api.wait(again["id"])["status"] == "succeeded"  # files came along
        finally:
            api.close()
    assert main(["serve", "copy-db", "--from", sqlite_url, "--to", postgres_db]) == 2
