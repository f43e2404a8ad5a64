"""The service object: what every request handler and the web interface reach through
``app.state.service`` (the database, the stores, the worker), built once per app."""

from __future__ import annotations

from typing import Any, Protocol

from ._auth import TokenBook
from ._db import Database
from ._files import FileStore
from ._jobs import JobStore
from ._labels import LabelStore
from ._metrics import ServiceMetrics
from ._settings import ServiceSettings


class WorkerControl(Protocol):
    """What the API needs of a worker, whether it runs in a thread or in child processes."""

    def start(self) -> None: ...

    def drain(self) -> None: ...

    def stop(self) -> None: ...

    def nudge(self) -> None: ...

    def status(self) -> dict[str, Any]: ...


class Service:
    """Everything a request handler needs, built once per app."""

    def __init__(self, settings: ServiceSettings, *, run_worker: bool = True) -> None:
        self.settings = settings
        self.db = Database(settings.db_url)
        self.files = FileStore(self.db, settings.data_dir, max_upload=settings.max_upload_bytes,
                               max_unpacked=settings.max_unpacked_bytes,
                               caps=settings.upload_caps())
        self.tokens = TokenBook(self.db)
        self.jobs = JobStore(self.db, self.tokens)
        self.labels = LabelStore(self.db)
        self.metrics = ServiceMetrics(self)
        self.run_worker = run_worker and settings.job_slots > 0
        self.worker: WorkerControl | None = None
        self.closing = False

    def start(self) -> None:
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.db.migrate()
        if self.run_worker:
            # imported here: an API-only replica never loads the model client and the runners
            from .queue import Worker, WorkerProcesses

            worker: WorkerControl
            if self.settings.worker_mode == "process":
                worker = WorkerProcesses(self.settings)
            else:
                worker = Worker(self.db, self.settings, self.files, self.jobs)
            self.worker = worker
            worker.start()

    def nudge(self) -> None:
        """A job was queued: wake the worker rather than wait for its next poll."""
        if self.worker is not None:
            self.worker.nudge()

    def drain(self) -> None:
        """SIGTERM: stop claiming and sending at once (the rest happens in :meth:`stop`)."""
        self.closing = True
        if self.worker is not None:
            self.worker.drain()

    def stop(self) -> None:
        self.closing = True
        if self.worker is not None:
            self.worker.stop()
        self.db.dispose()
