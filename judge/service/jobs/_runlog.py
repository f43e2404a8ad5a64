"""A job's run log in the service database: the database's :class:`judge.pipeline.RunStore`.

A run directory keeps a run in files; a job keeps it in its rows: the manifest in
``jobs.manifest``, each finished call in ``job_calls`` (one row per call, the last record of a
call wins), the results in ``jobs.summary`` and ``judgments``. An evaluate job's run writes
straight into them, with no folder in between, and an analysis job reads a run back from them
(:meth:`JobRunLog.read_run`).

Writes go through a :class:`RunLogWriter`: a worker's journal
(:mod:`judge.service.queue._journal`), which copies them to the database in the background so
the event loop never waits on it, or any writer that writes at once (:class:`ImmediateWriter`).
The results are the job's outcome: :meth:`JobRunLog.write_results` holds them, and the worker's
finish step writes them, cleaned of server paths, with the job's status in one transaction that
only the lease holder may commit.
A job has no lock of its own on its log: its lease is the lock.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import sqlalchemy as sa

from ..._errors import InputError, OptionError, ServiceError
from ...pipeline import Run, same_run
from ..db import Database, job_calls, jobs, judgments


class RunLogWriter(Protocol):
    """Where a job's run log is written (a worker's journal writes in the background)."""

    def call(self, job_id: str, record: dict[str, Any]) -> None: ...

    def manifest(self, job_id: str, manifest: dict[str, Any]) -> None: ...


class RecordSink(Protocol):
    """The queue's writes of a run log (:class:`judge.service.queue.JobQueue`)."""

    def record_calls(self, job_id: str, records: Iterable[dict[str, Any]]) -> None: ...

    def store_manifest(self, job_id: str, manifest: dict[str, Any]) -> None: ...


class ImmediateWriter:
    """A :class:`RunLogWriter` that writes each record at once, in a transaction of its own."""

    def __init__(self, sink: RecordSink) -> None:
        self.sink = sink

    def call(self, job_id: str, record: dict[str, Any]) -> None:
        self.sink.record_calls(job_id, [record])

    def manifest(self, job_id: str, manifest: dict[str, Any]) -> None:
        self.sink.store_manifest(job_id, manifest)


class HeldRecords:
    """A :class:`RunLogWriter` that writes nothing itself: it holds the records for the job's
    outcome, which the worker writes in the transaction of the job's status (a batch job's
    collected run: its log lands with its results, or not at all). Any thread may use it."""

    def __init__(self) -> None:
        self.manifests: list[tuple[str, dict[str, Any]]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def call(self, job_id: str, record: dict[str, Any]) -> None:
        self.calls.append((job_id, record))

    def manifest(self, job_id: str, manifest: dict[str, Any]) -> None:
        self.manifests.append((job_id, manifest))

    @property
    def records(self) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, dict[str, Any]]]]:
        """(manifests, calls), as the worker's journal hands over a live job's."""
        return self.manifests, self.calls


