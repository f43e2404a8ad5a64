"""The queue's pieces on SQLite, in process: the attempt cap of poison jobs, the table of job
kinds, readiness and its reasons, and the ``worker`` / ``serve --no-worker`` options."""

from __future__ import annotations

import time
from types import SimpleNamespace

import sqlalchemy as sa

from judge.cli._main import build_parser
from judge.service import Database
from judge.service.auth._auth import Principal
from judge.service.jobs._jobs import JobStore
from judge.service.jobs._jobspec import JobSpec
from judge.service.queue import JobQueue, build_runners, readiness, runner_for
from judge.service.queue._analysis import (
    AgreementRunner,
    AuditRunner,
    CompareRunner,
    MetricsRunner,
)
from judge.service.queue._batchjob import BatchRunner
from judge.service.queue._evaluate import EvaluateRunner
from judge.service.queue._runners import Toolkit
from tests.conftest import EXAMPLES
from tests.service.conftest import queue_database, service_settings


def _database(tmp_path) -> Database:
    return queue_database(tmp_path / "queue.db")


def _submit(db: Database) -> str:
    principal = Principal("tok_x", "x", "prj_x", "x", ("submit",))
    return JobStore(db).submit(principal, JobSpec("audit", "live", {"run": "job_y"}, {}))["id"]


def test_a_job_whose_worker_dies_max_attempts_times_is_given_up_and_the_next_runs(tmp_path):
    db = _database(tmp_path)
    try:
        poison, other = _submit(db), _submit(db)
        queue = JobQueue(db, max_attempts=2)
        for attempt in (1, 2):
            row = queue.claim(f"dies-{attempt}", 0.05)
            assert (row.id, row.attempts) == (poison, attempt)
            time.sleep(0.1)  # its worker died: the lease lapses
        row = queue.claim("next", 30.0)
        assert row.id == other and row.attempts == 1  # not held up by the poison job
        job = JobStore(db).get("prj_x", poison)
        assert job["status"] == "failed" and job["attempts"] == 2
        assert job["error"].startswith("its worker died while running it, 2 times")
        assert queue.counts == {"claims": 3, "lease_expiries": 1, "retries": 1, "given_up": 1}
        assert queue.claim("late", 30.0) is None  # given up for good
        resumed = JobStore(db).resume("prj_x", poison, None)  # a resume: one more attempt
        assert resumed["status"] == "queued"
        assert queue.claim("again", 30.0).id == poison
    finally:
        db.dispose()


def test_every_job_kind_has_a_runner_with_the_one_interface(tmp_path):
    settings = service_settings(tmp_path / "data", "http://127.0.0.1:9")
    runners, evaluate = build_runners(Toolkit(None, settings, None, None, None, "w"))
    kinds = {"evaluate": EvaluateRunner, "retry-errors": EvaluateRunner,
             "metrics": MetricsRunner, "agreement": AgreementRunner,
             "compare": CompareRunner, "audit": AuditRunner}
    for kind, expected in kinds.items():
        assert isinstance(runner_for(runners, SimpleNamespace(kind=kind, mode="live")),
                          expected)
    batch = runner_for(runners, SimpleNamespace(kind="evaluate", mode="batch"))
    assert isinstance(batch, BatchRunner) and batch.evaluator is evaluate
    assert runner_for(runners, SimpleNamespace(kind="future-kind", mode="live")) is None


def test_readiness_names_what_is_wrong(tmp_path):
    db = _database(tmp_path)
    alive = SimpleNamespace(status=lambda: {"alive": True, "pid": 11}, tallies=dict)
    gone = SimpleNamespace(status=lambda: {"alive": False, "pid": 12}, tallies=dict)
    try:
        assert readiness(SimpleNamespace(db=db, worker=alive, closing=False)) == (True, "ready")
        ok, reason = readiness(SimpleNamespace(db=db, worker=gone, closing=False))
        assert not ok and "worker is gone" in reason and "12" in reason
        ok, reason = readiness(SimpleNamespace(db=db, worker=None, closing=True))
        assert not ok and reason.startswith("draining")
        with db.write() as conn:
            conn.execute(sa.text("UPDATE alembic_version SET version_num = '0001'"))
        ok, reason = readiness(SimpleNamespace(db=db, worker=None, closing=False))
        assert not ok and "schema at revision 0001" in reason
    finally:
        db.dispose()
    missing = Database("postgresql://nobody@127.0.0.1:9/none?connect_timeout=2")
    try:
        ok, reason = readiness(SimpleNamespace(db=missing, worker=None, closing=False))
        assert not ok and reason.startswith("database unreachable (OperationalError")
    finally:
        missing.dispose()


