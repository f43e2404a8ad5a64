"""The worker in processes of their own (the default of ``dst-judge serve``, and what
``dst-judge worker`` runs), supervised: a worker process that dies (``kill -9``, a crash, the
kernel's OOM killer) is replaced by a new one at once; the dead one's jobs are taken over when
their leases expire. One that keeps dying young is restarted after a growing pause, so a
worker that cannot start (no database) does not spin."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import secrets
import signal
import threading
import time
from collections import Counter
from typing import Any

from ..auth import log_to_stderr
from ..db import Database, ServiceSettings, describe_database, private_folder
from ..jobs import JobStore
from ..storage import FileStore
from ._worker import COUNTERS, Worker, new_worker_id

log = logging.getLogger("dst_judge.service")
YOUNG_SECONDS = 5.0
"""A worker process that dies younger than this is restarted after a pause (1 s, doubling up
to 30 s); an older one at once."""
_SPAWN = multiprocessing.get_context("forkserver")
_SPAWN.set_forkserver_preload(["judge.service.queue"])
"""Worker processes are forked from a server process that imported the library once: a
replacement starts in milliseconds, not the seconds (on a busy machine, a minute) that a
fresh interpreter's imports take. The server and its children die with this process."""


class WorkerProcess:
    """The worker in a child process (the default of ``dst-judge serve``): judging and the
    API never compete for one interpreter lock, so the API answers fast under a full queue.

    The child dies with the replica, so ``kill -9`` of a replica kills its worker too, as a
    crashed machine would: the replica holds the only writing end of the child's wake-up
    pipe, and the child exits the moment that end closes (the fork server, its parent, lives
    as long as any of its children; ``PR_SET_PDEATHSIG`` and a parent check every heartbeat
    cover the fork server's own death).
    SIGTERM to the parent drains the child (same grace period as a thread worker).
    """

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self.id = ""
        """``host:pid:hex`` with the child's pid, known once it started."""
        self.draining = threading.Event()
        self.counters: Any = _SPAWN.RawArray("q", len(COUNTERS))
        """This process's tallies (see :data:`COUNTERS`), written by the child at each
        heartbeat and read by ``/metrics``."""
        self.started_at = time.monotonic()
        self._process: Any = None
        self._wake: Any = None

    def start(self) -> None:
        # a pipe the child inherits (a bare os.pipe() descriptor would not survive spawn)
        read, write = _SPAWN.Pipe(duplex=False)
        self.started_at = time.monotonic()
        suffix = secrets.token_hex(3)
        self._process = _SPAWN.Process(target=_process_main, name="dst-judge-worker",
                                       args=(self.settings, suffix, read, self.counters),
                                       daemon=False)
        self._process.start()
        self.id = new_worker_id(self._process.pid, suffix)
        read.close()
        os.set_blocking(write.fileno(), False)
        self._wake = write

    def nudge(self) -> None:
        if self._wake is not None:
            with contextlib.suppress(OSError, ValueError):
                os.write(self._wake.fileno(), b"!")

    def exited(self) -> bool:
        """Whether the child was started and is gone."""
        return self._process is not None and self._process.exitcode is not None

    def tallies(self) -> Counter[str]:
        return Counter(dict(zip(COUNTERS, list(self.counters), strict=True)))

    def drain(self) -> None:
        self.draining.set()
        process = self._process
        if process is not None and process.pid is not None and process.is_alive():
            with contextlib.suppress(OSError):
                os.kill(process.pid, signal.SIGTERM)

    def stop(self, timeout: float | None = None) -> None:
        self.drain()
        process = self._process
        if process is not None:
            process.join(timeout if timeout is not None else self.settings.grace_seconds + 15)
            if process.is_alive():
                process.kill()
                process.join(5)
        if self._wake is not None:
            with contextlib.suppress(OSError):
                self._wake.close()
            self._wake = None

    def status(self) -> dict[str, Any]:
        process = self._process
        return {"id": self.id, "mode": "process",
                "pid": None if process is None else process.pid,
                "alive": bool(process is not None and process.is_alive()),
                "draining": self.draining.is_set()}


