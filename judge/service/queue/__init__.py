"""The job queue's workers: claim a job with a lease, run it with the runner of its kind, renew
the lease while it runs, park, finish, release or give it up; retention. The API's side of the
jobs (submit, read, cancel, delete) is :mod:`judge.service.jobs._jobs`; the two meet only in the
database."""

from ._health import queue_metrics, readiness
from ._journal import CallJournal
from ._kinds import Runners, build_runners, runner_for
from ._lease import JobQueue, Records
from ._process import WorkerProcess, WorkerProcesses, run_workers
from ._runners import Live, Outcome, Park, RunContext, Runner, Toolkit
from ._worker import Worker, new_worker_id

__all__ = [
    "CallJournal",
    "JobQueue",
    "Live",
    "Outcome",
    "Park",
    "Records",
    "RunContext",
    "Runner",
    "Runners",
    "Toolkit",
    "Worker",
    "WorkerProcess",
    "WorkerProcesses",
    "build_runners",
    "new_worker_id",
    "queue_metrics",
    "readiness",
    "run_workers",
    "runner_for",
]
