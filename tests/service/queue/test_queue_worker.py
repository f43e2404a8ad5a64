"""The worker and the queue's table in process, piece by piece: what a worker writes when a job
ends, is cancelled, is handed back or is parked; what its heartbeat does to leases and cancel
requests; retention; the workers table; and the API store's view of the rows the queue wrote.

Every test builds its own SQLite database and drives the worker's coroutines directly (no
thread, no model server); every wait is bounded."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa

from judge.service import Database
from judge.service.auth._auth import Principal
from judge.service.db._db import artifacts, job_calls, jobs, judgments, workers
from judge.service.db._migrate import head_revision
from judge.service.jobs._jobs import JobStore
from judge.service.jobs._jobspec import JobSpec
from judge.service.queue import _lease
from judge.service.queue._health import queue_metrics, readiness
from judge.service.queue._journal import CallJournal
from judge.service.queue._lease import JobQueue
from judge.service.queue._runners import Live, Outcome, Park
from judge.service.queue._worker import COUNTERS, Running, Worker
from judge.service.storage._files import FileStore
from tests.service.conftest import count_rows, insert_job, queue_database, service_settings

PROJECT = "prj_x"
PRINCIPAL = Principal("tok_x", "x", PROJECT, "x", ("submit",))


@pytest.fixture
def qdb(tmp_path: Path) -> Any:
    db = queue_database(tmp_path / "queue.db")
    yield db
    db.dispose()


def _worker(db: Database, tmp_path: Path, **values: Any) -> Worker:
    settings = service_settings(tmp_path / "data", "http://127.0.0.1:9", **values)
    store = FileStore(db, settings.data_dir, max_upload=settings.max_upload_bytes,
                      max_unpacked=settings.max_unpacked_bytes)
    return Worker(db, settings, store, JobStore(db), worker_id="w-test")


def _submit(db: Database, kind: str = "audit", mode: str = "live") -> str:
    return JobStore(db).submit(PRINCIPAL, JobSpec(kind, mode, {"run": "job_y"}, {}))["id"]


def _job(db: Database, job_id: str) -> Any:
    with db.read() as conn:
        return conn.execute(sa.select(jobs).where(jobs.c.id == job_id)).one()


def _set(db: Database, job_id: str, **values: Any) -> None:
    with db.write() as conn:
        conn.execute(jobs.update().where(jobs.c.id == job_id).values(**values))


# --- the API store's side ------------------------------------------------------------------


def test_a_submitted_job_starts_with_nothing_spent(qdb):
    """A new job: queued, attempt 0, no cost, no tokens, nothing done."""
    job = JobStore(qdb).get(PROJECT, _submit(qdb))
    assert job["status"] == "queued" and job["attempts"] == 0
    assert job["progress"]["tokens"] == 0 and job["progress"]["cost_usd"] == 0.0
    assert job["progress"]["done"] == 0 and not job["cancel_requested"]
    row = _job(qdb, job["id"])
    assert (row.tokens_used, row.cost_usd, row.imported) == (0, 0.0, False)


def test_judgments_filter_on_error_verdict_and_dialogue(qdb):
    """The judgments of a run, filtered by has-error, verdict and dialogue, in run order."""
    job_id = _submit(qdb)
    queue = JobQueue(qdb)
    assert queue.claim("w1", 30.0).id == job_id
    rows = [{"dialogue_id": "d1", "turn_index": 0, "verdict": True},
            {"dialogue_id": "d1", "turn_index": 1, "verdict": None, "error": "timeout"},
            {"dialogue_id": "d2", "turn_index": 0, "verdict": False},
            {"dialogue_id": "d2", "turn_index": 1, "verdict": None, "error": "bad json"}]
    assert queue.finish(job_id, "w1", status="succeeded", exit_code=1, rows=rows)
    store = JobStore(qdb)

    def turns(**kw: Any) -> list[tuple[str, int]]:
        return [(r["dialogue_id"], r["turn_index"]) for r in store.judgments(PROJECT, job_id,
                                                                              **kw)]

    assert turns() == [("d1", 0), ("d1", 1), ("d2", 0), ("d2", 1)]
    assert turns(error=True) == [("d1", 1), ("d2", 1)]
    assert turns(error=False) == [("d1", 0), ("d2", 0)]
    assert turns(verdict=True) == [("d1", 0)]
    assert turns(verdict=False) == [("d2", 0)]
    assert turns(dialogue_id="d2", error=True) == [("d2", 1)]
    lines = b"".join(store.judgment_lines(PROJECT, job_id, error=True)).decode().splitlines()
    assert len(lines) == 2 and all('"error"' in line for line in lines)


# --- the queue's table ---------------------------------------------------------------------


def test_purge_deletes_old_finished_jobs_in_batches_of_200(qdb, monkeypatch):
    """Retention deletes every finished job older than the cutoff, 200 ids per delete, and
    leaves newer and unfinished jobs alone."""
    for index in range(450):
        insert_job(qdb, f"job_old{index:03d}", PROJECT, "tok_x", "succeeded", finished_at=10.0)
    insert_job(qdb, "job_new", PROJECT, "tok_x", "failed", finished_at=1000.0)
    insert_job(qdb, "job_live", PROJECT, "tok_x", "running")
    batches: list[int] = []
    real = _lease.delete_jobs
    monkeypatch.setattr(_lease, "delete_jobs",
                        lambda db, ids: (batches.append(len(ids)), real(db, ids)))
    removed = JobQueue(qdb).purge(500.0)
    assert sorted(removed) == [f"job_old{index:03d}" for index in range(450)]
    assert batches == [200, 200, 50]
    with qdb.read() as conn:
        left = {r.id for r in conn.execute(sa.select(jobs.c.id))}
    assert left == {"job_new", "job_live"}


def test_finish_writes_the_outcome_rows_files_and_run_log_only_for_the_lease_owner(qdb):
    """finish: status, exit code, error, summary, figures, judgments, artifacts, run log; a
    worker that lost the lease writes only the run log and gets False."""
    job_id = _submit(qdb)
    queue = JobQueue(qdb)
    queue.claim("w1", 30.0)
    records = ([(job_id, {"kind": "evaluate"})], [(job_id, {"custom_id": "c1", "n": 1}),
                                                  (job_id, {"custom_id": "c1", "n": 2})])
    assert not queue.finish(job_id, "intruder", status="failed", exit_code=4,
                            records=records)
    assert _job(qdb, job_id).status == "running"
    assert JobStore(qdb).calls(job_id) == [{"custom_id": "c1", "n": 2}]
    assert queue.finish(job_id, "w1", status="succeeded", exit_code=0, error=None,
                        summary={"tsa": 0.5}, rows=[{"dialogue_id": "d", "turn_index": 2}],
                        files_out={"report.md": ("text/markdown", b"# r")},
                        progress={"done": 3}, cost=0.25, tokens_used=42)
    row = _job(qdb, job_id)
    assert (row.status, row.exit_code, row.error, row.lease_owner, row.lease_expires) == \
        ("succeeded", 0, None, None, None)
    assert row.summary == {"tsa": 0.5} and row.progress == {"done": 3}
    assert (row.cost_usd, row.tokens_used) == (0.25, 42) and row.finished_at is not None
    assert row.manifest == {"kind": "evaluate"}
    assert JobStore(qdb).artifact(PROJECT, job_id, "report.md") == ("text/markdown", b"# r")
    with qdb.read() as conn:
        stored = conn.execute(sa.select(judgments)).one()
    assert (stored.seq, stored.dialogue_id, stored.turn_index, stored.has_error) == \
        (0, "d", 2, False)
    # finished again (a takeover's own end) replaces rows and artifacts, not adds to them;
    # only a running job is finished (the lifecycle: a succeeded job stays succeeded)
    _set(qdb, job_id, lease_owner="w1")
    assert not queue.finish(job_id, "w1", status="failed", exit_code=4)
    _set(qdb, job_id, lease_owner="w1", status="running")
    assert queue.finish(job_id, "w1", status="succeeded", exit_code=0, rows=[],
                        files_out={"report.md": ("text/plain", b"2"),
                                   "extra.txt": ("text/plain", b"3")})
    assert count_rows(qdb, judgments) == 0 and count_rows(qdb, artifacts) == 2
    assert JobStore(qdb).artifact(PROJECT, job_id, "report.md") == ("text/plain", b"2")
    assert _job(qdb, job_id).summary == {"tsa": 0.5}  # no summary given: the old one stays


def test_a_jobs_artifacts_are_replaced_without_touching_another_jobs(qdb):
    """Two runs each make ``report.md``: finishing one replaces its own and leaves the
    other's (the delete is by job and name, not by name)."""
    queue = JobQueue(qdb)
    first, second = _submit(qdb), _submit(qdb)
    for job_id, text in ((first, b"first"), (second, b"second")):
        assert queue.claim("w1", 30.0).id == job_id
        assert queue.finish(job_id, "w1", status="succeeded", exit_code=0, rows=[],
                            files_out={"report.md": ("text/markdown", text)})
    assert JobStore(qdb).artifact(PROJECT, first, "report.md") == ("text/markdown", b"first")
    assert JobStore(qdb).artifact(PROJECT, second, "report.md") == ("text/markdown", b"second")


