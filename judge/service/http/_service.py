"""The service object: what every request handler and the web interface reach through
``app.state.service`` (the database, the stores, the worker), built once per app."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..auth import Principal, TokenBook
from ..db import Database, ServiceSettings, private_folder
from ..jobs import (
    JobRequest,
    JobSpec,
    JobStore,
    PublicJob,
    check_estimate_job,
    check_job,
    check_retry,
)
from ..storage import DecisionStore, FileStore, LabelStore, ReviewSamples, job_warnings
from ._metrics import ServiceMetrics


class WorkerControl(Protocol):
    """What the API needs of a worker, whether it runs in a thread or in child processes."""

    def start(self) -> None: ...

    def drain(self) -> None: ...

    def stop(self) -> None: ...

    def nudge(self) -> None: ...

    def status(self) -> dict[str, Any]: ...

    def tallies(self) -> Mapping[str, int]: ...


@dataclass(frozen=True)
class SubmittedJob:
    """A job just queued, with ``warnings`` about its inputs (predicted slot names outside
    its schema): never a refusal, shown by the API's answer and the web's run page alike."""

    job: PublicJob
    warnings: list[dict[str, Any]]


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
        self.decisions = DecisionStore(self.db)
        self.samples = ReviewSamples(self.db)
        self.metrics = ServiceMetrics(self)
        self.run_worker = run_worker and settings.job_slots > 0
        self.worker: WorkerControl | None = None
        self.closing = False

    def start(self) -> None:
        private_folder(self.settings.data_dir)
        self.db.migrate()
        if self.run_worker:
            # imported here: an API-only replica never loads the model client and the runners
            from ..queue import Worker, WorkerProcesses

            worker: WorkerControl
            if self.settings.worker_mode == "process":
                worker = WorkerProcesses(self.settings)
            else:
                worker = Worker(self.db, self.settings, self.files, self.jobs)
            self.worker = worker
            worker.start()

    def check_job(self, request: JobRequest) -> JobSpec:
        """A job request checked against this server (kinds, options, endpoints, limits),
        before any of its references is looked up."""
        return check_job(request, self.settings)

    def submit_job(self, principal: Principal, request: JobRequest) -> SubmittedJob:
        """The one way a job is submitted, for the API (``POST /v1/jobs``) and the web's form
        alike: checked (:meth:`check_job`; a retry's source run; its references; the samples
        and labels of agreement and compare jobs; the token's spending cap), queued, its
        inputs' slot names compared with its schema, and a worker woken."""
        spec = self.check_job(request)
        check_retry(self.db, self.settings, principal.project_id, spec)
        self.jobs.check_references(principal.project_id, spec)
        check_estimate_job(self.jobs, self.files, principal.project_id, spec.kind, spec.inputs)
        job = self.jobs.submit(principal, spec)
        warnings = job_warnings(self.files, principal.project_id, spec.kind, spec.inputs)
        self.nudge()
        return SubmittedJob(job, warnings)

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
