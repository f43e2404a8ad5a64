"""What a job made: its summary, per-turn rows, artifacts and the bundle export."""

from __future__ import annotations

from itertools import chain
from typing import Annotated, Any

from fastapi import Path, Query, Response

from ...._api_models import MAX_OFFSET
from ...._errors import ServiceError
from ...storage import corrections_records
from .._bundles import export_bundle
from .._streams import GzipResponse, NDJSONResponse, attachment, json_lines
from ._common import Reader, ServiceDep, api_router, errors
from .jobs import JobId

router = api_router("results")

_NDJSON = {"application/x-ndjson": {"schema": {
    "type": "string", "description": "One JSON object per line (a row of judgments.jsonl)."}}}


@router.get("/jobs/{job_id}/results", response_model=dict[str, Any],
            responses={200: {"description": "The job's summary JSON (evaluate: summary.json; "
                             "metrics: the --json report; agreement, compare: their JSON; "
                             "audit: the item list)."},
                       **errors(404, 409, 422)})
def get_job_results(principal: Reader, service: ServiceDep, job_id: JobId) -> dict[str, Any]:
    """The summary JSON (evaluate: `summary.json`; metrics: the `--json` report; agreement,
    compare: their JSON; audit: the item list); 409 until the job has finished."""
    row = service.jobs.row(principal.project_id, job_id)
    if row.summary is None:
        raise ServiceError(f"job is {row.status}; results exist once it has finished",
                           status=409)
    summary: dict[str, Any] = row.summary
    return summary


@router.get("/jobs/{job_id}/judgments", response_class=NDJSONResponse,
            responses={200: {"content": _NDJSON, "description": "Rows in run order."},
                       **errors(404, 422)})
def list_job_judgments(principal: Reader, service: ServiceDep, job_id: JobId,
                       verdict: bool | None = None, error: bool | None = None,
                       dialogue_id: Annotated[str | None, Query(max_length=300)] = None,
                       offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
                       limit: Annotated[int | None, Query(ge=1, le=MAX_OFFSET)] = None
                       ) -> NDJSONResponse:
    """JSON Lines, streamed, in run order: one row per turn as in `judgments.jsonl`;
    filtered by verdict, error or dialogue."""
    chunks = service.jobs.judgment_lines(principal.project_id, job_id, verdict=verdict,
                                         error=error, dialogue_id=dialogue_id, offset=offset,
                                         limit=limit)
    first = next(chunks, None)  # a missing job is a 404 before the stream starts
    return NDJSONResponse(chunks if first is None else chain([first], chunks))


@router.get("/jobs/{job_id}/artifacts/{name}", response_class=Response,
            responses={200: {"content": {"text/html": {"schema": {"type": "string"}},
                                         "application/octet-stream": {
                                             "schema": {"type": "string",
                                                        "format": "binary"}}},
                             "description": "The file as an attachment, sandboxed."},
                       **errors(404, 422)})
def get_job_artifact(principal: Reader, service: ServiceDep, job_id: JobId,
                     name: Annotated[str, Path(max_length=200)]) -> Response:
    """A file the job made (audit: `audit.html`), as an attachment with a sandboxing CSP."""
    content_type, data = service.jobs.artifact(principal.project_id, job_id, name)
    headers = {**attachment(name), "Content-Security-Policy": "sandbox allow-scripts",
               "X-Content-Type-Options": "nosniff"}
    return Response(data, media_type=content_type, headers=headers)


@router.get("/jobs/{job_id}/export", response_class=GzipResponse,
            responses={200: {"description": "The bundle (`.tar.gz`): bundle.json, "
                             "manifest.json, summary.json, judgments.jsonl, calls.jsonl."},
                       **errors(404, 409, 422)})
def export_job(principal: Reader, service: ServiceDep, job_id: JobId) -> GzipResponse:
    """The bundle (`.tar.gz`): `bundle.json` (kind, options, inputs' names and sha256),
    `manifest.json`, `summary.json`, `judgments.jsonl`, `calls.jsonl`."""
    name, data = export_bundle(service, principal.project_id, job_id)
    return GzipResponse(data, headers=attachment(name))


_CORRECTIONS = {"application/x-ndjson": {"schema": {
    "type": "string", "description": "One correction per line (the corrections file format: "
    "dst-judge validate corrections --print-schema)."}}}


@router.get("/jobs/{job_id}/corrections", response_class=NDJSONResponse,
            responses={200: {"content": _CORRECTIONS,
                             "description": "The run's candidate decisions as corrections."},
                       **errors(404, 422)})
def export_job_corrections(principal: Reader, service: ServiceDep,
                           job_id: JobId) -> NDJSONResponse:
    """The decisions reviewers took on the label-error candidates of a judge run (or of an
    audit job of predictions files) in the web's candidates queue, as a corrections file
    (JSON Lines): an accepted or edited candidate
    is a correction to the decided value, a rejected one a correction to the annotation's
    own value, an adjudication a correction with `adjudicated: true`; each with its
    candidate id, reviewer, time and the value it replaces (`was`)."""
    row = service.jobs.row(principal.project_id, job_id)
    if row.kind not in ("evaluate", "retry-errors") and not (
            row.kind == "audit" and "run" not in (row.inputs or {})):
        raise ServiceError(f"job {job_id!r} is a {row.kind} job; candidates are a judge "
                           "run's or an audit of predictions files'", status=422)
    records = corrections_records(service.decisions.list(principal.project_id, job_id))
    return NDJSONResponse(json_lines(records),
                          headers=attachment(f"corrections-{job_id}.jsonl"))