def test_release_park_keep_and_renew_need_the_lease(qdb):
    """release hands a running job back (queued), park sets it waiting until wake_at, keep
    renews a paused job's lease; none touch a job another worker owns."""
    queue = JobQueue(qdb)
    job_id = _submit(qdb)
    queue.claim("w1", 30.0)
    queue.release(job_id, "w2", {"done": 9})
    assert _job(qdb, job_id).status == "running"
    queue.release(job_id, "w1", {"done": 2})
    row = _job(qdb, job_id)
    assert (row.status, row.lease_owner, row.lease_expires, row.progress) == \
        ("queued", None, None, {"done": 2})
    assert queue.claim("w1", 30.0).attempts == 2
    assert not queue.park(job_id, "w2", 123.0)
    assert queue.park(job_id, "w1", 123.0, progress={"done": 4}, cost=0.5, tokens_used=7)
    row = _job(qdb, job_id)
    assert (row.status, row.wake_at, row.lease_owner, row.progress, row.cost_usd,
            row.tokens_used) == ("waiting", 123.0, None, {"done": 4}, 0.5, 7)
    assert queue.keep(job_id, "w1", 30.0) is None  # waiting, not running
    again = queue.claim("w3", 30.0)
    assert again.attempts == 2 and again.status == "running"  # a poll is not an attempt
    assert queue.keep(job_id, "w1", 30.0) is None
    before = time.time()
    kept = queue.keep(job_id, "w3", 60.0)
    assert kept.id == job_id and kept.lease_expires >= before + 59
    ours, cancel = queue.renew(job_id, "w3", 30.0, progress={"done": 5}, cost=1.0,
                               tokens_used=3)
    assert (ours, cancel) == (True, False)
    assert (_job(qdb, job_id).progress, _job(qdb, job_id).tokens_used) == ({"done": 5}, 3)
    JobStore(qdb).cancel(PROJECT, job_id)
    assert queue.renew(job_id, "w1", 30.0) == (False, True)