def test_worker_and_no_worker_options():
    parser = build_parser()
    serve = parser.parse_args(["serve", "--no-worker", "--max-attempts", "5"])
    assert serve.job_slots == 0 and serve.max_attempts == 5
    worker = parser.parse_args(["worker", "--db", "postgresql://x/y", "--jobs", "8"])
    assert worker.job_slots == 8 and worker.worker_mode == "process"
    assert worker.handler.__name__ == "_run_worker"


def test_a_job_queued_on_postgres_wakes_a_listening_worker_at_once(postgres_db):
    """LISTEN/NOTIFY: submit (and a resume) notify in their transaction; the listener's wake
    comes within a fraction of a second, with no poll."""
    import threading

    from judge.service.queue._listen import Listener

    db = Database(postgres_db)
    db.migrate()
    woken = threading.Event()
    listener = Listener(postgres_db, woken.set)
    try:
        with db.write() as conn:
            conn.execute(sa.text("INSERT INTO projects (id, name, created_at, settings) "
                                 "VALUES ('prj_x', 'x', 0, '{}')"))
        listener.start()
        assert woken.wait(10)  # the first wake: whatever was queued before it listened
        time.sleep(0.2)
        woken.clear()
        started = time.monotonic()
        _submit(db)
        assert woken.wait(5), "no notification"
        print(f"woken {1000 * (time.monotonic() - started):.1f} ms after the submit")
        assert listener.notified >= 1
    finally:
        listener.stop()
        db.dispose()


def test_sqlite_locked_too_long_is_a_503_not_a_traceback(tmp_path, fake_model, monkeypatch):
    """Another process holds SQLite's write lock past the busy timeout: the client gets 503
    with a plain message (no "database is locked", no 500), and the next request works."""
    import sqlite3

    from judge.service import create_token
    from tests.service.conftest import Api, running_service

    monkeypatch.setattr(Database, "busy_seconds", 0.3)
    settings = service_settings(tmp_path / "data", fake_model.url, job_slots=0)
    with running_service(settings) as (service, app):
        token = create_token(service.db, "lab", "read,submit")[0]
        api = Api(app, token)
        holder = sqlite3.connect(tmp_path / "data" / "dst-judge.db", isolation_level=None)
        try:
            api.get("/v1/files")  # the token is known (its last use is written now)
            holder.execute("BEGIN IMMEDIATE")
            refused = api.upload(EXAMPLES / "schema.json", "schema")
            holder.execute("ROLLBACK")
            accepted = api.upload(EXAMPLES / "schema.json", "schema")
        finally:
            holder.close()
            api.close()
    assert refused.status_code == 503, refused.text
    assert "locked" not in refused.text and "unavailable" in refused.json()["error"]["message"]
    assert accepted.status_code == 201


def test_a_worker_that_ran_jobs_stops_at_once_and_unregisters(service_env):
    """Stopping the service ends its worker thread within seconds, with its row removed. On
    Python 3.11 a cancelled run-log writer could swallow the cancellation as a flush woke it,
    and each stop then waited 35 s for a thread that never ended and never unregistered."""
    from judge.service.db._db import workers

    api, files = service_env["api"], service_env["files"]
    for _ in range(2):  # two jobs: the second's run log is flushed just before the stop
        job = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": {
            "schema": files["schema"], "dialogues": files["dialogues"],
            "predictions": files["predictions"]}, "options": {"model": "m"}}).json()
        assert api.wait(job["id"])["status"] == "succeeded"
    service = service_env["service"]
    with service.db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(workers)).scalar() == 1
    started = time.monotonic()
    service.stop()
    took = time.monotonic() - started
    assert took < 10, f"the worker took {took:.1f} s to stop"
    assert not service.worker.status()["alive"]
    with service.db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(workers)).scalar() == 0


def test_the_run_log_writer_ends_by_itself_once_closed_with_everything_written():
    """``CallJournal.close`` lets the writer write what is queued and return, with no
    cancellation (the path that could be swallowed)."""
    import asyncio

    from judge.service.queue._journal import CallJournal

    written: list[tuple[list, list]] = []

    class Queue:
        def record_batch(self, manifests, calls):
            written.append((manifests, calls))

    async def scenario() -> None:
        journal = CallJournal(Queue(), linger=0.05)  # type: ignore[arg-type]
        writer = asyncio.create_task(journal.run())
        journal.call("job_a", {"n": 1})
        await journal.flush()
        journal.call("job_a", {"n": 2})
        journal.manifest("job_b", {"m": 1})
        journal.close()
        done, _ = await asyncio.wait([writer], timeout=5)
        assert writer in done, "the writer did not end after close()"
        assert writer.exception() is None

    asyncio.run(scenario())
    calls = [record for _, batch in written for _, record in batch]
    assert calls == [{"n": 1}, {"n": 2}]
    assert [m for manifests, _ in written for _, m in manifests] == [{"m": 1}]
