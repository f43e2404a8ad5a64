"""The worker: claims jobs with leases, runs each with the runner of its kind, renews the leases
while they run, and hands them back on shutdown.

It runs in an event loop of its own (a thread of ``dst-judge serve``, or a worker process),
so that judging never stalls the API.
Every second a running job's heartbeat renews its lease and stores its progress; a replica
killed with ``kill -9`` stops renewing, its leases expire, and another worker takes the jobs
over and resumes them from the run log kept in the database.

Shutdown (SIGTERM) drains: no new claims, no new requests out of running jobs (their shared
limiter stops granting), calls in flight get ``grace_seconds`` to finish and be logged, then the
jobs are released back to the queue for the next worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..._errors import DatabaseUnavailable
from ..._tasks import within
from ...model import load_prices, price_and_counter
from ..db import Database, JobRow, ServiceSettings, now, workers
from ..jobs import JobStatus, JobStore
from ..ledger import EndpointPool, JobLimiter, purge_ledger
from ..storage import FileStore
from ._journal import CallJournal
from ._kinds import build_runners, runner_for
from ._lease import JobQueue, Records
from ._listen import Listener
from ._runners import Live, Outcome, Park, RunContext, Toolkit

log = logging.getLogger("dst_judge.service")
RETENTION_EVERY = 600.0
COUNTERS = ("claims", "lease_expiries", "retries", "given_up")
"""What a worker tallies for ``/metrics`` (see :class:`JobQueue`)."""


def new_worker_id(pid: int | None = None, suffix: str | None = None) -> str:
    """``host:pid:hex``: the process that runs the worker, and a tag of this worker."""
    return f"{socket.gethostname()}:{pid or os.getpid()}:{suffix or secrets.token_hex(3)}"


@dataclass
class Running:
    job: JobRow
    task: asyncio.Task[Any] | None = None
    live: Live = field(default_factory=Live)
    limiters: list[JobLimiter] = field(default_factory=list)
    reason: str | None = None  # why the task was cancelled: cancel | lost | drain
    cancel_seen: bool = False  # a cancel request a batch job acts on itself, between steps

    @property
    def in_flight(self) -> int:
        return sum(limiter.in_flight for limiter in self.limiters)


class Worker:
    """Runs up to ``settings.job_slots`` jobs at once for this replica."""

    def __init__(self, db: Database, settings: ServiceSettings, store: FileStore,
                 jobs: JobStore, worker_id: str | None = None) -> None:
        self.db = db
        self.settings = settings
        self.store = store
        self.id = worker_id or new_worker_id()
        self.queue = JobQueue(db, settings.max_attempts)
        self.shared_counters: Any = None
        """Where a worker process publishes its tallies for its parent (an array of
        :data:`COUNTERS`)."""
        self.draining = threading.Event()
        self.running: dict[str, Running] = {}
        self.pools = {name: EndpointPool(db, name, rpm=ep.rpm, tpm=ep.tpm)
                      for name, ep in settings.all_endpoints().items()}
        self.runners, self.evaluator = build_runners(
            Toolkit(db, settings, store, jobs, self.queue, self.id))
        self.finished = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._last_retention = 0.0
        self.parent: int | None = None
        self.journal = CallJournal(self.queue)
        self.paused: dict[str, Any] = {}
        """Jobs stopped by a database outage, taken up again (same lease, same attempt) when
        it is back, unless another worker took them over meanwhile."""
        self._outage_since: float | None = None

    # --- lifecycle (called from the API thread) -----------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="dst-judge-worker", daemon=True)
        self._thread.start()

    def drain(self) -> None:
        """Stop claiming and stop new sends (thread-safe; SIGTERM calls this at once)."""
        self.draining.set()
        if self._loop is not None and self._wake is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._wake.set)

    def stop(self, timeout: float | None = None) -> None:
        """Drain and wait for the worker thread to hand back its jobs."""
        self.drain()
        if self._thread is not None:
            self._thread.join(timeout if timeout is not None
                              else self.settings.grace_seconds + 15)

    def nudge(self) -> None:
        """A job was queued: look now instead of at the next poll."""
        if self._loop is not None and self._wake is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._wake.set)

    def status(self) -> dict[str, Any]:
        return {"id": self.id, "mode": "thread", "alive": self._thread is not None
                and self._thread.is_alive(), "running_jobs": len(self.running),
                "draining": self.draining.is_set()}

    def in_flight(self) -> int:
        return sum(r.in_flight for r in self.running.values())

    def pool_grants(self) -> dict[str, int]:
        return {name: pool.granted for name, pool in self.pools.items()}

    # --- the loop ------------------------------------------------------------------------------

    def _main(self) -> None:
        asyncio.run(self.run())

    async def run(self, wake_fd: int | None = None) -> None:
        """Claim and run jobs until drained; ``wake_fd`` is a pipe whose bytes mean "a job
        was queued" (the API process nudging a worker process)."""
        self._loop = asyncio.get_running_loop()
        # Every call in flight of every job waits on the database in a thread (ledger claim,
        # reply, lookup): asyncio's default pool (cores + 4 threads) would queue them behind
        # each other. Threads start only when needed; asyncio.run shuts the pool down.
        self._loop.set_default_executor(ThreadPoolExecutor(
            max_workers=min(256, 8 * self.settings.job_slots + 8),
            thread_name_prefix="dst-judge-worker"))
        self._wake = asyncio.Event()
        if wake_fd is not None:
            self._loop.add_reader(wake_fd, self._woken, wake_fd)
        while not self.draining.is_set() and not await self._database(self._register):
            await self._pause_for_database()
        await asyncio.to_thread(self._load_tokenizers)
        self.journal = CallJournal(self.queue)
        beat = asyncio.create_task(self._heartbeat())
        writer = asyncio.create_task(self.journal.run())
        listener = None
        if self.db.is_postgres and self.settings.listen:
            listener = Listener(self.db.url, self.nudge)
            listener.start()
        try:
            while not self.draining.is_set():
                claimed = False
                try:
                    await self._take_up_paused()
                    if len(self.running) < self.settings.job_slots:
                        row = await asyncio.to_thread(self.queue.claim, self.id,
                                                      self.settings.lease_seconds)
                        self._publish()
                        self.database_back()
                        if row is not None:
                            self._launch(row)
                            claimed = True
                except DatabaseUnavailable as exc:
                    self.database_lost(exc)
                    await self._pause_for_database()
                    continue
                if claimed:
                    continue
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    await within(self._wake.wait(), self.settings.poll_seconds)
                await self._housekeeping()
            await self._drain()
        finally:
            stopping = time.monotonic()
            if listener is not None:
                await asyncio.to_thread(listener.stop)
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
            self.journal.close()  # it writes what is queued, then ends (bounded below)
            await asyncio.wait([writer], timeout=10)
            if not writer.done():  # still retrying a write the database refuses
                writer.cancel()
                await asyncio.wait([writer], timeout=1)
            with contextlib.suppress(Exception):
                await self.evaluator.aclose()
            await asyncio.to_thread(self._unregister)
            log.info("worker %s stopped (%.1f s after its jobs were handed back)", self.id,
                     time.monotonic() - stopping)

    def _load_tokenizers(self) -> None:
        """Load the vocabularies of the endpoints' default models (and the fallback one) now:
        each run's summary counts its prompts' tokens, and the first load in a process holds
        the interpreter for about a second, which would stall every job (and the API) then."""
        for endpoint in self.settings.all_endpoints().values():
            try:
                prices = load_prices(endpoint.prices)
                for model in {endpoint.default_model or "", ""}:
                    price_and_counter(model, prices)[1].count("")
            except Exception as exc:  # a missing price table fails the jobs themselves
                log.warning("could not load a tokenizer ahead of the jobs: %s", exc)

    def _woken(self, fd: int) -> None:
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b"!"
        if not data and self.parent is not None:
            # the pipe's other end closed: the process that started this worker died
            # (kill -9); die as it did, handing nothing back
            os._exit(1)
        if self._wake is not None:
            self._wake.set()

    def _launch(self, row: JobRow) -> None:
        mine = self.running.get(row.id)
        if mine is not None and mine.task is not None and not mine.task.done():
            # our own job, whose lease lapsed while we were busy (a stalled heartbeat): the
            # claim renewed it; a second task would send (or submit) everything twice
            log.warning("job %s: lease lapsed while this worker ran it; kept running", row.id)
            return
        running = Running(row)
        self.running[row.id] = running
        running.task = asyncio.create_task(self._execute(running))

    async def _drain(self) -> None:
        deadline = time.monotonic() + self.settings.grace_seconds
        while (any(r.in_flight for r in self.running.values())
               and time.monotonic() < deadline):
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)  # replies that just arrived get parsed and logged
        for running in list(self.running.values()):
            if running.task is not None and not running.task.done():
                running.reason = running.reason or "drain"
                running.task.cancel()
        tasks = [r.task for r in self.running.values() if r.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=max(1.0, deadline - time.monotonic()) + 5)

    # --- one job -------------------------------------------------------------------------------

    def _limiter(self, running: Running, endpoint: str) -> JobLimiter:
        limiter = JobLimiter(self.pools.get(endpoint), running.job.id, self.draining)
        running.limiters.append(limiter)
        return limiter

    async def _execute(self, running: Running) -> None:
        job = running.job
        log.info("job %s (%s) claimed, attempt %d", job.id, job.kind, job.attempts)
        outcome: Outcome | Park
        runner = runner_for(self.runners, job)
        try:
            if runner is None:
                outcome = Outcome(JobStatus.FAILED, 2, f"this server cannot run {job.kind!r} jobs "
                                  f"in mode {job.mode!r}")
            else:
                running.live = runner.progress()
                outcome = await runner.run(job, RunContext(
                    self.id, running.live, lambda endpoint: self._limiter(running, endpoint),
                    self.journal, lambda: bool(job.cancel_requested) or running.cancel_seen))
        except asyncio.CancelledError:
            try:
                await self._cancelled(running)
            except DatabaseUnavailable as exc:  # its lease lapses; another worker takes it
                self.database_lost(exc)
            return
        except DatabaseUnavailable as exc:
            self._pause(job, exc)
            return
        except Exception:
            log.exception("job %s failed with an internal error", job.id)
            outcome = Outcome(JobStatus.FAILED, None, "internal error in the server (see its log)")
        finally:
            self.running.pop(job.id, None)
        try:
            await self._conclude(job.id, running.live, outcome)
        except DatabaseUnavailable as exc:  # its outcome is lost: run it again when back
            self._pause(job, exc)

    async def _conclude(self, job_id: str, live: Live, outcome: Outcome | Park) -> None:
        if isinstance(outcome, Park):
            await self._park(job_id, live, outcome.wake_at)
            return
        records = await self.journal.take(job_id)
        if outcome.records is not None:
            records = (records[0] + outcome.records[0], records[1] + outcome.records[1])
        done = await asyncio.to_thread(self._finish, job_id, outcome, self._progress(live),
                                       live.cost, live.tokens, records)
        self.finished += 1
        log.info("job %s %s (exit %s)%s", job_id, outcome.status, outcome.exit_code,
                 "" if done else " but another worker owns it now")

    # --- database outages ----------------------------------------------------------------------

    def database_lost(self, exc: DatabaseUnavailable) -> None:
        """Note an outage: one log line when it starts (and one when it ends), no traceback."""
        if self._outage_since is None:
            self._outage_since = time.monotonic()
            log.warning("database unavailable (%s): running jobs pause, claims wait; "
                        "reconnecting", exc.detail)

    def database_back(self) -> None:
        if self._outage_since is not None:
            log.warning("database reachable again after %.1f s (reconnected)%s",
                        time.monotonic() - self._outage_since,
                        f"; {len(self.paused)} paused job(s) continue" if self.paused else "")
            self._outage_since = None

    async def _database(self, action: Any) -> bool:
        """Run a database action in a thread; False (and the outage noted) when there is no
        database."""
        try:
            await asyncio.to_thread(action)
        except DatabaseUnavailable as exc:
            self.database_lost(exc)
            return False
        self.database_back()
        return True

    async def _pause_for_database(self) -> None:
        """Wait a second (or until drained) before trying the database again."""
        if self._wake is not None:
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await within(self._wake.wait(), 1.0)

    def _pause(self, job: JobRow, exc: DatabaseUnavailable) -> None:
        self.database_lost(exc)
        self.paused[job.id] = job
        log.debug("job %s paused for the database", job.id)

    async def _take_up_paused(self) -> None:
        """After an outage: keep the jobs it paused (same lease and attempt), unless another
        worker took them over meanwhile. Raises DatabaseUnavailable while it lasts."""
        for job_id in list(self.paused):
            if len(self.running) >= self.settings.job_slots:
                return
            row = await asyncio.to_thread(self.queue.keep, job_id, self.id,
                                          self.settings.lease_seconds)
            self.database_back()
            self.paused.pop(job_id, None)
            if row is None:
                log.info("job %s: another worker took it over during the outage", job_id)
            else:
                log.info("job %s continues after the outage (attempt %d)", job_id,
                         row.attempts)
                self._launch(row)

    def _finish(self, job_id: str, outcome: Outcome, progress: dict[str, Any], cost: float,
                tokens: int, records: Records) -> bool:
        """The end of a job in one thread hop: its files, then its outcome and the last records
        of its run log in one transaction."""
        if outcome.wrap_up is not None:
            try:
                outcome.wrap_up()
            except Exception:
                log.exception("job %s: preparing its results failed", job_id)
                outcome = Outcome(JobStatus.FAILED, None,
                                  "internal error in the server (see its log)")
        return self.queue.finish(job_id, self.id, status=outcome.status,
                                exit_code=outcome.exit_code, error=outcome.error,
                                summary=outcome.summary, rows=outcome.rows,
                                files_out=outcome.artifacts, progress=progress, cost=cost,
                                tokens_used=tokens, records=records)

    async def _park(self, job_id: str, live: Live, wake_at: float) -> None:
        """A batch job's visit is over: it waits for its batches without a worker."""
        parked = await asyncio.to_thread(
            self.queue.park, job_id, self.id, wake_at, progress=self._progress(live),
            cost=live.cost, tokens_used=live.tokens)
        log.info("job %s waits for its batches%s", job_id,
                 "" if parked else " (another worker owns it now)")

    def _progress(self, live: Live) -> dict[str, Any]:
        return {**live.as_progress(), "worker": self.id}

    async def _cancelled(self, running: Running) -> None:
        job, live = running.job, running.live
        with contextlib.suppress(Exception):
            await within(self.journal.flush(), 10)
        if running.reason == "cancel":
            await asyncio.to_thread(self.queue.finish, job.id, self.id,
                                    status=JobStatus.CANCELLED, exit_code=None,
                                    error="cancelled on request",
                                    progress=live.as_progress(), cost=live.cost,
                                    tokens_used=live.tokens)
            log.info("job %s cancelled", job.id)
        elif running.reason == "drain" and job.mode == "batch":
            await self._park(job.id, live, now())  # its batches stay ours: never "queued"
        elif running.reason == "drain":
            await asyncio.to_thread(self.queue.release, job.id, self.id, live.as_progress())
            log.info("job %s handed back to the queue (shutdown)", job.id)
        else:
            log.warning("job %s: lease lost; another worker owns it now", job.id)

    async def _heartbeat(self) -> None:
        interval = min(1.0, self.settings.lease_seconds / 3)
        while True:
            await asyncio.sleep(interval)
            running = dict(self.running)
            if running:
                updates = {job_id: (self._progress(r.live), r.live.cost, r.live.tokens)
                           for job_id, r in running.items()}
                try:
                    ours, cancels = await asyncio.to_thread(
                        self.queue.renew_many, self.id, self.settings.lease_seconds, updates)
                except DatabaseUnavailable as exc:  # try again at the next beat
                    self.database_lost(exc)
                    ours, cancels = set(running), set()
                except Exception:
                    log.exception("lease renewal failed")
                    ours, cancels = set(running), set()
                for job_id, item in running.items():
                    task = item.task
                    if task is None or task.done():
                        continue
                    if job_id not in ours:
                        item.reason = "lost"
                        task.cancel()
                    elif job_id in cancels and item.job.mode == "batch":
                        item.cancel_seen = True  # it cancels its batches, then itself
                    elif job_id in cancels:
                        item.reason = "cancel"
                        task.cancel()
            if self.parent is not None and os.getppid() != self.parent:
                os._exit(1)  # our replica died (kill -9): die as it did, handing nothing back
            self._publish()
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self._beat)

    def _publish(self) -> None:
        if self.shared_counters is not None:
            for index, name in enumerate(COUNTERS):
                self.shared_counters[index] = self.queue.counts[name]

    def tallies(self) -> dict[str, int]:
        """This worker's claims, lease expiries, retries and given-up jobs."""
        return {name: self.queue.counts[name] for name in COUNTERS}

    async def _housekeeping(self) -> None:
        days = self.settings.retention_days
        if days is None or time.monotonic() - self._last_retention < RETENTION_EVERY:
            return
        self._last_retention = time.monotonic()
        try:
            removed = await asyncio.to_thread(self.queue.purge, now() - days * 86400)
            for job_id in removed:
                shutil.rmtree(self.evaluator.run_dir(job_id), ignore_errors=True)
            if removed:
                log.info("retention: deleted %d finished job(s) older than %g days",
                         len(removed), days)
        except Exception as exc:  # the next pass tries again; jobs run on meanwhile
            log.warning("retention: could not delete old jobs: %s", exc)
        try:
            replies = await asyncio.to_thread(purge_ledger, self.db, now() - days * 86400)
            if replies:
                log.info("retention: deleted %d ledger row(s) older than %g days", replies,
                         days)
        except Exception as exc:
            log.warning("retention: could not delete old ledger rows: %s", exc)

    # --- the workers table ----------------------------------------------------------------------

    def _register(self) -> None:
        with self.db.write() as conn:
            conn.execute(workers.insert().values(id=self.id, host=socket.gethostname(),
                                                 pid=os.getpid(), started_at=now(),
                                                 heartbeat_at=now(), draining=False))

    def _beat(self) -> None:
        with self.db.write() as conn:
            conn.execute(workers.update().where(workers.c.id == self.id)
                         .values(heartbeat_at=now(), draining=self.draining.is_set()))
            conn.execute(workers.delete().where(workers.c.heartbeat_at < now() - 3600))

    def _unregister(self) -> None:
        with contextlib.suppress(Exception), self.db.write() as conn:
            conn.execute(workers.delete().where(workers.c.id == self.id))