def test_record_calls_and_manifest_keep_the_last_record_of_a_call(qdb):
    job_id = _submit(qdb)
    queue = JobQueue(qdb)
    queue.record_calls(job_id, [])
    assert count_rows(qdb, job_calls) == 0
    queue.record_calls(job_id, [{"custom_id": "b", "v": 1}, {"custom_id": "a", "v": 1}])
    queue.record_calls(job_id, [{"custom_id": "b", "v": 2}])
    assert JobStore(qdb).calls(job_id) == [{"custom_id": "a", "v": 1},
                                           {"custom_id": "b", "v": 2}]
    queue.store_manifest(job_id, {"kind": "evaluate", "n": 1})
    assert _job(qdb, job_id).manifest == {"kind": "evaluate", "n": 1}
    queue.record_batch([(job_id, {"kind": "evaluate", "n": 2})],
                       [(job_id, {"custom_id": "a", "v": 3})])
    assert _job(qdb, job_id).manifest == {"kind": "evaluate", "n": 2}
    assert JobStore(qdb).calls(job_id)[0] == {"custom_id": "a", "v": 3}


def test_renew_many_extends_ours_and_reports_cancels(qdb):
    queue = JobQueue(qdb)
    mine, cancelled, theirs = _submit(qdb), _submit(qdb), _submit(qdb)
    queue.claim("w1", 5.0), queue.claim("w1", 5.0), queue.claim("w2", 5.0)
    JobStore(qdb).cancel(PROJECT, cancelled)
    before = time.time()
    ours, cancels = queue.renew_many("w1", 60.0, {
        mine: ({"done": 1}, 0.1, 10), cancelled: ({"done": 2}, 0.2, 20),
        theirs: ({"done": 3}, 0.3, 30)})
    assert ours == {mine, cancelled} and cancels == {cancelled}
    row = _job(qdb, mine)
    assert row.lease_expires >= before + 59 and row.progress == {"done": 1}
    assert (row.cost_usd, row.tokens_used) == (0.1, 10)
    assert _job(qdb, theirs).tokens_used == 0
    assert queue.renew_many("w1", 60.0, {}) == (set(), set())


# --- the worker, piece by piece ------------------------------------------------------------


def test_a_job_of_a_kind_this_server_cannot_run_fails_with_exit_2(qdb, tmp_path):
    """No runner for the kind: the job fails with exit status 2 and says which kind and mode;
    the worker counts it finished and forgets it."""
    worker = _worker(qdb, tmp_path)
    assert worker.finished == 0 and worker.running == {} and worker.paused == {}
    insert_job(qdb, "job_future", PROJECT, "tok_x", "queued", kind="future-kind",
               mode="live", attempts=0)
    row = worker.queue.claim(worker.id, 30.0)

    async def main() -> None:
        worker.journal = CallJournal(worker.queue)
        running = Running(row)
        worker.running[row.id] = running
        await asyncio.wait_for(worker._execute(running), 10)

    asyncio.run(main())
    job = JobStore(qdb).get(PROJECT, "job_future")
    assert (job["status"], job["exit_code"]) == ("failed", 2)
    assert job["error"] == "this server cannot run 'future-kind' jobs in mode 'live'"
    assert job["progress"]["worker"] == "w-test"
    assert worker.finished == 1 and worker.running == {}


def test_a_runner_that_raises_fails_its_job_with_an_internal_error(qdb, tmp_path):
    worker = _worker(qdb, tmp_path)
    job_id = _submit(qdb)
    row = worker.queue.claim(worker.id, 30.0)

    class Broken:
        def progress(self) -> Live:
            return Live(total=5, done=1)

        async def run(self, job: Any, context: Any) -> Outcome:
            assert context.worker_id == "w-test" and not context.cancel_requested()
            raise RuntimeError("boom")

    worker.runners = {("audit", "live"): Broken(), "audit": Broken()}
    import judge.service.queue._worker as module

    async def main() -> None:
        worker.journal = CallJournal(worker.queue)
        original = module.runner_for
        module.runner_for = lambda runners, job: Broken()
        try:
            await asyncio.wait_for(worker._execute(Running(row)), 10)
        finally:
            module.runner_for = original

    asyncio.run(main())
    job = JobStore(qdb).get(PROJECT, job_id)
    assert (job["status"], job["exit_code"]) == ("failed", None)
    assert job["error"] == "internal error in the server (see its log)"
    assert (job["progress"]["total"], job["progress"]["done"]) == (5, 1)


def _run_with(worker: Worker, row: Any, runner: Any) -> None:
    """Run one claimed job through the worker's _execute with ``runner`` as its kind's."""
    import judge.service.queue._worker as module

    async def main() -> None:
        worker.journal = CallJournal(worker.queue)
        original = module.runner_for
        module.runner_for = lambda runners, job: runner
        try:
            running = Running(row)
            worker.running[row.id] = running
            await asyncio.wait_for(worker._execute(running), 10)
        finally:
            module.runner_for = original

    asyncio.run(main())


