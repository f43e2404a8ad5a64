"""The one place where tests reach into the job queue's store instead of going through HTTP:
claiming a job and renewing its lease as a worker does. The queue code is being moved; when
it moves, repoint these functions and nothing else.

Everything else the lease tests read is public: the ``jobs`` table's ``status``,
``lease_owner``, ``lease_expires`` and ``attempts`` columns (docs/SERVICE.md, Database)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa


def job_store(db: Any) -> Any:
    """The store a worker claims from, on a ``judge.service.Database``."""
    from judge.service.queue import JobQueue

    return JobQueue(db)


def claim(store: Any, worker: str, lease_seconds: float) -> str | None:
    """Claim the next job as ``worker``; its id, or None when there is none to take."""
    row = store.claim(worker, lease_seconds)
    return None if row is None else str(row.id)


def renew(store: Any, worker: str, lease_seconds: float, job_id: str) -> bool:
    """Renew ``worker``'s lease of a job as its heartbeat does; whether it still holds it."""
    ours, _ = store.renew_many(worker, lease_seconds, {job_id: ({"done": 0}, 0.0, 0)})
    return job_id in ours


def lease(engine: sa.Engine, job_id: str) -> dict[str, Any]:
    """A job's lease as the database holds it (``engine``: ``sqlalchemy.create_engine`` on
    the service's database URL)."""
    with engine.connect() as conn:
        row = conn.execute(sa.text(
            "SELECT status, lease_owner, lease_expires, attempts FROM jobs WHERE id = :id"),
            {"id": job_id}).one()
    return dict(row._mapping)