class WorkerProcesses:
    """``worker_process_count`` worker processes sharing the replica's job slots (as evenly as
    they divide); each claims from the queue like a replica of its own would. A supervising
    thread replaces a process that dies."""

    def __init__(self, settings: ServiceSettings) -> None:
        count = settings.worker_process_count
        share, extra = divmod(settings.job_slots, count)
        self.processes = [WorkerProcess(settings.model_copy(
            update={"job_slots": share + (1 if index < extra else 0)})) for index in range(count)]
        self.draining = threading.Event()
        self.restarts = 0
        self._retired: Counter[str] = Counter()
        """Tallies of the processes that died."""
        self._pauses = [0.0] * count
        self._supervisor: threading.Thread | None = None

    def start(self) -> None:
        for process in self.processes:
            process.start()
        self._supervisor = threading.Thread(target=self._supervise, daemon=True,
                                            name="dst-judge-supervisor")
        self._supervisor.start()

    def _supervise(self) -> None:
        while not self.draining.wait(0.2):
            for index, process in enumerate(list(self.processes)):
                if process.exited() and not self.draining.is_set():
                    self._replace(index, process)

    def _replace(self, index: int, dead: WorkerProcess) -> None:
        """A new process in the dead one's slots (after a pause if it died young)."""
        lived = time.monotonic() - dead.started_at
        pause = self._pauses[index] = (0.0 if lived >= YOUNG_SECONDS
                                       else min(30.0, max(1.0, 2 * self._pauses[index])))
        log.warning("worker process %s (pid %s) died (exit code %s) after %.1f s; starting "
                    "another%s", dead.id, dead.status()["pid"], dead._process.exitcode, lived,
                    f" in {pause:g} s" if pause else "")
        if pause and self.draining.wait(pause):
            return
        self._retired.update(dead.tallies())
        dead.stop(0)
        fresh = WorkerProcess(dead.settings)
        fresh.start()
        self.processes[index] = fresh
        self.restarts += 1

    def tallies(self) -> Counter[str]:
        """Claims, lease expiries, retries and given-up jobs of every process, the dead too;
        and ``restarts``."""
        total = Counter(self._retired)
        for process in self.processes:
            total.update(process.tallies())
        total["restarts"] = self.restarts
        return total

    def nudge(self) -> None:
        for process in self.processes:
            process.nudge()

    def drain(self) -> None:
        self.draining.set()
        for process in self.processes:
            process.drain()

    def stop(self, timeout: float | None = None) -> None:
        self.drain()  # every child drains at once; then each is waited for
        if self._supervisor is not None:
            self._supervisor.join(5)
        for process in self.processes:
            process.stop(timeout)

    def status(self) -> dict[str, Any]:
        children = [p.status() for p in self.processes]
        base = {**children[0], "restarts": self.restarts,
                "alive": all(c["alive"] for c in children), "draining": self.draining.is_set()}
        if len(children) == 1:
            return base
        return {**base, "pid": None, "processes": children}


def _process_main(settings: ServiceSettings, suffix: str, wake: Any, counters: Any) -> None:
    """Entry point of the worker process: its worker id names its own pid."""
    worker_id = new_worker_id(os.getpid(), suffix)
    _die_with_parent()
    log_to_stderr()
    db = Database(settings.db_url)
    store = FileStore(db, settings.data_dir, max_upload=settings.max_upload_bytes,
                      max_unpacked=settings.max_unpacked_bytes)
    worker = Worker(db, settings, store, JobStore(db), worker_id=worker_id)
    worker.parent = os.getppid()  # the fork server, whose life is this replica's
    worker.shared_counters = counters
    early = _note_signals([])  # signals before the loop runs
    try:
        asyncio.run(_run_until_drained(worker, wake.fileno(), early))
    finally:
        db.dispose()
    log.info("worker process %s exits", worker_id)


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _note_signals(into: list[int]) -> list[int]:
    """SIGTERM and SIGINT are appended to ``into`` and nothing else: a Python handler runs
    between two bytecodes of the main thread, so one that took a lock (``Event.set()``) could
    wait for ever on a lock the interrupted frame holds."""
    for signum in _STOP_SIGNALS:
        signal.signal(signum, lambda received, _frame: into.append(received))
    return into


async def _run_until_drained(worker: Worker, wake_fd: int, early: list[int]) -> None:
    """Run the worker with the loop's own signal handling: SIGTERM drains it as a callback of
    the loop. A drain inside a Python signal handler could be interrupted by a second SIGTERM
    (a replica's stop sends two), and the second drain's ``Event.set()`` then waited for ever
    on the lock the first one held."""
    loop = asyncio.get_running_loop()
    for signum in _STOP_SIGNALS:
        loop.add_signal_handler(signum, worker.drain)
    _quiet_wakeup()
    if early:
        worker.drain()
    try:
        await worker.run(wake_fd)
    finally:
        # later signals are noted and ignored: closing the loop would otherwise restore the
        # default action (a late SIGTERM kills the process before it exits by itself) after
        # closing the descriptor those signals are written to
        for signum in _STOP_SIGNALS:
            loop.remove_signal_handler(signum)
        _note_signals(early)


def _quiet_wakeup() -> None:
    """A burst of SIGTERMs can fill the loop's wake-up socket; Python then writes a traceback
    per signal to stderr (the log). A full socket loses nothing the drain needs (one signal
    drains), so the loop's descriptor is kept with that warning off; the stop signals are held
    back while it is swapped, so none arrives in between and goes unseen."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        fd = signal.set_wakeup_fd(-1)
        signal.set_wakeup_fd(fd, warn_on_full_buffer=False)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (no-op elsewhere)."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def run_workers(settings: ServiceSettings, *, max_seconds: float | None = None,
                log_level: str = "info") -> int:
    """``dst-judge worker``: this process supervises ``worker_process_count`` worker processes
    that take jobs from the database, and serves no HTTP. SIGTERM or SIGINT drains them (as a
    replica's drain: calls in flight get the grace period, then their jobs go back to the
    queue); so does ``max_seconds``. Returns the exit status."""
    log_to_stderr(log_level)
    private_folder(settings.data_dir)
    db = Database(settings.db_url)
    try:
        db.migrate()
    finally:
        db.dispose()
    signals = _note_signals([])
    workers = WorkerProcesses(settings)
    workers.start()
    log.info("dst-judge worker: %d process(es), %d job slot(s), queue in %s",
             len(workers.processes), settings.job_slots,
             describe_database(settings.db_url))
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    while not signals:
        if deadline is not None and time.monotonic() >= deadline:
            break
        time.sleep(0.2)  # the loop sees a signal within 0.2 s of its handler
    log.info("dst-judge worker: draining")
    began = time.monotonic()
    workers.stop()
    log.info("dst-judge worker: stopped (%.1f s)", time.monotonic() - began)
    return 0
