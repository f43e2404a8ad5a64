"""``/v1/jobs``: submit, list, read, cancel, resume and delete jobs."""

from __future__ import annotations

from typing import Annotated

from fastapi import Body, Path, Query, Response, status
from fastapi.openapi.models import Link

from ...._api_models import (
    MAX_OFFSET,
    MAX_PAGE,
    CreatedJob,
    Job,
    JobKind,
    JobList,
    JobStatus,
    ResumeRequest,
)
from ...jobs import JobRequest
from ._common import Reader, ServiceDep, Submitter, api_router, errors

router = api_router("jobs")
JobId = Annotated[str, Path(max_length=40, description="A job id (`job_...`).")]

_BY_ID = {"job_id": "$response.body#/id"}
JOB_LINKS = {name: Link(operationId=name, parameters=_BY_ID, description=description)
             for name, description in (
                 ("get_job", "The job just returned."),
                 ("get_job_results", "Its results, once it has finished."),
                 ("list_job_judgments", "Its per-turn rows, once it has finished."),
                 ("cancel_job", "Cancel it."),
                 ("delete_job", "Delete it once it is final."))}
"""Where a job returned by one operation can be followed (the OpenAPI links)."""


def _links(*names: str) -> dict[str, Link]:
    return {name: JOB_LINKS[name] for name in names}


@router.post("/jobs", status_code=status.HTTP_201_CREATED, response_model=CreatedJob,
             responses={201: {"description": "The job, queued; `Location` names it.",
                              "links": _links("get_job", "cancel_job")},
                        **errors(403, 422)})
def create_job(principal: Submitter, service: ServiceDep, request: JobRequest,
               response: Response) -> CreatedJob:
    """`{"kind", "inputs", "options", "mode"}` → the queued job (403 when the token's
    spending cap is reached), with `warnings` about its inputs (predicted slot names outside
    the schema)."""
    submitted = service.submit_job(principal, request)
    job = CreatedJob.model_validate({**submitted.job, "warnings": submitted.warnings})
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    return job


@router.get("/jobs", response_model=JobList, responses=errors(422))
def list_jobs(principal: Reader, service: ServiceDep, status: JobStatus | None = None,
              kind: JobKind | None = None,
              limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
              offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0) -> JobList:
    """The project's jobs, newest first."""
    items = service.jobs.list(principal.project_id, status=status, kind=kind, limit=limit,
                              offset=offset)
    return JobList(jobs=[Job.model_validate(i) for i in items], limit=limit, offset=offset,
                   next_offset=JobList.next_of(offset, limit, len(items)))


@router.get("/jobs/{job_id}", response_model=Job,
            responses={200: {"links": _links("get_job_results", "list_job_judgments",
                                             "delete_job")},
                       **errors(404, 422)})
def get_job(principal: Reader, service: ServiceDep, job_id: JobId) -> Job:
    """The job: status, progress, exit code and, once it has finished, its headline."""
    return Job.model_validate(service.jobs.get(principal.project_id, job_id))


@router.post("/jobs/{job_id}/cancel", response_model=Job, responses=errors(403, 404, 422))
def cancel_job(principal: Submitter, service: ServiceDep, job_id: JobId) -> Job:
    """Queued or stopped: cancelled at once; running: at its next heartbeat (≤ 1 s)."""
    return Job.model_validate(service.jobs.cancel(principal.project_id, job_id))


@router.post("/jobs/{job_id}/resume", response_model=Job,
             responses=errors(403, 404, 409, 422))
def resume_job(principal: Submitter, service: ServiceDep, job_id: JobId,
               request: Annotated[ResumeRequest | None, Body()] = None) -> Job:
    """`{"budget": USD}` optional; a stopped, failed or cancelled job is queued again and
    resumes from its run log (409 otherwise)."""
    job = service.jobs.resume(principal.project_id, job_id, request.budget if request else None)
    service.nudge()
    return Job.model_validate(job)


@router.delete("/jobs/{job_id}", status_code=status.HTTP_204_NO_CONTENT,
               response_class=Response, responses=errors(403, 404, 409, 422))
def delete_job(principal: Submitter, service: ServiceDep, job_id: JobId) -> Response:
    """Delete a final job and its results (409 while queued or running)."""
    service.jobs.delete(principal.project_id, job_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