def test_a_runner_gets_its_workers_context_and_its_outcome_is_stored(qdb, tmp_path):
    """The runner is called with the job and a context naming this worker, its live counters,
    a limiter per endpoint and the job's cancel flag; its outcome becomes the job's."""
    worker = _worker(qdb, tmp_path)
    job_id = _submit(qdb)
    row = worker.queue.claim(worker.id, 30.0)
    seen: dict[str, Any] = {}

    class Good:
        def progress(self) -> Live:
            return Live(total=2)

        async def run(self, job: Any, context: Any) -> Outcome:
            seen.update(job=job.id, worker=context.worker_id, cancel=context.cancel_requested(),
                        journal=context.journal is worker.journal)
            context.live.done = 2
            context.limiter_for("fake")
            seen["limiters"] = len(worker.running[job.id].limiters)
            return Outcome("succeeded", 0, summary={"turns": 2})

    _run_with(worker, row, Good())
    assert seen == {"job": job_id, "worker": "w-test", "cancel": False, "journal": True,
                    "limiters": 1}
    job = JobStore(qdb).get(PROJECT, job_id)
    assert (job["status"], job["exit_code"], job["progress"]["done"]) == ("succeeded", 0, 2)
    assert worker.finished == 1 and worker.running == {}


def test_a_job_that_loses_the_database_is_paused_not_failed(qdb, tmp_path):
    """A runner stopped by a database outage: the job is kept aside to take up again (same
    lease), nothing is written and it is not counted finished."""
    from judge._errors import DatabaseUnavailable

    worker = _worker(qdb, tmp_path)
    job_id = _submit(qdb)
    row = worker.queue.claim(worker.id, 30.0)

    class Outage:
        def progress(self) -> Live:
            return Live()

        async def run(self, job: Any, context: Any) -> Outcome:
            raise DatabaseUnavailable(OSError("connection refused"))

    _run_with(worker, row, Outage())
    assert list(worker.paused) == [job_id] and worker.paused[job_id].id == job_id
    assert worker.running == {} and worker.finished == 0
    assert _job(qdb, job_id).status == "running"
    assert worker._outage_since is not None
    worker.database_back()
    assert worker._outage_since is None


def test_an_outcome_lost_to_a_database_outage_is_paused_to_run_again(qdb, tmp_path):
    """The outcome cannot be written (no database): the job is paused, not counted finished."""
    from judge._errors import DatabaseUnavailable

    worker = _worker(qdb, tmp_path)
    job_id = _submit(qdb)
    row = worker.queue.claim(worker.id, 30.0)

    def no_database(*args: Any) -> bool:
        raise DatabaseUnavailable(OSError("connection reset"))

    worker._finish = no_database  # type: ignore[method-assign]

    class Good:
        def progress(self) -> Live:
            return Live()

        async def run(self, job: Any, context: Any) -> Outcome:
            return Outcome("succeeded", 0)

    _run_with(worker, row, Good())
    assert list(worker.paused) == [job_id] and worker.finished == 0 and worker.running == {}
    assert _job(qdb, job_id).status == "running"


def test_finish_turns_a_failed_wrap_up_into_an_internal_error(qdb, tmp_path):
    worker = _worker(qdb, tmp_path)
    job_id = _submit(qdb)
    worker.queue.claim(worker.id, 30.0)

    def wrap_up() -> None:
        raise OSError("disk full")

    done = worker._finish(job_id, Outcome("succeeded", 0, summary={"tsa": 1.0},
                                          wrap_up=wrap_up),
                          {"done": 3, "worker": worker.id}, 0.5, 11, ([], []))
    assert done
    row = _job(qdb, job_id)
    assert (row.status, row.exit_code, row.error) == \
        ("failed", None, "internal error in the server (see its log)")
    assert (row.cost_usd, row.tokens_used, row.progress) == \
        (0.5, 11, {"done": 3, "worker": "w-test"})
    wrapped: list[str] = []
    other = _submit(qdb)
    worker.queue.claim(worker.id, 30.0)
    assert worker._finish(other, Outcome("succeeded", 0, wrap_up=lambda: wrapped.append("y")),
                          {}, 0.0, 0, ([], []))
    assert wrapped == ["y"] and _job(qdb, other).status == "succeeded"


def test_conclude_parks_a_batch_job_and_merges_run_log_records(qdb, tmp_path):
    """A Park outcome puts the job aside (waiting until wake_at, progress kept); an Outcome's
    own records go with the journal's into the transaction of the outcome."""
    worker = _worker(qdb, tmp_path)
    parked, done = _submit(qdb), _submit(qdb)
    worker.queue.claim(worker.id, 30.0), worker.queue.claim(worker.id, 30.0)

    async def main() -> None:
        worker.journal = CallJournal(worker.queue)
        await worker._conclude(parked, Live(total=4, done=2, cost=0.5, tokens=9), Park(777.0))
        worker.journal.call(done, {"custom_id": "j", "v": 1})
        await worker._conclude(done, Live(done=1), Outcome(
            "succeeded", 0, records=([(done, {"kind": "evaluate"})],
                                     [(done, {"custom_id": "o", "v": 2})])))

    asyncio.run(main())
    row = _job(qdb, parked)
    assert (row.status, row.wake_at, row.cost_usd, row.tokens_used) == \
        ("waiting", 777.0, 0.5, 9)
    assert row.progress["done"] == 2 and row.progress["worker"] == "w-test"
    assert worker.finished == 1
    assert _job(qdb, done).status == "succeeded"
    assert _job(qdb, done).manifest == {"kind": "evaluate"}
    assert JobStore(qdb).calls(done) == [{"custom_id": "j", "v": 1},
                                         {"custom_id": "o", "v": 2}]


@pytest.mark.parametrize(("reason", "mode", "status"), [
    ("cancel", "live", "cancelled"), ("drain", "live", "queued"),
    ("drain", "batch", "waiting"), ("lost", "live", "running")])
