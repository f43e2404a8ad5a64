"""The one face of a job's runner, and what a runner gets and gives back.

Every runner has one face, :class:`Runner`: ``await runner.run(job, context)`` returns how the
job ended (:class:`Outcome`) or that it waits without a worker (:class:`Park`, a batch job);
the worker picks the runner from the table of job kinds (:mod:`._kinds`) and writes the outcome
(:meth:`JobQueue.finish`). The runners themselves: evaluate and retry-errors jobs in
:mod:`._evaluate` (batch mode: :mod:`._batchjob`), the analyses in :mod:`._analysis`, the
leaderboard in :mod:`._leaderboard`; their inputs are read through :mod:`._inputs`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..._errors import DatabaseUnavailable, DSTJudgeError
from ..db import Database, JobRow, ServiceSettings
from ..jobs import JobStatus, JobStore, RunLogWriter
from ..ledger import JobLimiter
from ..storage import FileStore
from ._inputs import Inputs
from ._lease import JobQueue, Records


@dataclass
class Outcome:
    """How a job ended, ready for :meth:`JobQueue.finish`."""

    status: JobStatus
    exit_code: int | None
    error: str | None = None
    summary: dict[str, Any] | None = None
    rows: list[dict[str, Any]] | None = None
    artifacts: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    records: Records | None = None
    """Run-log records the job leaves (manifests, calls), as the journal holds a live job's:
    written in the transaction of the outcome."""
    wrap_up: Callable[[], None] | None = None
    """Work left for the thread that writes the outcome (cleaning the rows of server paths), so
    that it costs the event loop nothing and the job no extra thread hop."""


@dataclass
class Live:
    """Counters of a running job, written to the database by the heartbeat."""

    total: int | None = None
    done: int = 0
    cache_hits: int = 0
    errors: int = 0
    cost: float = 0.0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    done_at_start: int | None = None

    def as_progress(self) -> dict[str, Any]:
        eta = None
        if self.total is not None and self.done_at_start is not None:
            fresh = self.done - self.done_at_start
            elapsed = time.monotonic() - self.started
            if fresh > 0 and elapsed > 0:
                eta = round((self.total - self.done) * elapsed / fresh, 1)
        return {"total": self.total, "done": self.done, "cache_hits": self.cache_hits,
                "errors": self.errors, "eta_seconds": eta}


@dataclass
class Park:
    """The visit is over: put the job aside until ``wake_at`` (a batch job)."""

    wake_at: float


Journal = RunLogWriter
"""Where a running job's run log goes, written in the background (see the worker)."""


@dataclass(frozen=True)
class Toolkit:
    """What the runners of one worker share."""

    db: Database
    settings: ServiceSettings
    store: FileStore
    jobs: JobStore
    """Reads: a source run, its run log and judgments, a token's spending."""
    queue: JobQueue
    """Writes of the run log outside the journal (a retry's seed, a batch job's plan)."""
    worker_id: str = "worker"


@dataclass
class RunContext:
    """What one run of one job gets from its worker."""

    worker_id: str
    live: Live
    """Its counters, which the worker's heartbeat stores as the job's progress."""
    limiter_for: Callable[[str], JobLimiter]
    """The job's share of an endpoint's rate-limit pool (stops granting on a drain)."""
    journal: Journal
    cancel_requested: Callable[[], bool]
    """Whether a cancel request was seen (a batch job acts on it between its steps)."""


class Runner(Protocol):
    """One kind of job (see :data:`._kinds.RUNNERS`)."""

    @property
    def progress(self) -> type[Live]:
        """The counters a run of this kind keeps (a class attribute of the runner)."""
        ...

    async def run(self, job: JobRow, context: RunContext) -> Outcome | Park: ...


class ThreadedRunner:
    """A job that makes no model calls: its CPU work (``_run``) in a thread, a library error
    its failure (exit 2, server paths taken out of the message)."""

    progress = Live

    def __init__(self, tools: Toolkit) -> None:
        self.db = tools.db
        self.store = tools.store
        self.jobs = tools.jobs

    async def run(self, job: JobRow, context: RunContext) -> Outcome:
        inputs = Inputs(self.db, self.store, job.project_id)
        try:
            return await asyncio.to_thread(self._run, job, inputs)
        except DatabaseUnavailable:
            raise
        except DSTJudgeError as exc:
            return Outcome(JobStatus.FAILED, 2, inputs.clean(str(exc)))

    def _run(self, job: JobRow, inputs: Inputs) -> Outcome:
        raise NotImplementedError