class JobRunLog:
    """The run log and results of one job, in the service database.

    ``held``: the manifest and calls the database holds for the job when the caller has read
    them already (a worker reads them with the job's inputs, in the thread that prepares the
    job, so that :meth:`start` costs the event loop no query). ``writer``: where the log is
    written; a store without one only reads. ``project_id``: reads only a job of that project.
    """

    def __init__(self, db: Database, job_id: str, *, writer: RunLogWriter | None = None,
                 project_id: str | None = None,
                 held: tuple[dict[str, Any] | None, list[dict[str, Any]]] | None = None
                 ) -> None:
        self.db = db
        self.job_id = job_id
        self.writer = writer
        self.project_id = project_id
        self.run_id: str | None = None
        self.dropped = 0
        self.results: tuple[list[dict[str, Any]], dict[str, Any]] | None = None
        """The run's rows and summary, once written: the job's outcome stores them."""
        self._manifest: dict[str, Any] | None = None
        self._known = False
        """Whether ``_manifest`` is what the job holds (given, read, or started under)."""
        self._calls: dict[str, dict[str, Any]] | None = None
        if held is not None:
            self._manifest, self._known = held[0], True
            self._calls = {str(c["custom_id"]): c for c in held[1]}

    @property
    def name(self) -> str:
        return f"job {self.job_id}"

    # --- writing ------------------------------------------------------------------------------

    def start(self, manifest: dict[str, Any], *, resume: bool, force: bool = False,
              retry_failed: bool = False) -> list[dict[str, Any]]:
        """Open the job's log under ``manifest``: the same run continues from its logged calls,
        another run is refused (a job judges one run; ``force`` starts afresh, deleting the
        calls logged under the other manifest)."""
        if self.writer is None:
            raise OptionError(f"{self.name}: this run log is open for reading only")
        previous = self.read_manifest()
        calls = self._logged()
        if resume and previous is None:
            raise OptionError(f"nothing to resume in {self.name} (it has no run log)")
        manifest = json.loads(json.dumps(manifest))  # as the database gives it back
        if not same_run(previous, manifest, force=force, holder=self.name,
                        advice="Submit a new job for this run"):
            self.run_id = uuid.uuid4().hex
            self._forget(list(calls))
            calls.clear()
        else:
            assert previous is not None
            self.run_id = str(previous.get("run_id") or uuid.uuid4().hex)
        manifest = {**manifest, "run_id": self.run_id}
        if manifest != previous:
            self.writer.manifest(self.job_id, manifest)
        self._manifest, self._known = manifest, True
        if retry_failed:
            failed = [key for key, call in calls.items() if call.get("error")]
            self._forget(failed)
            for key in failed:
                del calls[key]
            self.dropped = len(failed)
        return list(calls.values())

    def append(self, result: Any) -> None:
        """Log one finished call (through the writer: a journal writes it within moments; a
        call lost to a kill before that is answered from the ledger on resume)."""
        assert self.writer is not None and self._calls is not None, "start() first"
        record = dict(vars(result))
        self._calls[str(record["custom_id"])] = record
        self.writer.call(self.job_id, record)

    def write_results(self, rows: Sequence[dict[str, Any]], summary: dict[str, Any]) -> None:
        """Hold the results for the job's outcome (see the module's description)."""
        self.results = (list(rows), summary)

    def close(self) -> None:
        """Nothing to give back: the job's lease is its lock."""

    def _forget(self, custom_ids: list[str]) -> None:
        """Delete logged calls of the job (a run started afresh, errors to send again)."""
        if not custom_ids:
            return
        with self.db.write() as conn:
            conn.execute(job_calls.delete().where(job_calls.c.job_id == self.job_id,
                                                  job_calls.c.custom_id.in_(custom_ids)))

    # --- reading ------------------------------------------------------------------------------

    def read_manifest(self) -> dict[str, Any] | None:
        if not self._known:
            with self.db.read() as conn:
                found = conn.execute(self._job(jobs.c.manifest)).first()
            if found is None:
                raise self._no_job()
            manifest = found.manifest
            return manifest if isinstance(manifest, dict) else None
        return self._manifest

    def read_log(self) -> list[dict[str, Any]]:
        return list(self._logged().values())

    def _logged(self) -> dict[str, dict[str, Any]]:
        if self._calls is None:
            with self.db.read() as conn:
                self._calls = {r.custom_id: r.record for r in conn.execute(
                    sa.select(job_calls.c.custom_id, job_calls.c.record)
                    .where(job_calls.c.job_id == self.job_id)
                    .order_by(job_calls.c.custom_id))}
        return self._calls

    def read_run(self) -> Run:
        """The job's judged run (its summary and rows, in run order); an :class:`InputError`
        when it holds no judgments (not finished, or not a judge run)."""
        with self.db.read() as conn:
            found = conn.execute(self._job(jobs.c.summary)).first()
            if found is None:
                raise self._no_job()
            rows = [r.row for r in conn.execute(
                sa.select(judgments.c.row).where(judgments.c.job_id == self.job_id)
                .order_by(judgments.c.seq))]
        if not rows or not found.summary:
            raise InputError(f"job {self.job_id} holds no judgments")
        return Run(Path(self.job_id), dict(found.summary), rows)

    def _job(self, column: Any) -> Any:
        query = sa.select(column).where(jobs.c.id == self.job_id)
        if self.project_id is not None:
            query = query.where(jobs.c.project_id == self.project_id)
        return query

    def _no_job(self) -> ServiceError:
        return ServiceError(f"no job {self.job_id!r} in this project", status=404)


def job_run(db: Database, project_id: str, job_id: str) -> Run:
    """A finished judge job of the project as a run (what analyses read)."""
    return JobRunLog(db, job_id, project_id=project_id).read_run()