def test_a_cancelled_task_ends_as_its_reason_says(qdb, tmp_path, reason, mode, status):
    """cancel: the job ends cancelled on request; drain: a live job goes back to the queue, a
    batch job waits (its batches stay its own); lost: nothing is written."""
    worker = _worker(qdb, tmp_path)
    job_id = _submit(qdb, mode=mode)
    row = worker.queue.claim(worker.id, 30.0)
    live = Live(total=10, done=4, cost=0.75, tokens=12)

    async def main() -> None:
        worker.journal = CallJournal(worker.queue)
        await worker._cancelled(Running(row, live=live, reason=reason))

    asyncio.run(main())
    job = _job(qdb, job_id)
    assert job.status == status
    assert job.progress["done"] == (4 if reason != "lost" else 0)
    if reason == "cancel":
        assert (job.error, job.exit_code, job.cost_usd, job.tokens_used) == \
            ("cancelled on request", None, 0.75, 12)
        assert job.lease_owner is None and job.finished_at is not None
    elif reason == "drain":
        assert job.lease_owner is None and job.finished_at is None
        if mode == "batch":
            assert job.wake_at is not None and job.wake_at <= time.time() + 1
            assert (job.cost_usd, job.tokens_used) == (0.75, 12)
    else:
        assert job.lease_owner == "w-test"


def test_launch_never_starts_a_job_already_running_here(qdb, tmp_path):
    """A claim of a job this worker still runs (its lease lapsed) keeps the one task; a job
    whose task ended is launched anew."""
    worker = _worker(qdb, tmp_path)
    _submit(qdb)
    row = worker.queue.claim(worker.id, 30.0)
    started: list[str] = []

    async def fake_execute(running: Running) -> None:
        started.append(running.job.id)

    worker._execute = fake_execute  # type: ignore[method-assign]

    async def main() -> None:
        blocker = asyncio.create_task(asyncio.sleep(30))
        mine = Running(row, task=blocker)
        worker.running[row.id] = mine
        worker._launch(row)
        assert worker.running[row.id] is mine
        await asyncio.sleep(0)
        assert started == []
        blocker.cancel()
        with pytest.raises(asyncio.CancelledError):
            await blocker
        worker._launch(row)
        fresh = worker.running[row.id]
        assert fresh is not mine and fresh.job is row
        await asyncio.wait_for(fresh.task, 5)
        assert started == [row.id]

    asyncio.run(main())


def test_drain_waits_for_calls_in_flight_then_cancels_with_reason_drain(qdb, tmp_path):
    """A drain waits (within the grace period) while calls are in flight, then cancels every
    task with reason "drain"; a reason already set is kept."""
    worker = _worker(qdb, tmp_path, grace_seconds=3.0)
    _submit(qdb), _submit(qdb), _submit(qdb)
    first = worker.queue.claim(worker.id, 30.0)
    second = worker.queue.claim(worker.id, 30.0)
    third = worker.queue.claim(worker.id, 30.0)
    limiter = SimpleNamespace(in_flight=1)

    async def main() -> float:
        loop = asyncio.get_running_loop()
        a = Running(first, task=asyncio.create_task(asyncio.sleep(30)), limiters=[limiter])
        b = Running(second, task=asyncio.create_task(asyncio.sleep(30)), reason="cancel")
        ended = asyncio.create_task(asyncio.sleep(0))
        await ended
        c = Running(third, task=ended)
        worker.running = {first.id: a, second.id: b, third.id: c}
        assert worker.in_flight() == 1
        loop.call_later(0.4, setattr, limiter, "in_flight", 0)
        started = time.monotonic()
        await asyncio.wait_for(worker._drain(), 10)
        took = time.monotonic() - started
        assert a.task.cancelled() and b.task.cancelled()
        assert (a.reason, b.reason, c.reason) == ("drain", "cancel", None)
        return took

    took = asyncio.run(main())
    assert 0.4 <= took < 2.5, took


def test_heartbeat_renews_ours_and_cancels_lost_and_cancelled_jobs(qdb, tmp_path):
    """Each beat renews this worker's leases with their progress; a job another worker took
    is cancelled as "lost", a live job with a cancel request as "cancel", and a batch job with
    one only learns of it (it cancels its batches itself). The workers table is beaten too."""
    worker = _worker(qdb, tmp_path, lease_seconds=1.0)
    ids = {name: _submit(qdb, mode="batch" if name == "batch" else "live")
           for name in ("ended", "ours", "lost", "cancel", "batch")}
    rows = {name: worker.queue.claim(worker.id, 30.0) for name in ids}
    assert [rows[name].id for name in ids] == list(ids.values())
    _set(qdb, ids["lost"], lease_owner="someone-else")
    for name in ("cancel", "batch"):
        _set(qdb, ids[name], cancel_requested=True)
    worker._register()
    with qdb.write() as conn:
        conn.execute(workers.update().values(heartbeat_at=1.0))
    worker.draining.set()
    counters = [0] * len(COUNTERS)
    worker.shared_counters = counters

    async def main() -> dict[str, Running]:
        running = {name: Running(rows[name], task=asyncio.create_task(asyncio.sleep(30)),
                                 live=Live(total=8, done=3, cost=0.5, tokens=6))
                   for name in ids}
        running["ended"].task.cancel()
        await asyncio.gather(running["ended"].task, return_exceptions=True)
        worker.running = {rows[name].id: r for name, r in running.items()}
        before = time.time()
        beat = asyncio.create_task(worker._heartbeat())
        await asyncio.sleep(0.6)
        beat.cancel()
        with pytest.raises(asyncio.CancelledError):
            await beat
        assert _job(qdb, ids["ours"]).lease_expires >= before + 0.9
        for r in running.values():
            if not r.task.done():
                r.task.cancel()
        await asyncio.gather(*(r.task for r in running.values()), return_exceptions=True)
        return running

    running = asyncio.run(main())
    assert running["lost"].reason == "lost"
    assert running["cancel"].reason == "cancel"
    assert running["batch"].reason is None and running["batch"].cancel_seen
    assert running["ours"].reason is None and not running["ours"].cancel_seen
    assert running["ended"].reason is None
    ours = _job(qdb, ids["ours"])
    assert ours.progress["done"] == 3 and ours.progress["worker"] == "w-test"
    assert (ours.cost_usd, ours.tokens_used) == (0.5, 6)
    assert _job(qdb, ids["lost"]).tokens_used == 0
    assert counters == [worker.queue.counts[name] for name in COUNTERS] and counters[0] == 5
    with qdb.read() as conn:
        beat = conn.execute(sa.select(workers)).one()
    assert beat.id == "w-test" and beat.heartbeat_at > 1.0 and beat.draining


