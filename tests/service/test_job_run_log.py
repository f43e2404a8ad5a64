"""A job's run log in the service database keeps the contract of every run store
(tests/pipeline/run_store_contract.py), the run directory's too; and analyses read a job's run
through it."""

from __future__ import annotations

import pytest

from judge.service._lifecycle import JobStatus
from judge.service._runlog import ImmediateWriter, JobRunLog, job_run
from judge.service.queue import JobQueue
from tests.pipeline.run_store_contract import Place, RunStoreContract

from .conftest import insert_job, queue_database


class TestJobRunLogOnSQLite(RunStoreContract):
    @pytest.fixture
    def place(self, tmp_path):
        db = queue_database(tmp_path / "service.sqlite3")
        insert_job(db, "job_1", "prj_x", "tok", "queued")
        queue = JobQueue(db)
        assert queue.claim("worker", 60.0).id == "job_1"
        writer = ImmediateWriter(queue)

        def commit(store: JobRunLog) -> None:
            """The worker's finish step: the results go with the job's status."""
            rows, summary = store.results
            assert queue.finish("job_1", "worker", status=JobStatus.SUCCEEDED, exit_code=0,
                                summary=summary, rows=rows)

        yield Place(open=lambda: JobRunLog(db, "job_1", writer=writer, project_id="prj_x"),
                    commit=commit)
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
