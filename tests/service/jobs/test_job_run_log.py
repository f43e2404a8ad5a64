"""A job's run log in the service database keeps the contract of every run store
(tests/pipeline/run_store_contract.py), the run directory's too; and analyses read a job's run
through it."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from judge._errors import RunConflict
from judge.service import Database
from judge.service.jobs import ImmediateWriter, JobRunLog, JobStatus, job_run
from judge.service.queue import JobQueue
from tests.pipeline.run_store_contract import Place, RunStoreContract
from tests.service.conftest import insert_job, queue_database


def _place(db: Database) -> Place:
    """The run log of a claimed job of ``db``: what a worker runs a job with."""
    insert_job(db, "job_1", "prj_x", "tok", "queued")
    queue = JobQueue(db)
    assert queue.claim("worker", 60.0).id == "job_1"
    writer = ImmediateWriter(queue)

    def commit(store: JobRunLog) -> None:
        """The worker's finish step: the results go with the job's status."""
        rows, summary = store.results
        assert queue.finish("job_1", "worker", status=JobStatus.SUCCEEDED, exit_code=0,
                            summary=summary, rows=rows)

    return Place(open=lambda: JobRunLog(db, "job_1", writer=writer, project_id="prj_x"),
                 commit=commit)


class TestJobRunLogOnSQLite(RunStoreContract):
    @pytest.fixture
    def place(self, tmp_path):
        db = queue_database(tmp_path / "service.sqlite3")
        yield _place(db)
        db.dispose()


class TestJobRunLogOnPostgres(RunStoreContract):
    """JSONB gives the manifest back in its own key order: the same run still continues."""

    @pytest.fixture
    def place(self, postgres_db):
        db = Database(postgres_db)
        db.migrate()
        with db.write() as conn:
            conn.execute(sa.text("INSERT INTO projects (id, name, created_at, settings) "
                                 "VALUES ('prj_x', 'x', 0, '{}')"))
        yield _place(db)
        db.dispose()


def test_a_job_run_is_read_from_its_project_only(tmp_path):
    from judge._errors import ServiceError

    db = queue_database(tmp_path / "service.sqlite3")
    try:
        insert_job(db, "job_1", "prj_x", "tok", "succeeded", summary={"method": "m"})
        with pytest.raises(Exception, match="holds no judgments"):
            job_run(db, "prj_x", "job_1")
        with pytest.raises(ServiceError, match="no job 'job_1'") as caught:
            job_run(db, "prj_other", "job_1")
        assert caught.value.status == 404
        reader = JobRunLog(db, "job_1")
        with pytest.raises(Exception, match="reading only"):
            reader.start({}, resume=False)
    finally:
        db.dispose()


def test_a_live_job_keeps_its_run_log_in_the_database_and_writes_no_folder(service_env):
    """No folder round trip: with no run folder possible (a file where it would be), a live
    evaluate job still runs; its manifest and every call are its rows, and its run is read
    back from them as analyses read it."""
    import sqlalchemy as sa

    from judge.service.db import job_calls, jobs

    api, files, service = service_env["api"], service_env["files"], service_env["service"]
    runs = service_env["settings"].data_dir / "runs"
    runs.write_text("not a folder", encoding="utf-8")
    job = api.post("/v1/jobs", json={"kind": "evaluate", "inputs": files,
                                     "options": {"model": "fake-model"}}).json()
    done = api.wait(job["id"])
    assert done["status"] == "succeeded", done
    with service.db.read() as conn:
        manifest = conn.execute(sa.select(jobs.c.manifest).where(
            jobs.c.id == job["id"])).scalar()
        logged = conn.execute(sa.select(sa.func.count()).select_from(job_calls).where(
            job_calls.c.job_id == job["id"])).scalar()
    assert manifest["kind"] == "evaluate" and manifest["run_id"]
    with service.db.read() as conn:
        project = conn.execute(sa.select(jobs.c.project_id).where(
            jobs.c.id == job["id"])).scalar()
    run = job_run(service.db, project, job["id"])
    assert logged == run.summary["calls"]["planned"] > 0
    assert len(run.rows) == run.summary["turns"] > 0
    assert runs.read_text(encoding="utf-8") == "not a folder"


def test_a_batch_collected_into_a_jobs_rows_reads_back_as_the_folders(tmp_path, example_data):
    """The same batch replies collected into a run directory and into a job's rows (as a
    batch job does: an evaluate run carrying what it submitted, its log written with the job's
    outcome) read back alike through the run store: the same log, the same run."""
    from judge import load_config
    from judge.pipeline import RunDirectory, collect
    from judge.service.jobs import HeldRecords
    from tests.pipeline.run_store_contract import batch_records

    db = queue_database(tmp_path / "service.sqlite3")
    try:
        insert_job(db, "job_1", "prj_x", "tok", "queued")
        queue = JobQueue(db)
        assert queue.claim("worker", 60.0).id == "job_1"
        planned = {"kind": "batch-requests", "files": ["sha"], "calls": 22}
        queue.store_manifest("job_1", planned)  # what the job submitted, until collected
        config = load_config({"model": "local", "use_cache": False})
        records = batch_records(config, example_data, tmp_path)
        options = {"kind": "evaluate", "extra": {"batch": planned}}
        folder = RunDirectory(tmp_path / "run")
        in_folder = collect(config, *example_data, records, store=folder, **options)
        held = HeldRecords()
        log = JobRunLog(db, "job_1", writer=held)
        with pytest.raises(RunConflict, match="batch-requests"):  # the plan is not a run
            collect(config, *example_data, records, store=log, **options)
        in_rows = collect(config, *example_data, records, store=log, force=True, **options)
        assert queue.finish("job_1", "worker", status=JobStatus.SUCCEEDED, exit_code=0,
                            summary=in_rows.summary, rows=in_rows.rows,
                            records=held.records)

        rows = JobRunLog(db, "job_1", project_id="prj_x")
        manifest = rows.read_manifest()
        assert manifest["kind"] == "evaluate" and manifest["batch"] == planned
        assert manifest["run_id"] == log.run_id
        ours = {k: v for k, v in manifest.items() if k != "run_id"}
        assert ours == {k: v for k, v in folder.read_manifest().items() if k != "run_id"}
        assert len(rows.read_log()) == 22
        assert rows.read_log() == sorted(folder.read_log(), key=lambda e: e["custom_id"])
        assert rows.read_run().rows == folder.read_run().rows == in_folder.rows
        assert rows.read_run().summary == folder.read_run().summary
    finally:
        db.dispose()
