"""Whether this replica is ready to serve (``/readyz``), and what its workers did
(``/metrics``): liveness is only "the process answers"; readiness asks the database, its
schema and this process's workers."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

import sqlalchemy as sa
from prometheus_client.core import CounterMetricFamily

from ..db import Database, current_revision, head_revision


class WorkerLike(Protocol):
    """A thread worker or a set of worker processes, as health and metrics see it."""

    def status(self) -> dict[str, Any]: ...

    def tallies(self) -> Mapping[str, int]: ...


class ReplicaLike(Protocol):
    """What readiness reads of the service object (read only, so a service whose worker is a
    richer type fits)."""

    @property
    def db(self) -> Database: ...

    @property
    def worker(self) -> WorkerLike | None: ...

    @property
    def closing(self) -> bool: ...


@functools.lru_cache(1)
def _head() -> str | None:
    return head_revision()


def readiness(replica: ReplicaLike) -> tuple[bool, str]:
    """(ready, reason): not ready while draining, when the database does not answer, when its
    schema is not at this version's head, or when this process's workers are gone."""
    if replica.closing:
        return False, "draining: this replica is shutting down"
    try:
        revision = current_revision(replica.db)
    except sa.exc.SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", None) or exc).splitlines()[0][:200]
        return False, f"database unreachable ({exc.__class__.__name__}: {first})"
    if revision != _head():
        return False, (f"database schema at revision {revision or 'none'}, this version "
                       f"needs {_head()}")
    worker = replica.worker
    if worker is not None:
        status = worker.status()
        if not status.get("alive"):
            dead = [str(p.get("pid")) for p in status.get("processes") or [status]
                    if not p.get("alive")]
            return False, ("this replica's worker is gone (being restarted): "
                           f"process {', '.join(dead)} not alive")
    return True, "ready"


_HELP = {
    "restarts": ("dst_judge_worker_restarts", "Worker processes of this replica restarted "
                 "after they died"),
    "claims": ("dst_judge_claims", "Jobs claimed by this replica's workers"),
    "lease_expiries": ("dst_judge_lease_expiries", "Claims that took over a job whose "
                       "worker's lease had expired (the worker died or stalled)"),
    "retries": ("dst_judge_claim_retries", "Claims of a job claimed before (its attempt 2 or "
                "later)"),
    "given_up": ("dst_judge_jobs_given_up", "Jobs failed after --max-attempts claims whose "
                 "worker died"),
}


def queue_metrics(worker: WorkerLike | None) -> Iterator[CounterMetricFamily]:
    """The workers' tallies as Prometheus counters (none on an API-only replica)."""
    if worker is None:
        return
    tallies = dict(worker.tallies())
    for key, (name, text) in _HELP.items():
        if key in tallies or key != "restarts":
            yield CounterMetricFamily(name, text, value=float(tallies.get(key, 0)))