def test_the_workers_table_lists_a_worker_while_it_lives(qdb, tmp_path):
    worker = _worker(qdb, tmp_path)
    worker._register()
    with qdb.write() as conn:  # a worker silent for over an hour is dropped at a beat
        conn.execute(workers.insert().values(id="ghost", host="h", pid=1, started_at=0.0,
                                             heartbeat_at=1.0, draining=False))
    worker._beat()
    with qdb.read() as conn:
        rows = {r.id: r for r in conn.execute(sa.select(workers))}
    assert set(rows) == {"w-test"} and not rows["w-test"].draining
    assert rows["w-test"].pid > 0 and rows["w-test"].heartbeat_at >= rows["w-test"].started_at
    worker._unregister()
    assert count_rows(qdb, workers) == 0
    assert worker.status() == {"id": "w-test", "mode": "thread", "alive": False,
                               "running_jobs": 0, "draining": False}
    assert worker.tallies() == dict.fromkeys(COUNTERS, 0)
    worker.drain()
    assert worker.status()["draining"]


def test_take_up_paused_keeps_its_own_jobs_and_drops_taken_over_ones(qdb, tmp_path):
    """After an outage: a paused job still ours is launched again (same attempt); one another
    worker took over is forgotten."""
    worker = _worker(qdb, tmp_path)
    kept_id, gone_id = _submit(qdb), _submit(qdb)
    kept, gone = worker.queue.claim(worker.id, 30.0), worker.queue.claim(worker.id, 30.0)
    _set(qdb, gone_id, lease_owner="other")
    worker.paused = {kept_id: kept, gone_id: gone}
    launched: list[Any] = []
    worker._launch = launched.append  # type: ignore[method-assign]
    asyncio.run(worker._take_up_paused())
    assert worker.paused == {}
    assert [row.id for row in launched] == [kept_id] and launched[0].attempts == 1


def test_housekeeping_deletes_old_jobs_and_their_run_dirs_once_in_a_while(qdb, tmp_path):
    """With retention on, an idle pass deletes finished jobs older than the retention and
    their run directories; the next pass within ten minutes does nothing."""
    worker = _worker(qdb, tmp_path, retention_days=1.0)
    insert_job(qdb, "job_old", PROJECT, "tok_x", "succeeded", finished_at=10.0)
    insert_job(qdb, "job_recent", PROJECT, "tok_x", "succeeded", finished_at=time.time())
    run_dir = worker.evaluator.run_dir("job_old")
    run_dir.mkdir(parents=True)
    (run_dir / "calls.jsonl").write_text("{}\n")
    asyncio.run(worker._housekeeping())
    assert not run_dir.exists()
    with qdb.read() as conn:
        assert [r.id for r in conn.execute(sa.select(jobs.c.id))] == ["job_recent"]
    insert_job(qdb, "job_old2", PROJECT, "tok_x", "failed", finished_at=10.0)
    asyncio.run(worker._housekeeping())
    assert count_rows(qdb, jobs) == 2
    off = _worker(qdb, tmp_path)
    asyncio.run(off._housekeeping())
    assert count_rows(qdb, jobs) == 2


def test_the_worker_loop_runs_a_queued_job_and_unregisters_when_drained(qdb, tmp_path):
    """run(): registers, claims the queued job, ends it, and on a drain hands back and leaves
    the workers table."""
    worker = _worker(qdb, tmp_path, poll_seconds=0.05, grace_seconds=0.0)
    insert_job(qdb, "job_future", PROJECT, "tok_x", "queued", kind="future-kind",
               mode="live", attempts=0)
    seen: list[int] = []

    async def main() -> None:
        loop = asyncio.create_task(worker.run())
        deadline = time.monotonic() + 10
        while worker.finished == 0:
            assert time.monotonic() < deadline, "the queued job was not run within 10 s"
            await asyncio.sleep(0.05)
        seen.append(count_rows(qdb, workers))
        worker.drain()
        await asyncio.wait_for(loop, 10)

    asyncio.run(main())
    assert seen == [1] and count_rows(qdb, workers) == 0
    assert _job(qdb, "job_future").status == "failed"
    assert worker.tallies()["claims"] == 1


# --- the run-log journal -------------------------------------------------------------------


class _Recorder:
    """A queue whose record_batch notes each write (and can fail the first ones)."""

    def __init__(self, failures: int = 0) -> None:
        self.batches: list[tuple[list[Any], list[Any]]] = []
        self.failures = failures

    def record_batch(self, manifests: list[Any], calls: list[Any]) -> None:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("write failed")
        self.batches.append((list(manifests), list(calls)))


async def _stop(task: asyncio.Task[Any]) -> None:
    """Cancel a task and wait (bounded) for it to end. On Python 3.11 ``asyncio.wait_for``
    swallows a cancel that lands as its inner wait completes, so cancel until it ends."""
    for _ in range(50):
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=0.1)
        if done:
            return
    raise AssertionError("the task did not end when cancelled")


