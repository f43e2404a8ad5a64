"""The queue's side of the jobs table: claim a job with a lease, renew it, park a batch job,
finish or release a job, give up on a poison job, purge old ones; and the run log a running
job leaves (its manifest and finished calls).

A worker claims the oldest queued job, a running one whose lease expired (its worker died), or a
waiting one (a batch job parked between two polls of its batches) whose time has come: the
oldest such row is picked ``FOR UPDATE SKIP LOCKED`` and taken in the same transaction.
Postgres lets concurrent claimers skip each other's rows; SQLite has one writer at a time, so
the transaction is atomic there too. Every later write of the worker is conditional on still
holding the lease, so a worker that lost its job (it was too slow to renew) cannot overwrite
the new owner's work.

A job whose lease expired ``max_attempts`` claims in a row (its worker died each time, or
stalled: a job that kills its worker) is not claimed again: it ends ``failed`` with the
reason, and the claim takes the next job, so a poison job never holds the queue up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from ..db import (
    Database,
    JobRow,
    artifacts,
    job_calls,
    jobs,
    judgment_row,
    judgments,
    notify_queue,
    now,
)
from ..jobs import CLAIMABLE, FINAL, JobStatus, delete_jobs, move

Records = tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, dict[str, Any]]]]
"""Run-log records of running jobs: (job id, manifest) pairs and (job id, logged call) pairs."""


class JobQueue:
    """The workers' calls on the jobs table. ``counts`` tallies this process's claims for
    ``/metrics``: ``claims``, ``lease_expiries`` (claims that took over a dead worker's job),
    ``retries`` (claims of a job claimed before), ``given_up`` (poison jobs failed)."""

    def __init__(self, db: Database, max_attempts: int | None = None) -> None:
        self.db = db
        self.max_attempts = max_attempts
        self.counts: Counter[str] = Counter()

    def claim(self, worker_id: str, lease_seconds: float) -> JobRow | None:
        """Take the oldest queued job, a running one whose lease expired, or a waiting one
        due for its next poll; None if none. A poll is not a new attempt.

        The time of the claim (``started_at``, the lease) is taken once this process holds
        SQLite's write lock: waiting for the lock is time in the queue, not the job's."""
        with self.db.write() as conn:
            moment = now()
            for _ in range(100):  # past a hundred poison jobs at once: the next claim goes on
                picked = conn.execute(_PICK, {"moment": moment}).first()
                if picked is None:
                    return None
                takeover = picked.status == JobStatus.RUNNING
                if takeover and self.max_attempts is not None \
                        and picked.attempts >= self.max_attempts:
                    self._give_up(conn, picked.id, picked.attempts, moment)
                    continue
                row = conn.execute(_TAKE, {"job": picked.id, "moment": moment,
                                           "worker": worker_id,
                                           "expires": moment + lease_seconds}).first()
                self.counts["claims"] += 1
                self.counts["lease_expiries"] += takeover
                self.counts["retries"] += row is not None and row.attempts > 1 \
                    and picked.status != JobStatus.WAITING
                return None if row is None else JobRow.of(row)
        return None

    def keep(self, job_id: str, worker_id: str, lease_seconds: float) -> JobRow | None:
        """Take up again a job this worker paused for a database outage: same attempt, a new
        lease; None when another worker took it over meanwhile (or it was cancelled)."""
        moment = now()
        with self.db.write() as conn:
            row = conn.execute(jobs.update().where(
                jobs.c.id == job_id, jobs.c.lease_owner == worker_id,
                jobs.c.status == _RUNNING).values(
                    lease_expires=moment + lease_seconds, updated_at=moment)
                .returning(*jobs.c)).first()
        return None if row is None else JobRow.of(row)

    def _give_up(self, conn: sa.Connection, job_id: str, attempts: int, moment: float) -> None:
        """A job whose worker died on each of its last attempts: failed, for good (its paid
        replies stay in the ledger; ``resume`` gives it one more attempt)."""
        reason = (f"its worker died while running it, {attempts} times "
                  f"(--max-attempts {self.max_attempts}); the job is given up")
        move(conn, job_id, (JobStatus.RUNNING,), JobStatus.FAILED, exit_code=None,
             error=reason, finished_at=moment, updated_at=moment, lease_owner=None,
             lease_expires=None)
        self.counts["given_up"] += 1

    def renew(self, job_id: str, worker_id: str, lease_seconds: float,
              progress: dict[str, Any] | None = None, cost: float | None = None,
              tokens_used: int | None = None) -> tuple[bool, bool]:
        """Extend the lease (and store progress); returns (still ours, cancel requested)."""
        values: dict[str, Any] = {"lease_expires": now() + lease_seconds, "updated_at": now()}
        values.update(_figures(progress, cost, tokens_used))
        with self.db.write() as conn:
            ours = conn.execute(jobs.update().where(jobs.c.id == job_id,
                                                    jobs.c.lease_owner == worker_id,
                                                    jobs.c.status == _RUNNING)
                                .values(**values)).rowcount > 0
            cancel = conn.execute(sa.select(jobs.c.cancel_requested)
                                  .where(jobs.c.id == job_id)).scalar()
        return ours, bool(cancel)

    def renew_many(self, worker_id: str, lease_seconds: float,
                   updates: dict[str, tuple[dict[str, Any], float, int]]
                   ) -> tuple[set[str], set[str]]:
        """:meth:`renew` for every running job of a worker in one transaction; returns the
        jobs still ours and those with a cancel request."""
        ours: set[str] = set()
        cancels: set[str] = set()
        moment = now()
        with self.db.write() as conn:
            for job_id, (progress, cost, tokens_used) in updates.items():
                if conn.execute(jobs.update().where(
                        jobs.c.id == job_id, jobs.c.lease_owner == worker_id,
                        jobs.c.status == _RUNNING).values(
                            lease_expires=moment + lease_seconds, updated_at=moment,
                            progress=progress, cost_usd=cost,
                            tokens_used=tokens_used)).rowcount > 0:
                    ours.add(job_id)
            if updates:
                cancels = {r.id for r in conn.execute(sa.select(jobs.c.id).where(
                    jobs.c.id.in_(list(updates)), jobs.c.cancel_requested.is_(True)))}
        return ours, cancels

    def record_batch(self, manifests: list[tuple[str, dict[str, Any]]],
                     calls: list[tuple[str, dict[str, Any]]]) -> None:
        """Manifests and logged calls of several jobs in one transaction (the last record of a
        call wins)."""
        with self.db.write() as conn:
            _store_records(conn, manifests, calls)

    def record_calls(self, job_id: str, records: Iterable[dict[str, Any]]) -> None:
        rows = [{"job_id": job_id, "custom_id": r["custom_id"], "record": r} for r in records]
        if not rows:
            return
        with self.db.write() as conn:
            ids = [r["custom_id"] for r in rows]
            conn.execute(job_calls.delete().where(job_calls.c.job_id == job_id,
                                                  job_calls.c.custom_id.in_(ids)))
            conn.execute(job_calls.insert(), rows)

    def store_manifest(self, job_id: str, manifest: dict[str, Any]) -> None:
        with self.db.write() as conn:
            conn.execute(jobs.update().where(jobs.c.id == job_id).values(manifest=manifest))

    def finish(self, job_id: str, worker_id: str, *, status: JobStatus, exit_code: int | None,
               error: str | None = None, summary: dict[str, Any] | None = None,
               rows: list[dict[str, Any]] | None = None,
               files_out: dict[str, tuple[str, bytes]] | None = None,
               progress: dict[str, Any] | None = None, cost: float | None = None,
               tokens_used: int | None = None, records: Records | None = None) -> bool:
        """Write the outcome if the lease is still ours; False when another worker owns it.
        ``records``: the end of the job's run log (manifests, calls), written either way."""
        moment = now()
        values: dict[str, Any] = {"exit_code": exit_code, "error": error,
                                  "finished_at": moment, "updated_at": moment,
                                  "lease_owner": None, "lease_expires": None}
        if summary is not None:
            values["summary"] = summary
        values.update(_figures(progress, cost, tokens_used))
        with self.db.write() as conn:
            if records is not None:
                _store_records(conn, *records)
            owned = move(conn, job_id, (JobStatus.RUNNING,), status,
                         jobs.c.lease_owner == worker_id, **values) > 0
            if not owned:
                return False
            if rows is not None:
                conn.execute(judgments.delete().where(judgments.c.job_id == job_id))
                if rows:
                    conn.execute(judgments.insert(), [judgment_row(job_id, i, row)
                                                      for i, row in enumerate(rows)])
            for name, (content_type, data) in (files_out or {}).items():
                conn.execute(artifacts.delete().where(artifacts.c.job_id == job_id,
                                                      artifacts.c.name == name))
                conn.execute(artifacts.insert().values(job_id=job_id, name=name,
                                                       content_type=content_type, data=data))
        return True

    def release(self, job_id: str, worker_id: str, progress: dict[str, Any] | None = None
                ) -> None:
        """Hand a running job back to the queue (this worker is shutting down)."""
        values: dict[str, Any] = {"lease_owner": None, "lease_expires": None,
                                  "updated_at": now()}
        values.update(_figures(progress))
        with self.db.write() as conn:
            move(conn, job_id, (JobStatus.RUNNING,), JobStatus.QUEUED,
                 jobs.c.lease_owner == worker_id, **values)
            notify_queue(conn)  # another worker takes it at once

    def park(self, job_id: str, worker_id: str, wake_at: float, *,
             progress: dict[str, Any] | None = None, cost: float | None = None,
             tokens_used: int | None = None) -> bool:
        """Put a batch job aside until ``wake_at`` without holding a worker; False when the
        lease is no longer ours."""
        values: dict[str, Any] = {"wake_at": wake_at, "lease_owner": None,
                                  "lease_expires": None, "updated_at": now()}
        values.update(_figures(progress, cost, tokens_used))
        with self.db.write() as conn:
            return move(conn, job_id, (JobStatus.RUNNING,), JobStatus.WAITING,
                        jobs.c.lease_owner == worker_id, **values) > 0

    def expired(self, before: float) -> list[str]:
        with self.db.read() as conn:
            return [r.id for r in conn.execute(sa.select(jobs.c.id).where(
                jobs.c.status.in_([s.value for s in FINAL]), jobs.c.finished_at < before))]

    def purge(self, before: float) -> list[str]:
        """Retention: delete finished jobs older than ``before``; returns their ids."""
        ids = self.expired(before)
        for start in range(0, len(ids), 200):
            delete_jobs(self.db, ids[start:start + 200])
        return ids


def _store_records(conn: sa.Connection, manifests: list[tuple[str, dict[str, Any]]],
                   calls: list[tuple[str, dict[str, Any]]]) -> None:
    latest = {(job_id, r["custom_id"]): r for job_id, r in calls}
    for job_id, manifest in manifests:
        conn.execute(jobs.update().where(jobs.c.id == job_id).values(manifest=manifest))
    for job_id, custom_id in latest:
        conn.execute(job_calls.delete().where(job_calls.c.job_id == job_id,
                                              job_calls.c.custom_id == custom_id))
    if latest:
        conn.execute(job_calls.insert(), [
            {"job_id": job_id, "custom_id": custom_id, "record": record}
            for (job_id, custom_id), record in latest.items()])


def _figures(progress: dict[str, Any] | None = None, cost: float | None = None,
             tokens_used: int | None = None) -> dict[str, Any]:
    """The live figures a worker reports with a lease change, leaving out those not given."""
    given = {"progress": progress, "cost_usd": cost, "tokens_used": tokens_used}
    return {column: value for column, value in given.items() if value is not None}


_MOMENT = sa.bindparam("moment", type_=sa.Float)
_RUNNING = JobStatus.RUNNING.value
_WAITING = JobStatus.WAITING.value
_PICK = (sa.select(jobs.c.id, jobs.c.status, jobs.c.attempts)
         .where(sa.or_(jobs.c.status == JobStatus.QUEUED.value,
                       sa.and_(jobs.c.status == _RUNNING, jobs.c.lease_expires < _MOMENT),
                       sa.and_(jobs.c.status == _WAITING, jobs.c.wake_at <= _MOMENT)))
         .order_by(jobs.c.created_at, jobs.c.id).limit(1)
         .with_for_update(skip_locked=True))
"""The next job to claim, locked (Postgres: concurrent claimers skip it). Statements are
built once with bound parameters: building and cache-keying them per claim cost the worker's
event loop milliseconds."""

_TAKE = (jobs.update().where(jobs.c.id == sa.bindparam("job", type_=sa.String),
                             jobs.c.status.in_([s.value for s in CLAIMABLE]))
         .values(status=_RUNNING, lease_owner=sa.bindparam("worker", type_=sa.String),
                 lease_expires=sa.bindparam("expires", type_=sa.Float), wake_at=None,
                 attempts=sa.case((jobs.c.status == _WAITING, jobs.c.attempts),
                                  else_=jobs.c.attempts + 1),
                 started_at=sa.func.coalesce(jobs.c.started_at, _MOMENT),
                 updated_at=_MOMENT)
         .returning(*jobs.c))
