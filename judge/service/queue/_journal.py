"""The run logs of a worker's jobs, copied to the database in the background."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from ..._tasks import within
from ..db import connection_lost
from ._lease import JobQueue, Records

log = logging.getLogger("dst_judge.service")


class CallJournal:
    """The run logs of this worker's jobs, copied to the database in the background: a job's
    finished call is queued at once and written within a few milliseconds, batched with the
    other jobs' calls in one transaction, so the event loop never waits on the database.

    After each write it gathers for ``linger`` seconds (unless someone waits for a flush), so
    that a busy worker's calls take a few write transactions a second, not one per call: they
    compete for SQLite's one write lock with the ledger's claims and replies."""

    def __init__(self, queue: JobQueue, linger: float = 0.1) -> None:
        self.queue = queue
        self.linger = linger
        self._urgent = asyncio.Event()
        self._calls: list[tuple[str, dict[str, Any]]] = []
        self._manifests: list[tuple[str, dict[str, Any]]] = []
        self._pending = asyncio.Event()
        self._written = asyncio.Condition()
        self._sequence = 0
        self._done = 0
        self._writing: set[str] = set()
        """Jobs with records in the batch being written."""
        self._closing = False

    def close(self) -> None:
        """Ask the writer to end once what is queued is written. The writer is not cancelled:
        before Python 3.12, ``asyncio.wait_for`` swallowed a cancellation that arrived just as
        its wait ended (a flush's wake-up), and the writer then waited for ever, holding up a
        worker's stop until its join gave up (35 s, and the worker never unregistered). Its
        waits now go through :func:`judge._tasks.within`, which never swallows one."""
        self._closing = True
        self._pending.set()
        self._urgent.set()

    def call(self, job_id: str, record: dict[str, Any]) -> None:
        self._calls.append((job_id, record))
        self._sequence += 1
        self._pending.set()

    def manifest(self, job_id: str, manifest: dict[str, Any]) -> None:
        self._manifests.append((job_id, manifest))
        self._sequence += 1
        self._pending.set()

    async def flush(self) -> None:
        """Wait until everything queued so far is in the database."""
        target = self._sequence
        self._urgent.set()
        async with self._written:
            await self._written.wait_for(lambda: self._done >= target)

    async def take(self, job_id: str) -> Records:
        """A finished job's records not written yet, taken out of the queue so that they go
        in the transaction that stores the job's outcome (one write, no wait for the writer);
        records of the job already in a batch being written are waited for."""
        async with self._written:
            await self._written.wait_for(lambda: job_id not in self._writing)
        manifests = [item for item in self._manifests if item[0] == job_id]
        calls = [item for item in self._calls if item[0] == job_id]
        if manifests:
            self._manifests = [item for item in self._manifests if item[0] != job_id]
        if calls:
            self._calls = [item for item in self._calls if item[0] != job_id]
        return manifests, calls

    async def run(self) -> None:
        while not (self._closing and not self._calls and not self._manifests):
            await self._pending.wait()
            self._pending.clear()
            self._urgent.clear()  # what any flush so far waits for is in this batch
            calls, self._calls = self._calls, []
            manifests, self._manifests = self._manifests, []
            target = self._sequence
            self._writing = {job_id for job_id, _ in calls} | {job_id for job_id, _ in manifests}
            try:
                if calls or manifests:
                    await asyncio.to_thread(self.queue.record_batch, manifests, calls)
            except Exception as exc:
                if not connection_lost(exc):  # an outage is the worker's to report, once
                    log.exception("writing %d logged call(s) to the database failed; "
                                  "retrying", len(calls))
                self._calls[:0], self._manifests[:0] = calls, manifests
                self._pending.set()
                async with self._written:
                    self._writing = set()
                    self._written.notify_all()
                await asyncio.sleep(0.5)
                continue
            async with self._written:
                self._done = target
                self._writing = set()
                self._written.notify_all()
            with contextlib.suppress(TimeoutError):  # a flush asked meanwhile: no wait
                await within(self._urgent.wait(), self.linger)