def test_the_journal_writes_queued_records_in_one_batch_and_flush_waits_for_them():
    """Records queued together go in one write; flush returns once they are written; a
    later record waits for the linger, unless a flush asks for it."""
    queue = _Recorder()

    async def main() -> None:
        journal = CallJournal(queue, linger=5.0)  # type: ignore[arg-type]
        assert journal.linger == 5.0
        writer = asyncio.create_task(journal.run())
        try:
            journal.call("j1", {"custom_id": "a"})
            journal.manifest("j1", {"kind": "evaluate"})
            journal.call("j2", {"custom_id": "b"})
            await asyncio.wait_for(journal.flush(), 5)
            assert queue.batches == [([("j1", {"kind": "evaluate"})],
                                      [("j1", {"custom_id": "a"}), ("j2", {"custom_id": "b"})])]
            journal.call("j1", {"custom_id": "c"})
            started = time.monotonic()
            await asyncio.wait_for(journal.flush(), 5)  # no wait for the 5 s linger
            assert time.monotonic() - started < 2
            assert queue.batches[-1] == ([], [("j1", {"custom_id": "c"})])
            await asyncio.wait_for(journal.flush(), 1)  # nothing queued: at once
        finally:
            await _stop(writer)

    asyncio.run(main())


def test_the_journal_hands_a_finished_jobs_unwritten_records_to_take():
    """take() removes one job's queued records (manifests and calls) and leaves the others'."""
    queue = _Recorder()

    async def main() -> None:
        journal = CallJournal(queue)  # type: ignore[arg-type]
        assert journal.linger == 0.1
        journal.call("j1", {"custom_id": "a"})
        journal.call("j2", {"custom_id": "b"})
        journal.manifest("j1", {"kind": "evaluate"})
        journal.manifest("j2", {"kind": "other"})
        taken = await asyncio.wait_for(journal.take("j1"), 5)
        assert taken == ([("j1", {"kind": "evaluate"})], [("j1", {"custom_id": "a"})])
        assert await asyncio.wait_for(journal.take("j1"), 5) == ([], [])
        writer = asyncio.create_task(journal.run())
        try:
            await asyncio.wait_for(journal.flush(), 5)
        finally:
            await _stop(writer)
        assert queue.batches == [([("j2", {"kind": "other"})], [("j2", {"custom_id": "b"})])]

    asyncio.run(main())


def test_a_failed_journal_write_is_retried_with_the_same_records(caplog):
    """A write that fails is logged and retried half a second later, records in order."""
    queue = _Recorder(failures=1)

    async def main() -> None:
        journal = CallJournal(queue)  # type: ignore[arg-type]
        writer = asyncio.create_task(journal.run())
        try:
            journal.call("j1", {"custom_id": "a"})
            await asyncio.sleep(0.05)
            journal.call("j1", {"custom_id": "b"})
            started = time.monotonic()
            await asyncio.wait_for(journal.flush(), 5)
            assert time.monotonic() - started >= 0.3
        finally:
            await _stop(writer)

    with caplog.at_level(logging.ERROR, logger="dst_judge.service"):
        asyncio.run(main())
    assert [call["custom_id"] for _, calls in queue.batches for _, call in calls] == ["a", "b"]
    assert "writing 1 logged call(s) to the database failed; retrying" in caplog.text


# --- health and metrics --------------------------------------------------------------------


def test_queue_metrics_are_the_workers_tallies_as_counters():
    assert list(queue_metrics(None)) == []
    thread = SimpleNamespace(status=dict, tallies=lambda: {"claims": 3, "lease_expiries": 1,
                                                           "retries": 2, "given_up": 0})
    families = {f.name: f for f in queue_metrics(thread)}
    assert {name: f.samples[0].value for name, f in families.items()} == {
        "dst_judge_claims": 3.0, "dst_judge_lease_expiries": 1.0,
        "dst_judge_claim_retries": 2.0, "dst_judge_jobs_given_up": 0.0}
    assert families["dst_judge_claims"].documentation == "Jobs claimed by this replica's workers"
    processes = SimpleNamespace(status=dict, tallies=lambda: {"restarts": 2, "claims": 1})
    values = {f.name: f.samples[0].value for f in queue_metrics(processes)}
    assert values["dst_judge_worker_restarts"] == 2.0 and values["dst_judge_claims"] == 1.0
    assert values["dst_judge_jobs_given_up"] == 0.0 and len(values) == 5


def test_readiness_names_each_dead_worker_process(qdb):
    status = {"alive": False, "pid": None, "processes": [
        {"pid": 11, "alive": True}, {"pid": 12, "alive": False}, {"pid": 13, "alive": False}]}
    worker = SimpleNamespace(status=lambda: status, tallies=dict)
    assert readiness(SimpleNamespace(db=qdb, worker=worker, closing=False)) == (
        False, "this replica's worker is gone (being restarted): process 12, 13 not alive")
    assert readiness(SimpleNamespace(db=qdb, worker=None, closing=True)) == (
        False, "draining: this replica is shutting down")
    with qdb.write() as conn:
        conn.execute(sa.text("DELETE FROM alembic_version"))
    ok, reason = readiness(SimpleNamespace(db=qdb, worker=None, closing=False))
    assert not ok
    assert reason == f"database schema at revision none, this version needs {head_revision()}"


# --- worker processes (supervision without starting any) -----------------------------------


