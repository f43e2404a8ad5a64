"""Jobs as the API sees them: what a job may ask for (each kind's typed options, checked before
it queues), submit/read/cancel/resume/delete, a job's life (the one writer of its status),
retries of a run, the inputs of estimate jobs, and a job's run log (the database's run store)."""

from ._estimate_inputs import EstimateInputs, check_estimate_job, read_estimate_inputs
from ._jobs import EXIT_MEANINGS, JobStore, PublicJob, public_job
from ._jobspec import (
    BATCH_OPTIONS,
    JUDGE_OPTIONS,
    JobRequest,
    JobSpec,
    check_bundle_options,
    check_job,
    endpoint_for,
)
from ._lifecycle import (
    ACTIVE,
    CLAIMABLE,
    FINAL,
    STATUSES,
    WITH_RESULTS,
    JobStatus,
    delete_jobs,
    move,
    new_job_status,
)
from ._reruns import check_retry, first_run, run_input_files
from ._runlog import HeldRecords, ImmediateWriter, JobRunLog, RunLogWriter, job_run

__all__ = [
    "ACTIVE",
    "BATCH_OPTIONS",
    "CLAIMABLE",
    "EXIT_MEANINGS",
    "FINAL",
    "JUDGE_OPTIONS",
    "STATUSES",
    "WITH_RESULTS",
    "EstimateInputs",
    "HeldRecords",
    "ImmediateWriter",
    "JobRequest",
    "JobRunLog",
    "JobSpec",
    "JobStatus",
    "JobStore",
    "PublicJob",
    "RunLogWriter",
    "check_bundle_options",
    "check_estimate_job",
    "check_job",
    "check_retry",
    "delete_jobs",
    "endpoint_for",
    "first_run",
    "job_run",
    "move",
    "new_job_status",
    "public_job",
    "read_estimate_inputs",
    "run_input_files",
]
