"""``/v1/jobs/{job_id}/events``: a job's progress as server-sent events."""

from __future__ import annotations

import asyncio

from fastapi import Request

from ...._api_models import Job
from ...._errors import DatabaseUnavailable, ServiceError
from ...jobs import public_job
from .._streams import EventStreamResponse, ServerEvent, event_stream, server_sent_events
from ._common import Reader, ServiceDep, api_router, errors
from .jobs import JobId

router = api_router("jobs")

JOB_EVENT = {
    "type": "object", "required": ["event", "data"],
    "properties": {
        "id": {"type": "string", "description": "The event's number in this stream."},
        "event": {"type": "string", "enum": ["progress", "end"]},
        "data": {"type": "string", "contentMediaType": "application/json",
                 "contentSchema": {"anyOf": [
                     {"$ref": "#/components/schemas/Job"},
                     {"type": "object", "required": ["status"], "additionalProperties": False,
                      "properties": {"status": {"const": "deleted"}}}]}},
    }}
"""One event of the stream as the document states it (OpenAPI's ``itemSchema``, as FastAPI
writes it for its own event streams): its data is the job as JSON text, not any string."""


@router.get("/jobs/{job_id}/events", response_class=EventStreamResponse,
            responses={200: {"description": "`progress` (data: the job) whenever it changes, "
                             "then `end` with the final job (or `{\"status\": \"deleted\"}`).",
                             "content": {"text/event-stream": {"itemSchema": JOB_EVENT}}},
                       **errors(404, 422)})
async def get_job_events(principal: Reader, service: ServiceDep, job_id: JobId,
                    request: Request) -> EventStreamResponse:
    """Server-sent events: `progress` on every change, `end` with the final job. Read from
    the database, so any replica can serve the stream of any job."""
    await asyncio.to_thread(service.jobs.row, principal.project_id, job_id)
    last: tuple[object, ...] | None = None

    async def poll() -> tuple[list[ServerEvent], bool]:
        nonlocal last
        try:
            row = await asyncio.to_thread(service.jobs.row, principal.project_id, job_id)
        except DatabaseUnavailable:  # an outage is not a deleted job: look again
            return [], False
        except ServiceError:
            return [ServerEvent("end", {"status": "deleted"})], True
        job = Job.model_validate(public_job(row))
        key = (job.status, job.progress, job.updated_at)
        if key == last:
            return [], False
        last = key
        event = "end" if job.final else "progress"
        return [ServerEvent(event, job.model_dump(mode="json"))], job.final

    return event_stream(server_sent_events(poll, request, closing=lambda: service.closing))