class _FakeProcess:
    """Stands for a started child process: no process is started by these tests."""

    def __init__(self, pid: int | None = None, exitcode: int | None = None,
                 alive: bool = True) -> None:
        self.pid, self.exitcode, self.alive = pid, exitcode, alive
        self.calls: list[Any] = []

    def is_alive(self) -> bool:
        return self.alive

    def join(self, timeout: float | None = None) -> None:
        self.calls.append(("join", timeout))

    def kill(self) -> None:
        self.calls.append("kill")
        self.alive = False


def _processes(tmp_path: Path, monkeypatch: Any, **values: Any) -> Any:
    from judge.service.queue import _process

    started: list[Any] = []

    def fake_start(self: Any) -> None:
        self.started_at = time.monotonic()
        self._process = _FakeProcess(pid=None)
        self.id = f"fake:{len(started)}"
        started.append(self)

    monkeypatch.setattr(_process.WorkerProcess, "start", fake_start)
    settings = service_settings(tmp_path / "data", "http://127.0.0.1:9",
                                worker_mode="process", **values)
    return _process.WorkerProcesses(settings), started


def test_worker_processes_share_the_job_slots_and_report_each_child(tmp_path, monkeypatch):
    """Slots divide as evenly as they can (the first processes take the remainder); the
    status names every child; tallies add the children's counters and the restarts."""
    workers_, _ = _processes(tmp_path, monkeypatch, job_slots=5, worker_processes=2)
    assert [p.settings.job_slots for p in workers_.processes] == [3, 2]
    assert workers_.processes[0].status() == {"id": "", "mode": "process", "pid": None,
                                              "alive": False, "draining": False}
    assert not workers_.processes[0].exited()
    status = workers_.status()
    assert status["pid"] is None and status["restarts"] == 0 and not status["alive"]
    assert status["mode"] == "process" and not status["draining"]
    assert [c["pid"] for c in status["processes"]] == [None, None]
    workers_.processes[0].counters[0] = 4
    workers_.processes[1].counters[0] = 1
    workers_.processes[1].counters[3] = 2
    assert workers_.processes[1].tallies() == {"claims": 1, "lease_expiries": 0,
                                               "retries": 0, "given_up": 2}
    assert workers_.tallies() == {"claims": 5, "lease_expiries": 0, "retries": 0,
                                  "given_up": 2, "restarts": 0}
    single, _ = _processes(tmp_path, monkeypatch, job_slots=3, worker_processes=1)
    assert [p.settings.job_slots for p in single.processes] == [3]
    assert "processes" not in single.status()
    single.processes[0]._process = _FakeProcess(pid=77)
    assert single.status()["pid"] == 77 and single.status()["alive"]


def test_a_dead_worker_process_is_replaced_at_once_unless_it_died_young(tmp_path, monkeypatch):
    """A process that lived past YOUNG_SECONDS is replaced at once (its tallies kept); one
    that died young waits 1 s, doubling to at most 30 s (a drain cuts the wait short)."""
    from judge.service.queue._process import YOUNG_SECONDS

    workers_, started = _processes(tmp_path, monkeypatch, job_slots=2, worker_processes=2)
    dead = workers_.processes[1]
    dead._process = _FakeProcess(pid=None, exitcode=-9, alive=False)
    dead.started_at = time.monotonic() - YOUNG_SECONDS - 1
    dead.counters[0] = 6
    assert dead.exited()
    workers_._replace(1, dead)
    assert workers_.processes[1] is started[0] and workers_.processes[1] is not dead
    assert workers_.processes[1].settings.job_slots == 1
    assert workers_.restarts == 1 and workers_._pauses == [0.0, 0.0]
    assert workers_.tallies()["claims"] == 6 and workers_.tallies()["restarts"] == 1
    assert dead.draining.is_set() and ("join", 0) in dead._process.calls
    young = workers_.processes[0]
    young._process = _FakeProcess(exitcode=1, alive=False)
    young.started_at = time.monotonic()
    workers_.draining.set()  # the pause is cut short: nothing replaced while draining
    for expected in (1.0, 2.0, 4.0):
        workers_._replace(0, young)
        assert workers_._pauses[0] == expected and workers_.processes[0] is young
    workers_._pauses[0] = 20.0
    workers_._replace(0, young)
    assert workers_._pauses[0] == 30.0 and workers_.restarts == 1 and len(started) == 1


def test_a_worker_process_is_nudged_through_its_pipe_and_killed_if_it_will_not_stop(
        tmp_path, monkeypatch):
    import os

    workers_, _ = _processes(tmp_path, monkeypatch, job_slots=1, worker_processes=1)
    child = workers_.processes[0]
    child.nudge()  # not started: nothing to write to
    read, write = os.pipe()
    try:
        child._wake = SimpleNamespace(fileno=lambda: write, close=lambda: None)
        workers_.nudge()
        assert os.read(read, 16) == b"!"
    finally:
        os.close(read)
        os.close(write)
    stubborn = _FakeProcess(pid=None, alive=True)
    child._process = stubborn
    child.stop(0.5)
    assert stubborn.calls == [("join", 0.5), "kill", ("join", 5)]
    assert child._wake is None and child.draining.is_set()


def test_a_flush_waits_for_the_very_first_record():
    """flush() right after the first record returns only once that record is written."""
    queue = _Recorder()

    async def main() -> None:
        journal = CallJournal(queue)  # type: ignore[arg-type]
        writer = asyncio.create_task(journal.run())
        try:
            journal.call("j1", {"custom_id": "a"})
            await asyncio.wait_for(journal.flush(), 5)
            assert queue.batches == [([], [("j1", {"custom_id": "a"})])]
        finally:
            await _stop(writer)

    asyncio.run(main())
