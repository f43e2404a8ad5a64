"""The worker in processes of their own (the default of ``dst-judge serve``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from typing import Any

from .._db import Database
from .._files import FileStore
from .._jobs import JobStore
from .._settings import ServiceSettings
from ._worker import Worker, new_worker_id


class WorkerProcess:
    """The worker in a child process (the default of ``dst-judge serve``): judging and the
    API never compete for one interpreter lock, so the API answers fast under a full queue.

    The child dies with its parent (``PR_SET_PDEATHSIG`` on Linux, and a parent check every
    heartbeat), so ``kill -9`` of a replica kills its worker too, as a crashed machine would.
    SIGTERM to the parent drains the child (same grace period as a thread worker).
    """

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self.id = new_worker_id()
        self.draining = threading.Event()
        self._process: Any = None
        self._wake_write: int | None = None

    def start(self) -> None:
        import multiprocessing

        read, write = os.pipe()
        os.set_blocking(write, False)
        context = multiprocessing.get_context("spawn")
        self._process = context.Process(target=_process_main, name="dst-judge-worker",
                                        args=(self.settings, self.id, os.getpid(), read),
                                        daemon=False)
        self._process.start()
        os.close(read)
        self._wake_write = write

    def nudge(self) -> None:
        if self._wake_write is not None:
            with contextlib.suppress(OSError):
                os.write(self._wake_write, b"!")

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
        if self._wake_write is not None:
            with contextlib.suppress(OSError):
                os.close(self._wake_write)
            self._wake_write = None

    def status(self) -> dict[str, Any]:
        process = self._process
        return {"id": self.id, "mode": "process",
                "pid": None if process is None else process.pid,
                "alive": bool(process is not None and process.is_alive()),
                "draining": self.draining.is_set()}


class WorkerProcesses:
    """``worker_process_count`` worker processes sharing the replica's job slots (as evenly as
    they divide); each claims from the queue like a replica of its own would."""

    def __init__(self, settings: ServiceSettings) -> None:
        count = settings.worker_process_count
        share, extra = divmod(settings.job_slots, count)
        self.processes = [WorkerProcess(settings.model_copy(
            update={"job_slots": share + (1 if index < extra else 0)})) for index in range(count)]
        self.draining = threading.Event()

    def start(self) -> None:
        for process in self.processes:
            process.start()

    def nudge(self) -> None:
        for process in self.processes:
            process.nudge()

    def drain(self) -> None:
        self.draining.set()
        for process in self.processes:
            process.drain()

    def stop(self, timeout: float | None = None) -> None:
        self.drain()  # every child drains at once; then each is waited for
        for process in self.processes:
            process.stop(timeout)

    def status(self) -> dict[str, Any]:
        first = self.processes[0].status()
        if len(self.processes) == 1:
            return first
        children = [p.status() for p in self.processes]
        return {"id": first["id"], "mode": "process", "processes": children,
                "alive": all(c["alive"] for c in children),
                "draining": self.draining.is_set()}


def _process_main(settings: ServiceSettings, worker_id: str, parent: int, wake_fd: int) -> None:
    """Entry point of the worker process."""
    _die_with_parent()
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    db = Database(settings.db_url)
    store = FileStore(db, settings.data_dir, max_upload=settings.max_upload_bytes,
                      max_unpacked=settings.max_unpacked_bytes)
    worker = Worker(db, settings, store, JobStore(db), worker_id=worker_id)
    worker.parent = parent
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: worker.drain())
    try:
        asyncio.run(worker.run(wake_fd))
    finally:
        db.dispose()


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (no-op elsewhere)."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
