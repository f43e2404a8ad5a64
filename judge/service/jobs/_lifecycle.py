"""A job's life: its states, the moves between them, which states are final, and the one
writer of a job's status.

The API (:mod:`._jobs`: submit, cancel, resume, delete), the queue (:mod:`..queue`: claim,
park, release, finish, give up, purge), the runners (their outcomes) and the web all name a
status through :class:`JobStatus`, and every change of the ``status`` column goes through
:func:`move` (or the claim statement built here), which refuses a move the table below does
not allow, so no module can put a job in a state it cannot leave or take a finished job back.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import Any

import sqlalchemy as sa

from ..._errors import IllegalMove
from ..db import Database, artifacts, job_batches, job_calls, jobs, judgments, review_samples


class JobStatus(str, Enum):
    """A job's state. String-valued: the database and the JSON of the API keep the same
    words (``JobStatus.QUEUED == "queued"``)."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    """A batch job between two polls of its batches: not finished, holds no worker."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"
    """Its budget ran out (resumable)."""

    __str__ = str.__str__  # "queued" in messages and f-strings on every Python version

    def __format__(self, format_spec: str) -> str:
        return format(self.value, format_spec)

    @property
    def final(self) -> bool:
        return self in FINAL


STATUSES: tuple[JobStatus, ...] = tuple(JobStatus)
ACTIVE: tuple[JobStatus, ...] = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.WAITING)
"""Not finished: a file such a job reads cannot be deleted, nor can the job."""
FINAL: tuple[JobStatus, ...] = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED,
                                JobStatus.STOPPED)
RESUMABLE: tuple[JobStatus, ...] = (JobStatus.STOPPED, JobStatus.FAILED, JobStatus.CANCELLED)
WITH_RESULTS: tuple[JobStatus, ...] = (JobStatus.SUCCEEDED, JobStatus.STOPPED,
                                       JobStatus.FAILED)
"""Final states in which a judge run may hold results (a bundle, a retry of its errors)."""
CANCELLABLE_AT_ONCE: tuple[JobStatus, ...] = (JobStatus.QUEUED, JobStatus.STOPPED)
"""Cancelled by the API itself; a running or waiting job is cancelled by its worker."""

MOVES: dict[JobStatus | None, frozenset[JobStatus]] = {
    None: frozenset({JobStatus.QUEUED, JobStatus.SUCCEEDED}),  # submitted; imported bundle
    JobStatus.QUEUED: frozenset({JobStatus.RUNNING, JobStatus.CANCELLED}),
    # running → running: a claim taking over a dead worker's job (its lease expired)
    JobStatus.RUNNING: frozenset({JobStatus.RUNNING, JobStatus.QUEUED, JobStatus.WAITING,
                                  *FINAL}),
    JobStatus.WAITING: frozenset({JobStatus.RUNNING}),
    JobStatus.STOPPED: frozenset({JobStatus.QUEUED, JobStatus.CANCELLED}),
    JobStatus.FAILED: frozenset({JobStatus.QUEUED}),
    JobStatus.CANCELLED: frozenset({JobStatus.QUEUED}),
    JobStatus.SUCCEEDED: frozenset(),
}
"""Where each state may go (``None``: a job not yet stored)."""

CLAIMABLE: tuple[JobStatus, ...] = tuple(
    source for source in STATUSES if JobStatus.RUNNING in MOVES[source])
"""States a worker's claim takes a job from (queued; running with an expired lease;
waiting and due)."""


def check_move(source: JobStatus | str | None, target: JobStatus | str) -> JobStatus:
    """``target`` as a :class:`JobStatus` once the move from ``source`` is allowed; else
    :class:`IllegalMove` (an unknown status word is a ``ValueError``)."""
    before = None if source is None else JobStatus(source)
    after = JobStatus(target)
    if after not in MOVES[before]:
        raise IllegalMove(before, after)
    return after


def move(conn: sa.Connection, job_id: str, sources: Iterable[JobStatus | str],
         target: JobStatus | str, *where: Any, **values: Any) -> int:
    """Set the job's status to ``target`` if it is in one of ``sources`` (and ``where``
    holds), with other column ``values``; the number of rows changed (0 or 1). Every source
    must be allowed to move to ``target``, else :class:`IllegalMove` before any write."""
    froms = [JobStatus(source) for source in sources]
    after = JobStatus(target)
    for source in froms:
        check_move(source, after)
    statement = (jobs.update()
                 .where(jobs.c.id == job_id, jobs.c.status.in_([s.value for s in froms]),
                        *where)
                 .values(status=after.value, **values))
    return int(conn.execute(statement).rowcount)


def new_job_status(target: JobStatus) -> str:
    """The status a job is stored with when it is made (``queued``; an imported bundle:
    ``succeeded``), checked against the table."""
    return check_move(None, target).value


def delete_jobs(db: Database, job_ids: list[str]) -> None:
    """The end of a job: delete it with everything it made (an API delete of a final job, or
    retention)."""
    with db.write() as conn:
        for table in (job_calls, job_batches, judgments, artifacts, review_samples):
            conn.execute(table.delete().where(table.c.job_id.in_(job_ids)))
        conn.execute(jobs.delete().where(jobs.c.id.in_(job_ids)))
